"""Query results as text: an aligned table for people, CSV and JSON for programs.

All three take what ``Store.query`` returns: column names and rows of Python values
(None, numbers, strings, datetimes, lists, dicts, Decimals, ...).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from typing import Any


class _NoDecimal:
    """What no value is an instance of: ``_decimal()`` before anything imported ``decimal``."""


def _decimal() -> type[Any]:
    """``decimal.Decimal``: a value can be one only once something imported ``decimal`` (DuckDB
    does, for a DECIMAL column), and importing it costs ~1 ms of every ``crucible query``."""
    module = sys.modules.get("decimal")
    return module.Decimal if module is not None else _NoDecimal


MAX_CELL = 80
"""A table cell longer than this is cut (CSV and JSON always carry the full value)."""


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, max_cell: int | None = MAX_CELL) -> str:
    """An aligned plain-text table: numbers right-aligned, None empty, floats to 3 decimals."""
    cells = [[_cell(v, max_cell) for v in row] for row in rows]
    header = [str(c) for c in columns]
    widths = [max([len(header[i])] + [len(r[i]) for r in cells]) for i in range(len(header))]
    numeric = [bool(rows) and all(_is_number(r[i]) or r[i] is None for r in rows) for i in range(len(header))]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(out)


def to_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV with a header row; None is an empty field, floats keep full precision."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if v is None else _plain(v) for v in row])
    return buffer.getvalue()


def to_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A JSON list of objects, one per row; timestamps ISO 8601; NaN and infinities as null."""
    keys = _unique(columns)
    return json.dumps([dict(zip(keys, map(_jsonable, row), strict=True)) for row in rows], indent=2, ensure_ascii=False)


def format_float(value: float) -> str:
    """3 decimals, trailing zeros dropped (1.0 -> "1", 2/3 -> "0.667"); tiny values keep 3 significant digits."""
    if not math.isfinite(value):
        return str(value)
    if value != 0 and abs(value) < 0.001:
        return f"{value:.3g}"
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, _decimal())) and not isinstance(value, bool)


def _cell(value: Any, max_cell: int | None) -> str:
    if value is None:
        return ""
    text = format_float(float(value)) if isinstance(value, (float, _decimal())) else _plain(value)
    # Newlines and tabs would break the alignment of every following column.
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    if max_cell is not None and len(text) > max_cell:
        text = text[: max_cell - 1] + "…"
    return text


def _plain(value: Any) -> str:
    """A value as text for tables and CSV: timestamps ISO, containers as JSON."""
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(_jsonable(value), ensure_ascii=False)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, _decimal()):
        return _jsonable(float(value))
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _unique(columns: Sequence[str]) -> list[str]:
    """Column names made unique (``x``, ``x_2``), so no value is lost when rows become objects."""
    seen: dict[str, int] = {}
    out = []
    for name in columns:
        name = str(name)
        if name in seen:
            seen[name] += 1
            candidate = f"{name}_{seen[name]}"
            while candidate in seen:
                seen[name] += 1
                candidate = f"{name}_{seen[name]}"
            name = candidate
        seen.setdefault(name, 1)
        out.append(name)
    return out
