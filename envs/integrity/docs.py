"""docs/integrity.md's modes table and defence catalogue, rendered from the catalogue itself
(envs/integrity/catalogue.py), so the page cannot drift from the code.

    python -m envs.integrity.docs            # print both tables
    python -m envs.integrity.docs --write    # put them between the page's markers

The shipped flavors are the ones conf/flavor/ names: each is loaded by its ``_target_`` (its
module registers its defences), so this package imports no flavor's code by name.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from envs.integrity import catalogue
from envs.integrity.catalogue import MODES, Defence

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "integrity.md"
TABLES = ("modes", "catalogue")


def shipped_flavors() -> list[str]:
    """The flavors conf/flavor/ ships, in file-name order, each loaded so its defences register."""
    from engine.config.plugins import flavor_class

    names = []
    for path in sorted((ROOT / "conf" / "flavor").glob("*.yaml")):
        node = _yaml(path)
        flavor_class(str(node.get("_target_", "")))
        names.append(str(node.get("name", path.stem)))
    return [name for name in names if name in catalogue.flavors()]


def _groups(flavors: Sequence[str]) -> list[tuple[str, type, list[Defence]]]:
    """Flavors that share one catalogue entry (sdlc grades as coding does) as one group:
    (their names, their integrity schema, their defences)."""
    groups: list[tuple[list[str], type, list[Defence]]] = []
    for flavor in flavors:
        schema, defences = catalogue.schema_of(flavor), catalogue.catalogue(flavor)
        same = next((names for names, _, found in groups if found == defences), None)
        if same is not None:
            same.append(flavor)
        else:
            groups.append(([flavor], schema, defences))
    return [(", ".join(names), schema, defences) for names, schema, defences in groups]


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    found = yaml.safe_load(path.read_text())
    return found if isinstance(found, dict) else {}


def _engine_modes() -> dict[str, dict[str, Any]]:
    return {mode: _yaml(ROOT / "conf" / "integrity" / f"{mode}.yaml") for mode in MODES}


def _on(defence: Defence, mode: str, schema: type) -> bool:
    """Whether ``defence`` is on by default in ``mode``; a switchless one only in ``strict``
    (the flavor's strict grading), where the switch it follows is as ``strict`` sets it."""
    if defence.switch:
        return mode in defence.modes
    return mode == "strict" and defence.on(SimpleNamespace(**catalogue.defaults(schema, mode)))


def _default_mode() -> str:
    for entry in _yaml(ROOT / "conf" / "config.yaml").get("defaults") or []:
        if isinstance(entry, dict) and "integrity" in entry:
            return str(entry["integrity"])
    return ""


def modes_table(flavors: Sequence[str]) -> str:
    """Per mode: what the engine enforces, then each flavor's defences on by default."""
    engine = _engine_modes()
    yes = {True: "yes", False: "no"}
    chosen = _default_mode()
    rows = [
        "| | " + " | ".join(f"`{m}`" + (" (default)" if m == chosen else "") for m in MODES) + " |",
        "| --- |" + " --- |" * len(MODES),
        "| the agent's tool calls run as uid 1000 (`uid_wall`, the engine's) | "
        + " | ".join(yes[bool(engine[m].get("uid_wall"))] for m in MODES)
        + " |",
        "| the agent has a network (`agent_network`, the engine's) | "
        + " | ".join(yes[bool(engine[m].get("agent_network"))] for m in MODES)
        + " |",
    ]
    for names, schema, defences in _groups(flavors):
        cells = [", ".join(f"`{d.name}`" for d in defences if _on(d, mode, schema)) or "none" for mode in MODES]
        rows.append(f"| {names}: defences on | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def catalogue_table(flavors: Sequence[str]) -> str:
    """One row per defence: its flavors, its key, the modes it is on in, what it answers and adds."""
    rows = ["| flavor | defence | on by default in | answers | adds |", "| --- | --- | --- | --- | --- |"]
    for names, schema, defences in _groups(flavors):
        for defence in defences:
            key = (
                f"`{defence.name}`"
                if defence.switch
                else f"`{defence.name}` (no key of its own: part of strict grading{_needs(defence)})"
            )
            modes = ", ".join(m for m in MODES if _on(defence, m, schema))
            rows.append(
                f"| {names} | {key} | {modes or '— (only by an override)'} | {_cell(defence.threat)} | {_cell(defence.adds)} |"
            )
    return "\n".join(rows)


def _needs(defence: Defence) -> str:
    if not defence.needs:
        return ""
    key = defence.needs.lstrip("!")
    return f", with `{key}` {'off' if defence.needs.startswith('!') else 'on'}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(flavors: Sequence[str] | None = None) -> dict[str, str]:
    """Both tables, for ``flavors`` (the shipped ones by default)."""
    chosen = list(flavors) if flavors is not None else shipped_flavors()
    return {"modes": modes_table(chosen), "catalogue": catalogue_table(chosen)}


def between(text: str, table: str) -> str | None:
    """What ``text`` holds between ``table``'s markers (stripped), or None without them."""
    begin, end = f"<!-- {table}:begin -->", f"<!-- {table}:end -->"
    if begin not in text or end not in text:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def spliced(text: str, tables: dict[str, str]) -> str:
    """``text`` with each table put between its markers (a table without markers is left out)."""
    for table, body in tables.items():
        begin, end = f"<!-- {table}:begin -->", f"<!-- {table}:end -->"
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envs.integrity.docs", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write the tables into {PAGE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    tables = render()
    if not args.write:
        print("\n\n".join(tables[t] for t in TABLES))
        return 0
    text = PAGE.read_text()
    missing = [t for t in TABLES if between(text, t) is None]
    if missing:
        print(f"{PAGE}: no <!-- {missing[0]}:begin --> / <!-- {missing[0]}:end --> markers", file=sys.stderr)
        return 1
    PAGE.write_text(spliced(text, tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
