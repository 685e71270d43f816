import pytest

from stockroom.report import page_count, paginate


@pytest.mark.parametrize(
    "total, per_page, pages", [(1, 10, 1), (5, 2, 3), (21, 20, 2), (40, 20, 2), (45, 20, 3)]
)
def test_page_count_includes_a_partial_last_page(total, per_page, pages):
    assert page_count(total, per_page) == pages


def test_last_partial_page_holds_the_remaining_rows():
    page = paginate(list(range(5)), 3, 2)
    assert (page.rows, page.pages, page.has_next, page.has_prev) == ([4], 3, False, True)


def test_every_row_appears_on_exactly_one_page():
    rows, seen, number = list(range(45)), [], 1
    while True:
        page = paginate(rows, number, 20)
        seen += page.rows
        if not page.has_next:
            break
        number += 1
    assert seen == rows
