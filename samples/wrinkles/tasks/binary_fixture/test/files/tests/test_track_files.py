import subprocess
from pathlib import Path

import pytest

from hikelog.track import read_track

ROOT = Path(__file__).resolve().parent.parent
PATAGONIA = ROOT / "tests" / "data" / "patagonia.hkt"


def test_reads_a_track_south_and_west():
    points = read_track(PATAGONIA.read_bytes())
    assert [(p.lat, p.lon, p.elevation) for p in points] == [
        (pytest.approx(-50.94213), pytest.approx(-72.98944), 118),
        (pytest.approx(-50.94587), pytest.approx(-72.99301), 146),
        (pytest.approx(-50.95012), pytest.approx(-72.99776), 203),
    ]


def test_hkt_dump_prints_the_track():
    done = subprocess.run(
        [str(ROOT / "tools" / "hkt_dump.py"), str(PATAGONIA)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "-50.94213 -72.98944 118",
        "-50.94587 -72.99301 146",
        "-50.95012 -72.99776 203",
    ]
