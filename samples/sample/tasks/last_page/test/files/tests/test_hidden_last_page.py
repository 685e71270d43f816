import pytest
from crucible_probe import isolated

# The verdict is isolated (isolated_verdict: true): stockroom runs only inside the scenarios,
# in their own interpreter, and the assertions judge the plain data they return.


@isolated
def pages_for(total, per_page):
    from stockroom.report import page_count

    return page_count(total, per_page)


@isolated
def last_partial_page():
    from stockroom.report import paginate

    page = paginate(list(range(5)), 3, 2)
    return page.rows, page.pages, page.has_next, page.has_prev


@isolated
def rows_paged_through(count, per_page):
    from stockroom.report import paginate

    rows, seen, number = list(range(count)), [], 1
    while number <= count + 1:  # a bound, so a pager that never ends cannot hang the test
        page = paginate(rows, number, per_page)
        seen += page.rows
        if not page.has_next:
            break
        number += 1
    return seen


@pytest.mark.parametrize(
    "total, per_page, pages", [(1, 10, 1), (5, 2, 3), (21, 20, 2), (40, 20, 2), (45, 20, 3)]
)
def test_page_count_includes_a_partial_last_page(total, per_page, pages):
    assert pages_for(total, per_page) == pages


def test_last_partial_page_holds_the_remaining_rows():
    assert last_partial_page() == ([4], 3, False, True)


def test_every_row_appears_on_exactly_one_page():
    assert rows_paged_through(45, 20) == list(range(45))
