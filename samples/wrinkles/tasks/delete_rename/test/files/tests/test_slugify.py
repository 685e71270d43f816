from hikelog.slug import slugify


def test_words_are_lower_case_and_joined_by_dashes():
    assert slugify("Mt. Rainier, Day 2") == "mt-rainier-day-2"


def test_punctuation_runs_make_one_dash():
    assert slugify("  Lakes -- & -- Ridges!  ") == "lakes-ridges"


def test_long_titles_are_cut_at_a_word():
    slug = slugify("The long walk from the valley floor to the summit ridge and back")
    assert slug == "the-long-walk-from-the-valley-floor-to"


def test_a_title_without_words_is_entry():
    assert slugify("?!") == "entry"


def test_accented_letters_lose_their_accents():
    assert slugify("Crêpe Hut, Côte d'Azur") == "crepe-hut-cote-d-azur"
    assert slugify("Café du Lac") == "cafe-du-lac"
