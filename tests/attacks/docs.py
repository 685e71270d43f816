"""tests/attacks/README.md's attack tables, rendered from the catalogue entries themselves, so the
page cannot drift from the code (as envs/integrity/docs.py renders docs/integrity.md's tables).

    .venv/bin/python tests/attacks/docs.py            # print the tables
    .venv/bin/python tests/attacks/docs.py --write    # put them between the README's markers

Each cell is an entry's own field: the reward it must score in each mode (``expect``; the
``local strict`` column is its ``strict`` one, which tests/flavors/coding/test_attacks_local.py
asserts), the paths ``strict`` must drop (``dropped``), and for the runtime audit's attacks the
defences that refuse them, by their names in the coding flavor's catalogue
(envs/coding/defences.py). tests/attacks/test_docs.py keeps the README equal to this render and
every defence named here in the catalogue; tests/attacks/table.py runs the attacks for real and
marks any cell whose run differs from its entry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TESTS_DIR.parent), str(TESTS_DIR)]

from attacks import catalog, ordinary, runtime, runtime_host  # noqa: E402
from attacks.attack import Attack  # noqa: E402
from attacks.runtime import RuntimeAttack  # noqa: E402
from envs.integrity.docs import between, spliced  # noqa: E402

README = Path(__file__).resolve().parent / "README.md"
COMMAND = ".venv/bin/python tests/attacks/docs.py --write"
LOCAL = "local strict"
"""The column of runs on runtime=local (strict only; tests/attacks/table.py's too)."""


def runtime_rows() -> list[RuntimeAttack]:
    """The runtime audit's attacks, on Docker and on the host alike, grouped by their threat."""
    rows = [
        runtime_host.STATE_HUNTED,
        *runtime.RUNTIME,
        *runtime_host.LATER_MODULE,
        runtime_host.MODULES_TO_COME,
        *runtime_host.UNITTEST_ONLY,
    ]
    order = list(runtime.THREATS)
    return sorted(rows, key=lambda row: order.index(row.attack.threat))


def _text(text: str) -> str:
    """A cell's text: a pipe inside a cell would split it."""
    return text.replace("|", "\\|")


def _code(names: Sequence[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _described(attack: Attack, where: str = "") -> str:
    return f"`{attack.id}`: {_text(attack.summary)}" + (f" ({where})" if where else "")


def attack_table(
    attacks: Sequence[Attack],
    columns: Sequence[str],
    cell: Callable[[Attack, str], str],
    drops: Callable[[Attack], str],
) -> list[str]:
    """The attack x mode table's lines: threat, attack, a cell per column, what strict drops.
    Shared by the README's render (cells from ``expect``) and tests/attacks/table.py (real runs)."""
    lines = [
        "| threat | attack | " + " | ".join(columns) + " | strict drops |",
        "| --- | --- | " + " | ".join("---" for _ in columns) + " | --- |",
    ]
    for attack in attacks:
        cells = " | ".join(cell(attack, column) for column in columns)
        lines.append(f"| {attack.threat} | {_described(attack)} | {cells} | {drops(attack)} |")
    return lines


def expected(attack: Attack, column: str) -> float:
    """What ``attack`` must score in ``column`` (a mode, or ``local strict``)."""
    return attack.expected(column.split()[-1])


def expectations(attacks: Sequence[Attack], columns: Sequence[str]) -> str:
    """An attack x mode table from the entries: each cell the reward the entry expects."""
    return "\n".join(attack_table(attacks, columns, lambda a, c: f"{expected(a, c):g}", lambda a: _code(a.dropped)))


def runtime_table(rows: Sequence[RuntimeAttack]) -> str:
    """The runtime audit's attacks: where each runs, its rewards, the defences that refuse it."""
    lines = ["| threat | attack | none | strict | refused by |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        attack = row.attack
        refused = "; ".join(filter(None, [_code(row.refused_by), _text(row.note)]))
        lines.append(
            f"| {attack.threat} | {_described(attack, row.where)} | "
            f"{attack.expected('none'):g} | {attack.expected('strict'):g} | {refused} |"
        )
    return "\n".join(lines)


def render() -> dict[str, str]:
    """Every table, by the name of its markers in the README."""
    return {
        "attacks-sample": expectations(catalog.ATTACKS, ["none", "vault", "strict", LOCAL]),
        "attacks-ordinary": expectations(ordinary.ATTACKS, ["none", "vault", "strict"]),
        "attacks-runtime": runtime_table(runtime_rows()),
    }


def stale(text: str) -> list[str]:
    """The tables whose markers in ``text`` hold other than the render (or are missing)."""
    return [name for name, body in render().items() if between(text, name) != body]


def defences_named(rows: Sequence[RuntimeAttack]) -> set[str]:
    """Every defence the rows name, each to be found in the coding flavor's catalogue."""
    return {name for row in rows for name in row.refused_by}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/attacks/docs.py", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the tables into tests/attacks/README.md")
    args = parser.parse_args(argv)
    tables = render()
    if not args.write:
        print("\n\n".join(tables.values()))
        return 0
    text = README.read_text(encoding="utf-8")
    missing = [name for name in tables if between(text, name) is None]
    if missing:
        print(f"{README}: no <!-- {missing[0]}:begin --> / <!-- {missing[0]}:end --> markers", file=sys.stderr)
        return 1
    README.write_text(spliced(text, tables), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
