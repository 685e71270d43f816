"""Predictions from any harness (the official format: ``instance_id``, ``model_patch``,
``model_name_or_path``), read and checked, and the agent that submits one verbatim."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from engine.agents import AgentContext, AgentOutcome
from engine.config.schema import AgentConfig
from engine.errors import ConfigError
from swe_tasks.flavor import PREDICTION_PATH
from swe_tasks.rows import decode_text


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    model_patch: str
    model_name_or_path: str


def read_predictions(path: Path) -> tuple[list[Prediction], str]:
    """The predictions in ``path`` (a JSON list or JSONL) and the file's sha256; a bad entry
    is one line naming the entry and the field."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"predictions {path}: {exc.strerror}") from exc
    text = data.decode("utf-8", "replace")
    try:
        entries = json.loads(text) if text.lstrip().startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise ConfigError(f"predictions {path}: not JSON or JSONL ({exc})") from exc
    if isinstance(entries, dict):  # {instance_id: {...}} as some harnesses write
        entries = [{"instance_id": k, **v} if isinstance(v, dict) else v for k, v in entries.items()]
    found = []
    for index, entry in enumerate(entries):
        where = f"predictions {path}: entry {index + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} is not an object")
        iid = entry.get("instance_id")
        if not isinstance(iid, str) or not iid:
            raise ConfigError(f"{where}: field instance_id is missing or not text")
        patch = entry.get("model_patch", entry.get("patch"))
        if patch is None:
            patch = ""
        if not isinstance(patch, str):
            raise ConfigError(f"{where} (instance {iid}): field model_patch is not text")
        model = entry.get("model_name_or_path") or "predictions"
        if not isinstance(model, str):
            raise ConfigError(f"{where} (instance {iid}): field model_name_or_path is not text")
        found.append(Prediction(iid, patch, model))
    return found, hashlib.sha256(data).hexdigest()


@dataclass
class PredictionAgentConfig(AgentConfig):
    _target_: str = "swe_tasks.predictions.PredictionAgent"
    name: str = "prediction"
    """The predictions' ``model_name_or_path``: what the store calls the agent."""
    patch: str = ""
    """Encoded like a dataset's texts (``swe_tasks.rows.encode_text``): OmegaConf must not read it."""
    source: str = ""
    """The predictions file it came from, and its sha256: part of the spec, so a changed file
    is a new run and an unchanged one resumes from the store."""
    source_sha256: str = ""


class PredictionAgent:
    """Submits its patch as it is, for grading verbatim: no tool call, nothing applied in the
    agent's workspace (a patch that does not apply must fail where the official one does)."""

    takes_model = False
    deterministic = True
    config_schema = PredictionAgentConfig

    def __init__(self, name: str = "prediction", patch: str = "", source: str = "", source_sha256: str = "") -> None:
        self.name, self.patch = name, decode_text(patch)  # set encoded by `crucible swe eval`

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        if ctx.workspace is None:
            raise ConfigError("the prediction agent needs the run's workspace")
        await ctx.workspace.write_file(PREDICTION_PATH, self.patch.encode())
        return AgentOutcome(stop_reason="done")
