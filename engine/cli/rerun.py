"""``crucible rerun RUN_ID``: the same spec again, as a new run, beside the old verdict.

A stored run is re-planned from what its run directory kept (the saved config and the
recorded pins, ``engine.plan.spec.replan``). Only if that gives the very spec hash the store
holds is it run again — as a new run with its own id and directory; the original stays as
it was. Anything else (the engine's code changed, the image's inputs changed, the pins
were edited) is refused in one line that names what differs: it would be another run.

The image is the spec's own, so an image that exists is reused (the new record's
``from_cache``); nothing that exists is rebuilt. A deterministic agent
(``integration_test``, ``noop``) must reproduce its verdict; a model agent's two verdicts
are only shown.

Exit codes: 0 reproduced (or reported, for a model agent), 1 not reproduced or the rerun
did not complete, 2 a bad run id or run directory, 4 the spec changed (nothing was run).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from engine.config.plugins import plugin_class
from engine.errors import ConfigError, UserError
from engine.models import RunRecord
from engine.plan.spec import Plan, replan
from engine.run.batch import run_one
from engine.run.records import new_run_id
from engine.run.session import Session, open_housekept_store, require_integrity, session_for
from engine.util import paths
from engine.util.tables import format_table

if TYPE_CHECKING:
    from engine.store.duckdb import DuckDBStore

CONFIG_FILES = (Path(".hydra") / "config.yaml", Path("config.yaml"))
"""Where a run directory keeps its config: Hydra's runs, then ``crucible check``'s."""


class SpecChanged(UserError):
    """The run, planned again here, is not the stored spec: running it would be another run."""

    exit_code = 4


@dataclass
class Rerun:
    original: RunRecord
    record: RunRecord
    deterministic: bool

    @property
    def same_verdict(self) -> bool:
        return (self.original.status, self.original.reward) == (self.record.status, self.record.reward)


# ---------------------------------------------------------------- the run directory
def stored_run(store: DuckDBStore, run_id: str) -> RunRecord:
    record = store.get_run(run_id)
    if record is None:
        raise UserError(f"no run '{run_id}' in the store")
    if record.status == "running":
        raise UserError(f"run {record.run_id} is still running; rerun it once it has ended")
    return record


def config_file(record: RunRecord) -> Path:
    """The run's saved config. Raises UserError naming the path when the directory is gone or
    incomplete (a run directory is what a rerun is planned from)."""
    if not record.run_dir:
        raise UserError(f"run {record.run_id} has no run directory recorded; it cannot be re-planned")
    run_dir = Path(record.run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run {record.run_id}: its run directory {run_dir} is gone; it cannot be re-planned")
    found = next((run_dir / name for name in CONFIG_FILES if (run_dir / name).is_file()), None)
    if found is None:
        raise UserError(f"run {record.run_id}: {run_dir} has no .hydra/config.yaml or config.yaml to re-plan from")
    pins = run_dir / "pins.json"
    try:
        # Without its pins, a re-plan would pin the branches as they are now: another spec.
        if not isinstance(json.loads(pins.read_text()), dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise UserError(
            f"run {record.run_id}: {pins} is missing or unreadable ({exc}); it cannot be re-planned"
        ) from exc
    return found


def session_from(config: Path, store: DuckDBStore) -> Session:
    """The builder and runtime the saved config names, storing into ``store``."""
    from engine.config.schema import typed as to_typed

    try:
        saved = to_typed(OmegaConf.to_container(OmegaConf.load(config), resolve=False))
    except Exception as exc:  # OmegaConf's and the schema's errors alike: one line naming the file
        raise ConfigError(f"{config}: cannot be re-planned: {str(exc).splitlines()[0]}") from exc
    return session_for(saved, store=store)


# ---------------------------------------------------------------- the same spec, or why not
def same_plan(record: RunRecord, run_dir: Path, session: Session) -> Plan:
    """The run's plan again; ``SpecChanged`` (saying what differs) unless its hash is the stored one."""
    planned = replan(run_dir, builder=session.builder)
    if planned.spec.spec_hash != record.spec_hash:
        raise SpecChanged(
            f"run {record.run_id} would not be the same run now: {drift(record.spec, planned.spec.to_dict())} "
            f"(stored spec {record.spec_hash[:12]}, planned now {planned.spec.spec_hash[:12]}); nothing was run"
        )
    return planned


