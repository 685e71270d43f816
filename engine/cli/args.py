"""What every ``crucible`` command parses its arguments with: one line on a mistake, never
argparse's usage dump and exit 2 from inside a library."""

from __future__ import annotations

import argparse
from typing import NoReturn

from engine.errors import UserError


def one_line_parser(prog: str, description: str) -> argparse.ArgumentParser:
    class OneLineParser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise UserError(message)

    return OneLineParser(prog=f"crucible {prog}", description=description)


def require_task(overrides: list[str]) -> None:
    """A command that takes tasks says how to choose one, and which sets there are, without one."""
    if not any(o.startswith("task=") for o in overrides):
        from engine.config.tree import no_task_selected

        raise no_task_selected()


def parse_reading(parser: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
    """``args`` parsed for a command that reads the store (query, show, report), with its
    ``--store PATH``, also taken as ``store=PATH`` (as ``crucible run`` takes it); ``ns.store``
    is None for the default store."""
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="the store to read, as run's store=PATH (default: $CRUCIBLE_STORE, "
        "else $CRUCIBLE_HOME/store.duckdb); it must exist",
    )
    overrides = [a.partition("=")[2] for a in args if a.startswith("store=")]
    ns = parser.parse_args([a for a in args if not a.startswith("store=")])
    given = [*overrides, *([ns.store] if ns.store is not None else [])]
    if len(set(given)) > 1:
        raise UserError(f"two stores given ({', '.join(given)}): a command reads one")
    if given and not given[0]:
        raise UserError("--store: give the store's path")
    ns.store = given[0] if given else None
    return ns
