"""Predictions from any harness, read and checked, and the agent that submits one verbatim.

Two formats, told apart per entry by their fields (docs/swebench_pro.md, "Predictions"):

- SWE-bench Pro's own (what ``swe_bench_pro_eval.py`` reads and ``helper_code/gather_patches.py``
  writes): a JSON list of ``{instance_id, patch, prefix}``; ``prefix`` names the model or run,
  and the official per-instance files (``<prefix>_patch.diff``, ...).
- SWE-bench's: ``{instance_id, model_patch, model_name_or_path}``, as a JSON list, JSONL, or an
  object keyed by instance id.

In the store, ``agent`` is the prefix (else model_name_or_path) and ``model`` the
model_name_or_path (else the prefix); with neither, both are the file's stem.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agents import AgentContext, AgentOutcome
from engine.config.schema import AgentConfig
from engine.errors import ConfigError
from swe_tasks.flavor import PREDICTION_PATH
from swe_tasks.rows import decode_text

PATCH_FIELDS = ("patch", "model_patch")
"""SWE-bench Pro's name for the patch, then SWE-bench's."""


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    patch: str
    agent: str
    """What the store's ``runs.agent`` says: the prefix, else model_name_or_path, else the file's stem."""
    model: str
    """What the store's ``runs.model`` says: model_name_or_path, else the prefix, else the file's stem."""
    prefix: str = ""
    """The official per-instance files' prefix: the entry's ``prefix`` as given, "" without one
    (the official evaluator's default, so its files are ``_patch.diff``, ...)."""

    @property
    def model_name_or_path(self) -> str:
        """SWE-bench's name for ``model``."""
        return self.model


def read_predictions(path: Path) -> tuple[list[Prediction], str]:
    """The predictions in ``path`` and the file's sha256; a bad entry is one line naming the
    file, the entry and the field."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"predictions {path}: {exc.strerror}") from exc
    found: list[Prediction] = []
    seen: dict[str, int] = {}
    for number, entry in _entries(path, data.decode("utf-8", "replace")):
        pred = _prediction(entry, f"predictions {path}: entry {number}", path.stem)
        if pred.instance_id in seen:
            # eval_results.json holds one verdict per instance; the official script keeps
            # whichever grading ends last
            raise ConfigError(
                f"predictions {path}: entry {number} (instance {pred.instance_id}): "
                f"a second prediction for the instance of entry {seen[pred.instance_id]}"
            )
        seen[pred.instance_id] = number
        found.append(pred)
    return found, hashlib.sha256(data).hexdigest()


def _entries(path: Path, text: str) -> list[tuple[int, Any]]:
    """(entry number, entry): the whole file as JSON (a list, an object keyed by instance id,
    or one prediction), else JSONL (numbered by line)."""
    try:
        whole = json.loads(text)
    except ValueError:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        entries = []
        for number, line in lines:
            try:
                entries.append((number, json.loads(line)))
            except ValueError as exc:
                raise ConfigError(f"predictions {path}: line {number} is not JSON ({exc})") from exc
        return entries
    if isinstance(whole, list):
        return list(enumerate(whole, 1))
    if isinstance(whole, dict) and "instance_id" in whole:  # one line of JSONL
        return [(1, whole)]
    if isinstance(whole, dict):  # {instance_id: {...}}, as SWE-bench's harness also reads
        return [
            (n, {**v, "instance_id": v.get("instance_id", k)} if isinstance(v, dict) else v)
            for n, (k, v) in enumerate(whole.items(), 1)
        ]
    raise ConfigError(f"predictions {path}: a {type(whole).__name__}, not a list of predictions")


def _prediction(entry: Any, where: str, stem: str) -> Prediction:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} is not an object")
    iid = entry.get("instance_id")
    if not isinstance(iid, str) or not iid:
        raise ConfigError(f"{where}: field instance_id is missing or not text")
    where = f"{where} (instance {iid})"
    patches = {f: _text(entry, f, where) for f in PATCH_FIELDS if f in entry}
    if not patches:
        raise ConfigError(
            f"{where}: no patch (field patch, as SWE-bench Pro writes it, or model_patch, as SWE-bench does)"
        )
    if len({p or "" for p in patches.values()}) > 1:
        raise ConfigError(f"{where}: fields patch and model_patch differ (which one is graded?)")
    prefix = _text(entry, "prefix", where) or ""
    if "/" in prefix or "\0" in prefix:
        raise ConfigError(f"{where}: field prefix holds a '/' or a NUL: it names files (<prefix>_patch.diff)")
    model = _text(entry, "model_name_or_path", where) or ""
    for field, name in (("prefix", prefix), ("model_name_or_path", model)):
        if "${" in name:  # crucible's config (OmegaConf) would read it as an interpolation
            raise ConfigError(f"{where}: field {field} holds '${{'")
    patch = next((p for p in patches.values() if p), "")  # null is the empty patch, as SWE-bench reads it
    return Prediction(iid, patch, agent=prefix or model or stem, model=model or prefix or stem, prefix=prefix)


def _text(entry: dict, field: str, where: str) -> str | None:
    """The field's text; None where it is null (an empty patch, or no name); else one line."""
    value = entry.get(field)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{where}: field {field} is not text")
    return value


@dataclass
class PredictionAgentConfig(AgentConfig):
    _target_: str = "swe_tasks.predictions.PredictionAgent"
    name: str = "prediction"
    """What the store calls the agent: the prediction's prefix, else its model_name_or_path."""
    patch: str = ""
    """Encoded like a dataset's texts (``swe_tasks.rows.encode_text``): OmegaConf must not read it."""
    source: str = ""
    """The predictions file it came from, and its sha256: part of the spec, so a changed file
    is a new run and an unchanged one resumes from the store."""
    source_sha256: str = ""


class PredictionAgent:
    """Submits its patch as it is, for grading verbatim: no tool call, nothing applied in the
    agent's workspace (a patch that does not apply must fail where the official one does).

    It calls no model, but takes one: the run's ``model`` (``crucible swe eval`` sets it to the
    prediction's model_name_or_path or prefix) says whose patches these are, so the store's
    ``select agent, model`` puts them beside crucible's own model runs."""

    takes_model = True
    deterministic = True
    capabilities = ()  # it writes one file through its workspace: no MCP or ssh server to wait for
    config_schema = PredictionAgentConfig

    def __init__(
        self, name: str = "prediction", patch: str = "", source: str = "", source_sha256: str = "", model: str = ""
    ) -> None:
        self.name, self.patch, self.model = name, decode_text(patch), model  # set encoded by `crucible swe eval`

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        if ctx.workspace is None:
            raise ConfigError("the prediction agent needs the run's workspace")
        await ctx.workspace.write_file(PREDICTION_PATH, self.patch.encode())
        return AgentOutcome(stop_reason="done")
