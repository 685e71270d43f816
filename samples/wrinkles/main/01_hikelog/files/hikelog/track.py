"""The .hkt track format written by the hikelog watch app.

    magic      4 bytes   b"HKT\\0"
    version    1 byte    1
    count      uint16    the number of points
    points     count x   lat int32, lon int32 (both in 1e-5 degrees), elevation uint16 (metres)

All integers are little-endian; south and west are negative.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = b"HKT\x00"
HEADER = struct.Struct("<4sBH")
POINT = struct.Struct("<iiH")


class TrackError(ValueError):
    """The bytes are not a version-1 .hkt track."""


@dataclass(frozen=True)
class Point:
    lat: float
    lon: float
    elevation: int


def read_track(data: bytes) -> list[Point]:
    """The points of an .hkt track, in order."""
    if len(data) < HEADER.size:
        raise TrackError(f"{len(data)} bytes is too short for an .hkt header")
    magic, version, count = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise TrackError("not an .hkt track (bad magic)")
    if version != 1:
        raise TrackError(f"unsupported .hkt version {version}")
    expected = HEADER.size + count * POINT.size
    if len(data) != expected:
        raise TrackError(f"{count} points need {expected} bytes, got {len(data)}")
    return [
        Point(lat / 1e5, lon / 1e5, elevation)
        for lat, lon, elevation in POINT.iter_unpack(data[HEADER.size:])
    ]
