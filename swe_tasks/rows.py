"""Instance rows: a JSONL, CSV or Parquet file read by DuckDB, checked field by field.

The published dataset keeps ``fail_to_pass``, ``pass_to_pass`` and
``selected_test_files_to_run`` as Python-literal lists inside strings; a file that holds real
lists is read as well. The official field names are read in any case (the official script's
docstring writes ``FAIL_TO_PASS``/``PASS_TO_PASS``), so the names are each file's own, as
written: DuckDB's names are case-insensitive, and it renames the second of ``fail_to_pass`` and
``FAIL_TO_PASS`` to ``FAIL_TO_PASS_1``. A bad row is one ``ConfigError`` line naming the file,
the instance and the field.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

TEXT_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "requirements",
    "interface",
    "repo_language",
    "before_repo_set_cmd",
    "dockerhub_tag",
)
REQUIRED = ("instance_id", "repo", "base_commit", "patch", "problem_statement")
LIST_FIELDS = ("fail_to_pass", "pass_to_pass", "selected_test_files_to_run")
OFFICIAL = frozenset({*TEXT_FIELDS, *LIST_FIELDS})
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
    # JSON as each object's own text (its keys as written); a CSV's header as its first row
    readers = {
        ".jsonl": "read_json_objects(?, format='newline_delimited')",
        ".json": "read_json_objects(?)",
        ".csv": "read_csv(?, header=false, all_varchar=true)",
        ".parquet": "read_parquet(?)",
        ".jsonl.gz": "read_json_objects(?, format='newline_delimited')",
        ".csv.gz": "read_csv(?, header=false, all_varchar=true)",
    }
    if suffix not in readers:
        raise ConfigError(f"dataset {path}: unknown format {suffix!r} (use .jsonl, .csv or .parquet)")
    try:
        with duckdb.connect(":memory:") as con:
            result = con.execute(f"select * from {readers[suffix]}", [str(path)])
            columns = [d[0] for d in result.description]
            records = result.fetchall()
            if suffix == ".parquet":
                columns = _parquet_names(con, path, columns)
    except duckdb.Error as exc:
        raise ConfigError(f"dataset {path}: {str(exc).splitlines()[0]}") from exc
    if "json" in suffix:
        return [_object(path, index, text) for index, (text,) in enumerate(records)]
    if "csv" in suffix:
        header, records = ([str(n) for n in records[0]], records[1:]) if records else ([], [])
        return [dict(zip(header, values)) for values in records]
    return [dict(zip(columns, values)) for values in records]


def _object(path: Path, index: int, text: str) -> dict[str, Any]:
    record = json.loads(text)
    if not isinstance(record, dict):
        raise ConfigError(f"{path}: row {index + 1} is {type(record).__name__}, not an object")
    return record


def _parquet_names(con, path: Path, columns: list[str]) -> list[str]:
    """The top-level column names as the file writes them (its schema, depth first: each name
    followed by its children's subtrees), where DuckDB renamed one (``FAIL_TO_PASS_1``)."""
    schema = con.execute("select name, num_children from parquet_schema(?)", [str(path)]).fetchall()
    names, at = [], 1  # the first entry is the schema's root
    while at < len(schema):
        names.append(str(schema[at][0]))
        pending = schema[at][1] or 0
        at += 1
        while pending:  # skip the subtree: each child may have children of its own
            pending += (schema[at][1] or 0) - 1
            at += 1
    return names if len(names) == len(columns) else columns


def _official_fields(where: str, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the official field names in any case under their own (``FAIL_TO_PASS``
    is ``fail_to_pass``); a field given in two cases with different values is one line."""
    found: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in record.items():
        name = key.lower() if isinstance(key, str) and key.lower() in OFFICIAL else key
        if value is None or value == "":
            found.setdefault(name, value)  # an empty cell in one of two columns says nothing
            continue
        if name in spelled and _comparable(name, found[name]) != _comparable(name, value):
            raise ConfigError(f"{where}: field {name} is given as {spelled[name]} and as {key}, with different values")
        found[name], spelled[name] = value, key
    return found


def _comparable(name: str, value: Any) -> Any:
    """A list field's names, however written (a Python literal in a string, or a list)."""
    if name in LIST_FIELDS and isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return list(value) if name in LIST_FIELDS and isinstance(value, tuple) else value


def _check(path: Path, index: int, record: dict[str, Any]) -> Row:
    iid = next((v for k, v in record.items() if isinstance(k, str) and k.lower() == "instance_id" and v), None)
    where = f"{path}: instance {iid}" if isinstance(iid, str) and iid else f"{path}: row {index + 1}"
    record = _official_fields(where, record)
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
    return (
        f"{fields['problem_statement']}\n\nRequirements:\n{fields['requirements']}\n\n"
        f"New interfaces introduced:\n{fields['interface']}"
    )
