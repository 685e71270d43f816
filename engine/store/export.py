"""``crucible export --format parquet|jsonl DIR`` and ``crucible import DIR``: a store's tables
as files, and those files loaded into another store without loss or duplicates.

An export holds one file per table the store has (read from the database, so a table added
later is exported without a change here) and ``manifest.json``: the schema version, the
format, and each table's columns with their types and its row count. DuckDB writes the files
itself (``COPY ... TO``): Parquet, or newline-delimited JSON. JSON columns are written as
their text, so the text stored is the text read back; timestamps keep their microseconds.

An import checks the whole export first (manifest, every file read in a scratch database,
row counts), then, in one write transaction of the target store, adds what is not there:

- a table with a primary key (``runs``, ``builds``, ``terminals``): rows whose key is new;
- a child table (no key, but its parent's key column: ``steps`` etc. of ``runs``,
  ``terminal_snapshots`` of ``terminals``): only the rows of parents inserted now, so a run
  the target has keeps its own children and never gains a second set;
- any other table: rows the target lacks, compared on ``NATURAL_KEYS`` or else every column.
``meta`` is the target's own. Importing the same export twice therefore adds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import UserError
from engine.store.lock import duckdb, store_turn
from engine.store.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from engine.store.duckdb import DuckDBStore

FORMATS = {"parquet": ".parquet", "jsonl": ".jsonl"}
MANIFEST = "manifest.json"
KIND = "crucible-store-export"
OWN_TABLES = ("meta",)
"""Exported (every table is), never imported: the target keeps its own."""
NATURAL_KEYS = {"sweep_runs": ("sweep_id", "run_id")}
"""Tables without a primary key whose rows are one per these columns (ingest writes them once)."""


# ---------------------------------------------------------------- export


def export_store(store: DuckDBStore, directory: Path, fmt: str) -> dict[str, Any]:
    """Write every table of ``store`` into ``directory`` (new, or empty); the manifest written."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt}: one of {', '.join(FORMATS)}")
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UserError(f"export {directory}: exists and is not an empty directory (name a new one)")
    store.validate(create=False)
    store.ingest_pending()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"export {directory}: cannot create it ({exc.strerror})") from exc
    tables = []
    with store_turn(store.path, read_only=True, timeout=store.lock_timeout) as turn:
        con = turn.connection()
        for name, columns in _tables(con).items():
            target = directory / f"{name}{FORMATS[fmt]}"
            select = ", ".join(
                f"CAST({_ident(c)} AS VARCHAR) AS {_ident(c)}" if t == "JSON" else _ident(c) for c, t in columns
            )
            options = "FORMAT PARQUET" if fmt == "parquet" else "FORMAT JSON"
            con.execute(f"COPY (SELECT {select} FROM {_ident(name)} ORDER BY rowid) TO {_literal(target)} ({options})")
            rows = _count(con, _ident(name))
            tables.append(
                {
                    "name": name,
                    "file": target.name,
                    "rows": rows,
                    "columns": [{"name": c, "type": t} for c, t in columns],
                }
            )
    manifest = {"kind": KIND, "schema_version": SCHEMA_VERSION, "format": fmt, "tables": tables}
    # Last: a directory without a manifest is an export that did not finish.
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """The attached store's tables, each with its (column, type) in order."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main' "
        "ORDER BY table_name, column_index"
    ).fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, []).append((column, kind))
    return tables


# ---------------------------------------------------------------- import


def import_store(store: DuckDBStore, directory: Path) -> dict[str, int]:
    """Load the export in ``directory`` into ``store``; rows added per table. The export is checked
    whole before the store is opened; the rows go in in one transaction (all or nothing)."""
    manifest = read_manifest(directory)
    _check_files(directory, manifest)
    store.validate()
    store.ingest_pending()  # what waits in the target's spool is in the store before we compare
    with store_turn(store.path, read_only=False, timeout=store.lock_timeout) as turn:
        con = turn.connection()
        con.execute("BEGIN TRANSACTION")
        try:
            added = _load(con, directory, manifest)
        except BaseException as exc:
            con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):  # rows the target's types refuse: nothing was added
                raise UserError(f"import {directory}: {_first_line(exc)} (nothing imported)") from exc
            raise
        con.execute("COMMIT")
    return added


def read_manifest(directory: Path) -> dict[str, Any]:
    """The export's manifest, checked. Raises UserError (one line) for a directory that is not one."""
    where = f"import {directory}"
    if not directory.is_dir():
        raise UserError(f"{where}: not a directory")
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except FileNotFoundError as exc:
        raise UserError(f"{where}: no {MANIFEST}: not a crucible export (crucible export makes one)") from exc
    except (OSError, ValueError) as exc:
        raise UserError(f"{where}: {MANIFEST} cannot be read ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise UserError(f"{where}: {MANIFEST} is not a crucible export's manifest")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UserError(
            f"{where}: schema version {version} is newer than this crucible's {SCHEMA_VERSION}; upgrade crucible"
        )
    if manifest.get("format") not in FORMATS or not isinstance(manifest.get("tables"), list):
        raise UserError(f"{where}: {MANIFEST} names no format or tables")
    for table in manifest["tables"]:
        if not (
            isinstance(table, dict)
            and isinstance(table.get("name"), str)
            and isinstance(table.get("rows"), int)
            and isinstance(table.get("file"), str)
            and "/" not in table["file"]
            and isinstance(table.get("columns"), list)
        ):
            raise UserError(f"{where}: {MANIFEST} has a table entry without name, file, rows and columns")
    return manifest


