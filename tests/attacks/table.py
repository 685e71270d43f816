"""Run the attack suite in every integrity mode and print the attack x mode table (markdown).

    .venv/bin/python tests/attacks/table.py [--modes none,vault,strict] [--no-local] [--only ID,ID] [--out FILE]
    .venv/bin/python tests/attacks/table.py --suite ordinary [--out FILE]   # wrinkles/data_driven, docker only

Every cell is the reward of a real run (integration_test agent replaying the attack through
the task's MCP tools): one column per mode on the docker runtime, and a ``local strict``
column with every attack under ``strict`` on ``runtime=local`` (never another mode there:
the agent would be root on the host). A cell that differs from the attack's ``expect`` for
its mode is marked with ``!``; the exit code is 1 if there is one, 2 if the local runtime
cannot give ``strict`` here (``--no-local`` leaves its column out). tests/attacks/README.md's
tables are the same, rendered from the entries' expectations (tests/attacks/docs.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TESTS_DIR.parent), str(TESTS_DIR)]

from attacks import catalog, ordinary  # noqa: E402
from attacks.attack import Attack  # noqa: E402
from attacks.docs import LOCAL, attack_table, expected  # noqa: E402
from attacks.harness import MODES, TASK, AttackRunner  # noqa: E402

SUITES = {
    "sample": (catalog.ATTACKS, catalog.THREATS, TASK),
    "ordinary": (ordinary.ATTACKS, ordinary.THREATS, ordinary.TASK),
}
"""``sample``: sample/last_page (an isolated verdict); ``ordinary``: wrinkles/data_driven, whose
tests import the code under test (tests/attacks/ordinary.py; its task lives in tests/conf)."""


def jobs_for(attacks: list[Attack], modes: list[str]) -> list[tuple]:
    return [a.job(mode) for a in attacks for mode in modes]


def cell(record, expected: float) -> str:
    if record.status != "completed" or record.reward is None:
        return f"{record.status}!"
    mark = "" if record.reward == expected else "!"
    return f"{record.reward:g}{mark}"


def render(attacks: list[Attack], columns: list[str], records: dict) -> tuple[str, int]:
    """The markdown table and the number of cells that differ from ``expect``.

    ``records`` are keyed by (attack id, column); a column is a mode or ``LOCAL``."""
    surprises = 0

    def cell_of(attack: Attack, column: str) -> str:
        nonlocal surprises
        text = cell(records[(attack.id, column)], expected(attack, column))
        surprises += text.endswith("!")
        return text

    def drops(attack: Attack) -> str:
        strict = records.get((attack.id, "strict")) or records.get((attack.id, LOCAL))
        return ", ".join(f"`{p}`" for p in strict.violations) if strict and strict.violations else ""

    return "\n".join(attack_table(attacks, columns, cell_of, drops)), surprises


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", choices=sorted(SUITES), default="sample")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--only", help="comma-separated attack ids")
    parser.add_argument(
        "--local",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"add the '{LOCAL}' column (every attack under strict on runtime=local)",
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, help="also write the table here")
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-attacks-"))
    modes = ns.modes.split(",")
    suite, threats, task = SUITES[ns.suite]
    if ns.suite == "ordinary":
        os.environ["CRUCIBLE_CONFIG_PATH"] = str(TESTS_DIR / "conf")
        ns.local = False  # its rows are about what runs inside pytest, the same on either runtime
    attacks = [a for a in suite if not ns.only or a.id in ns.only.split(",")]

    began = time.perf_counter()
    local = None
    if ns.local:
        from engine.errors import IntegrityUnavailable

        try:  # first: a host that cannot give strict locally is told before the docker runs
            local = AttackRunner(modes=("strict",), runtime="local")
        except IntegrityUnavailable as exc:
            print(f"{exc} (--no-local leaves the '{LOCAL}' column out)", file=sys.stderr)
            return 2
    runner = AttackRunner(task=task, modes=modes)
    records = asyncio.run(runner.run(jobs_for(attacks, modes), concurrency=ns.concurrency))
    columns = list(modes)
    if local is not None:
        ran = asyncio.run(local.run(jobs_for(attacks, ["strict"]), concurrency=ns.concurrency))
        records.update({(attack_id, LOCAL): record for (attack_id, _), record in ran.items()})
        columns.append(LOCAL)
    table, surprises = render(attacks, columns, records)
    seconds = time.perf_counter() - began
    print(table)
    print(f"\n{len(records)} runs in {seconds:.0f} s; threats: " + "; ".join(f"{k} = {v}" for k, v in threats.items()))
    for (attack_id, column), record in sorted(records.items()):
        if record.status != "completed":
            print(f"  {attack_id} [{column}]: {record.status} in {record.error_phase}: {record.error}")
    if ns.out:
        ns.out.write_text(table + "\n")
    if surprises:
        print(f"{surprises} cell(s) differ from the catalog's expectations (marked !)")
    return 1 if surprises else 0


if __name__ == "__main__":
    sys.exit(main())
