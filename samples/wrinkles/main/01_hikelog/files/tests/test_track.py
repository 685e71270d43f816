import struct

import pytest

from hikelog.track import Point, TrackError, read_track


def track(*points):
    header = struct.pack("<4sBH", b"HKT\x00", 1, len(points))
    return header + b"".join(struct.pack("<iiH", *point) for point in points)


def test_reads_points_in_order():
    data = track((4597634, 763412, 3105), (4597702, 763520, 3141))
    assert read_track(data) == [Point(45.97634, 7.63412, 3105), Point(45.97702, 7.6352, 3141)]


def test_an_empty_track_has_no_points():
    assert read_track(track()) == []


def test_rejects_other_files():
    with pytest.raises(TrackError, match="magic"):
        read_track(b"GPX\x00\x01\x00\x00")


def test_rejects_a_truncated_track():
    with pytest.raises(TrackError, match="need 27 bytes"):
        read_track(track((1, 2, 3), (4, 5, 6))[:-1])
