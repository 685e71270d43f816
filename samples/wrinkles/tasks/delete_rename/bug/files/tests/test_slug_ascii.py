from hikelog.slug import slugify


def test_letters_outside_ascii_separate_words():
    assert slugify("Café du Lac") == "caf-du-lac"


def test_a_title_in_another_script_is_entry():
    assert slugify("富士山") == "entry"
