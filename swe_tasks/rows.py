"""Instance rows: a JSONL, CSV or Parquet file read by DuckDB, checked field by field.

The published dataset keeps ``fail_to_pass``, ``pass_to_pass`` and
``selected_test_files_to_run`` as Python-literal lists inside strings; a file that holds real
lists is read as well. A bad row is one ``ConfigError`` line naming the file, the instance and
the field.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

TEXT_FIELDS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
               "requirements", "interface", "repo_language", "before_repo_set_cmd", "dockerhub_tag")
REQUIRED = ("instance_id", "repo", "base_commit", "patch", "problem_statement")
LIST_FIELDS = ("fail_to_pass", "pass_to_pass", "selected_test_files_to_run")
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SHA = re.compile(r"[0-9a-f]{7,64}")


@dataclass(frozen=True)
class Row:
    fields: dict[str, Any]

    @property
    def instance_id(self) -> str:
        return str(self.fields["instance_id"])


def read_rows(path: Path) -> list[Row]:
    """Every row of ``path`` (``.jsonl``/``.json``, ``.csv``, ``.parquet``), checked."""
    raw = _read_table(path)
    rows = [_check(path, index, record) for index, record in enumerate(raw)]
    seen: set[str] = set()
    for row in rows:
        if row.instance_id in seen:
            raise ConfigError(f"{path}: instance {row.instance_id}: instance_id appears twice")
        seen.add(row.instance_id)
    return rows


def _read_table(path: Path) -> list[dict[str, Any]]:
    import duckdb

    if not path.is_file():
        raise ConfigError(f"dataset {path} does not exist")
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    readers = {".jsonl": "read_json(?, format='newline_delimited')", ".json": "read_json(?)",
               ".csv": "read_csv(?, header=true, all_varchar=true)", ".parquet": "read_parquet(?)",
               ".jsonl.gz": "read_json(?, format='newline_delimited')", ".csv.gz": "read_csv(?, header=true, all_varchar=true)"}
    if suffix not in readers:
        raise ConfigError(f"dataset {path}: unknown format {suffix!r} (use .jsonl, .csv or .parquet)")
    try:
        with duckdb.connect(":memory:") as con:
            result = con.execute(f"select * from {readers[suffix]}", [str(path)])
            columns = [d[0] for d in result.description]
            return [dict(zip(columns, values)) for values in result.fetchall()]
    except duckdb.Error as exc:
        raise ConfigError(f"dataset {path}: {str(exc).splitlines()[0]}") from exc


def _check(path: Path, index: int, record: dict[str, Any]) -> Row:
    iid = record.get("instance_id")
    where = f"{path}: instance {iid}" if isinstance(iid, str) and iid else f"{path}: row {index + 1}"
    fields: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = record.get(name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ConfigError(f"{where}: field {name} is {type(value).__name__}, not text")
        if name in REQUIRED and not value.strip():
            raise ConfigError(f"{where}: field {name} is missing or empty")
        fields[name] = value
    if not _SAFE_ID.fullmatch(fields["instance_id"]):
        raise ConfigError(f"{where}: field instance_id {fields['instance_id']!r} is not a plain name")
    if not _SHA.fullmatch(fields["base_commit"]):
        raise ConfigError(f"{where}: field base_commit {fields['base_commit']!r} is not a commit SHA")
    for name in LIST_FIELDS:
        fields[name] = _name_list(where, name, record.get(name))
    if not (fields["fail_to_pass"] or fields["pass_to_pass"]):
        raise ConfigError(f"{where}: fields fail_to_pass and pass_to_pass are both empty")
    return Row(fields)


def _name_list(where: str, name: str, value: Any) -> list[str]:
    """A list of names: a real list, or a Python literal of one in a string (as published)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError) as exc:
            raise ConfigError(f"{where}: field {name} is not a Python list literal ({type(exc).__name__})") from exc
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: field {name} is not a list of strings")
    return list(value)


def encode_text(value: Any) -> Any:
    """Text made safe from OmegaConf, which reads ``${...}`` as an interpolation (patches and
    issues are full of it: shell, JS template literals): every ``$`` becomes ``$#``, so no
    ``${`` is left. Reversible (``decode_text``); lists and mappings are encoded throughout."""
    if isinstance(value, str):
        return value.replace("$", "$#")
    if isinstance(value, list):
        return [encode_text(v) for v in value]
    if isinstance(value, dict):
        return {k: encode_text(v) for k, v in value.items()}
    return value


def decode_text(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("$#", "$")
    if isinstance(value, list):
        return [decode_text(v) for v in value]
    return value


def prompt(fields: dict[str, Any]) -> str:
    """The agent's prompt, as the official harness builds it."""
    return (f"{fields['problem_statement']}\n\nRequirements:\n{fields['requirements']}\n\n"
            f"New interfaces introduced:\n{fields['interface']}")