def _check_files(directory: Path, manifest: dict[str, Any]) -> None:
    """Every table file is there and holds the rows the manifest counts (read in a scratch
    database, so a damaged file is found before the target store is touched)."""
    scratch = duckdb.connect(":memory:")
    try:
        for table in manifest["tables"]:
            path = directory / table["file"]
            if not path.is_file():
                raise UserError(f"import {directory}: table {table['name']}: file {table['file']} is missing")
            try:
                columns = ", ".join(_ident(c["name"]) for c in table["columns"]) or "*"
                rows = _count(scratch, f"(SELECT {columns} FROM {_reader(path, manifest['format'], table)})")
            except duckdb.Error as exc:
                raise UserError(f"import {directory}: {table['file']} cannot be read ({_first_line(exc)})") from exc
            if rows != table["rows"]:
                raise UserError(
                    f"import {directory}: {table['file']} holds {rows} rows, the manifest says {table['rows']}"
                )
    finally:
        scratch.close()


def _load(con: duckdb.DuckDBPyConnection, directory: Path, manifest: dict[str, Any]) -> dict[str, int]:
    have = _tables(con)
    keys = _primary_keys(con)
    entries = {t["name"]: t for t in manifest["tables"] if t["name"] not in OWN_TABLES}
    for name in entries:
        if name not in have:
            raise UserError(f"import {directory}: table {name} is not in this store's schema")
    parents = {column: table for table, column in keys.items() if table in entries}
    added: dict[str, int] = {}
    # Keyed tables first: their new keys decide which child rows come.
    for name in sorted(entries, key=lambda n: n not in keys):
        table = entries[name]
        source = f"(SELECT {_cast_columns(table, have[name])} FROM {_reader(directory / table['file'], manifest['format'], table)})"
        if name in keys:
            key = _ident(keys[name])
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {_ident('new_' + name)} AS "
                f"SELECT {key} FROM {source} AS src WHERE {key} NOT IN (SELECT {key} FROM {_ident(name)})"
            )
            where = f"{key} IN (SELECT {key} FROM {_ident('new_' + name)})"
        elif name not in NATURAL_KEYS and (parent := next((c for c in parents if c in _names(have[name])), None)):
            where = f"{_ident(parent)} IN (SELECT {_ident(parent)} FROM {_ident('new_' + parents[parent])})"
        else:
            match = NATURAL_KEYS.get(name) or tuple(_names(have[name]))
            where = "NOT EXISTS (SELECT 1 FROM {t} AS old WHERE {cond})".format(
                t=_ident(name),
                cond=" AND ".join(f"old.{_ident(c)} IS NOT DISTINCT FROM src.{_ident(c)}" for c in match),
            )
        columns = ", ".join(_ident(c) for c in _names(have[name]))
        before = _count(con, _ident(name))
        con.execute(f"INSERT INTO {_ident(name)} ({columns}) SELECT {columns} FROM {source} AS src WHERE {where}")
        added[name] = _count(con, _ident(name)) - before
    for name in keys:
        if name in entries:
            con.execute(f"DROP TABLE IF EXISTS {_ident('new_' + name)}")
    return added


def _primary_keys(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Table -> its one primary-key column, for the attached store's keyed tables."""
    rows = con.execute(
        "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
        "WHERE database_name = current_database() AND constraint_type = 'PRIMARY KEY'"
    ).fetchall()
    return {table: columns[0] for table, columns in rows if len(columns) == 1 and table not in OWN_TABLES}


def _cast_columns(table: dict[str, Any], target: list[tuple[str, str]]) -> str:
    """The target's columns from the file: each cast to the target's type (JSON from its text),
    NULL for a column the export predates."""
    exported = {c["name"] for c in table["columns"]}
    return ", ".join(
        f"CAST({_ident(c)} AS {t}) AS {_ident(c)}" if c in exported else f"CAST(NULL AS {t}) AS {_ident(c)}"
        for c, t in target
    )


def _reader(path: Path, fmt: str, table: dict[str, Any]) -> str:
    if fmt == "parquet":
        return f"read_parquet({_literal(path)})"
    # The types as exported (JSON was written as text), so nothing is guessed from the values.
    columns = ", ".join(
        f"{_literal(c['name'])}: {_literal('VARCHAR' if c['type'] == 'JSON' else c['type'])}" for c in table["columns"]
    )
    return f"read_json({_literal(path)}, format = 'newline_delimited', columns = {{{columns}}})"


def _count(con: duckdb.DuckDBPyConnection, source: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {source}").fetchone()
    return int(row[0]) if row else 0


def _names(columns: list[tuple[str, str]]) -> list[str]:
    return [c for c, _ in columns]


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


__all__ = ["FORMATS", "export_store", "import_store", "read_manifest"]
