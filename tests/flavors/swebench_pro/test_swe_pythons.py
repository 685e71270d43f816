"""The interpreters sh/replay.sh prepared for crucible's JUnit plugin (its ``pythons`` step), as
the raw grade records them and as a run with no report names them (swe_tasks/junit.py)."""

from __future__ import annotations

from swe_tasks import junit

LISTING = (
    "/usr/bin/python3\t\t\n"
    "/opt/venv/bin/python3\t/opt/venv\t/opt/venv/lib/python3.11/site-packages\n"
    "/srv/ro/bin/python\t/srv/ro\t!/srv/ro/lib/python3.9/site-packages could not be written\n"
    "/x/bin/python3\t/x\t!/x has no lib/python3.*/site-packages\n"
)


def test_the_listing_reads_as_one_record_per_interpreter():
    assert junit.pythons(LISTING) == [
        {"python": "/usr/bin/python3", "venv": ""},
        {"python": "/opt/venv/bin/python3", "venv": "/opt/venv", "site": "/opt/venv/lib/python3.11/site-packages"},
        {
            "python": "/srv/ro/bin/python",
            "venv": "/srv/ro",
            "not_placed": "/srv/ro/lib/python3.9/site-packages could not be written",
        },
        {"python": "/x/bin/python3", "venv": "/x", "not_placed": "/x has no lib/python3.*/site-packages"},
    ]
    assert junit.pythons("") == []
    assert len(junit.pythons("p\t\t\n" * (junit.MAX_PYTHONS + 5))) == junit.MAX_PYTHONS


def test_a_run_with_no_report_names_each_interpreter_and_where_the_plugin_went():
    found = junit.record(True, [], "/tmp/crucible-results-x", junit.pythons(LISTING))
    assert found["state"] == "absent" and found["pythons"][1]["venv"] == "/opt/venv"
    error = found["error"]
    assert error.startswith("pytest wrote no JUnit report")
    assert "/opt/venv/bin/python3 (venv /opt/venv: /opt/venv/lib/python3.11/site-packages)" in error
    assert (
        "/srv/ro/bin/python (venv /srv/ro: not placed, /srv/ro/lib/python3.9/site-packages could not be written)"
        in error
    )
    assert "/usr/bin/python3 (user site-packages, PYTHONPATH)" in error
    assert "no python was found" in junit.record(True, [], "/tmp/r", [])["error"]


def test_a_grading_that_prepared_no_interpreter_records_none():
    """Gradings stored before the search, and instances whose tests are not pytest's, have no
    ``pythons``: their reason is what it was."""
    found = junit.record(True, [], "/tmp/r")
    assert "pythons" not in found and found["error"] == junit.STATES["absent"]