def drift(stored: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between the stored spec and the one planned now, most telling first."""
    changed = _changed_paths(stored, now)
    reasons = []
    if "engine_version" in changed:
        reasons.append(
            f"the engine changed (engine version {stored.get('engine_version')} -> {now.get('engine_version')})"
        )
    pins = [p for p in changed if p.startswith("task.pins")]
    if pins:
        reasons.append("a pinned ref differs (" + ", ".join(pins) + ")")
    if any(p.startswith("image.") for p in changed):
        reasons.append(f"the image's inputs changed ({_get(stored, 'image.tag')} -> {_get(now, 'image.tag')})")
    rest = [p for p in changed if p != "engine_version" and not p.startswith(("task.pins", "image."))]
    if rest:
        shown = ", ".join(rest[:4]) + (f" and {len(rest) - 4} more" if len(rest) > 4 else "")
        reasons.append(f"the config plans differently ({shown})")
    return "; ".join(reasons) or "the stored spec hash does not match its spec"


def _changed_paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new), key=str):
            found += _changed_paths(old.get(key), new.get(key), f"{prefix}{key}.")
        return found
    return [] if old == new else [prefix.rstrip(".")]


def _get(spec: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        spec = spec.get(key) if isinstance(spec, dict) else None
    return spec


# ---------------------------------------------------------------- running it again
def new_run_dir(original: Path, config: Path, into: str | None, run_id: str, of: RunRecord) -> Path:
    """The new run's directory, holding the saved config (so a rerun can be rerun) and a note."""
    run_dir = Path(into).expanduser().resolve() if into else paths.runs_dir() / "rerun" / run_id
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise UserError(f"--into {run_dir} exists and is not an empty directory")
    target = run_dir / config.relative_to(original)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(config, target)
    (run_dir / "rerun.json").write_text(json.dumps({"rerun_of": of.run_id, "original_run_dir": of.run_dir}, indent=2))
    return run_dir


def rerun(run_id: str, *, into: str | None = None) -> Rerun:
    """Run a stored run's spec again as a new run. Raises UserError (unknown run, unusable run
    directory) and SpecChanged before anything runs."""
    store = open_housekept_store()
    original = stored_run(store, run_id)
    config = config_file(original)
    assert original.run_dir  # config_file raised UserError otherwise
    session = session_from(config, store)
    planned = same_plan(original, Path(original.run_dir), session)
    require_integrity(session.runtime, planned.spec.integrity)
    new_id = new_run_id()
    run_dir = new_run_dir(Path(original.run_dir), config, into, new_id, original)
    record = asyncio.run(run_one(planned, session, run_dir=run_dir, run_id=new_id))
    deterministic = bool(getattr(plugin_class(planned.spec.agent._target_, where="agent"), "deterministic", False))
    return Rerun(original=original, record=record, deterministic=deterministic)


# ---------------------------------------------------------------- the report
def side_by_side(result: Rerun) -> str:
    rows = [
        (label, fn(result.original), fn(result.record))
        for label, fn in (
            ("run", lambda r: r.run_id),
            ("status", lambda r: r.status + (f" in {r.error_phase}: {r.error}" if r.error else "")),
            ("reward", lambda r: r.reward),
            ("subscores", lambda r: json.dumps(r.subscores, sort_keys=True) if r.subscores else ""),
            ("stop", lambda r: r.stop_reason),
            ("image", lambda r: f"{r.image_tag} ({'reused' if r.from_cache else 'built'})"),
            ("seconds", lambda r: _wall(r)),
            ("run dir", lambda r: r.run_dir),
        )
    ]
    table = format_table(["", "original", "rerun"], [(k, str(a), str(b)) for k, a, b in rows], max_cell=None)
    return "\n".join(table.splitlines()[:-1])  # without the "(n rows)" footer


def _wall(record: RunRecord) -> float | None:
    from datetime import datetime

    if not (record.started_at and record.ended_at):
        return None
    return round(
        (datetime.fromisoformat(str(record.ended_at)) - datetime.fromisoformat(str(record.started_at))).total_seconds(),
        2,
    )


def conclusion(result: Rerun) -> tuple[str, int]:
    """The last line, and the exit code."""
    old, new = result.original, result.record
    who = f"agent {new.agent}" + (f" (model {new.model})" if new.model else "")
    if result.deterministic and not result.same_verdict:
        return (
            f"not reproducible: {who} is deterministic but its verdict changed: "
            f"{old.status} reward {old.reward} -> {new.status} reward {new.reward}"
        ), 1
    if new.status != "completed":
        return f"the rerun did not complete: {new.status} in {new.error_phase}: {new.error}", 1
    if result.deterministic:
        return f"reproduced: {who} scored {new.reward} again, same spec {new.spec_hash[:12]}", 0
    return f"{who} is not deterministic: reward {old.reward} then {new.reward} (reported, not compared)", 0


def run_rerun(run_id: str, *, into: str | None = None, echo: Callable[[str], object] = print) -> int:

    result = rerun(run_id, into=into)
    echo(side_by_side(result))
    line, code = conclusion(result)
    echo(line)
    return code
