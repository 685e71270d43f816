"""A toy task source (engine/config/sources.py): toy tasks from a JSON file, no YAML each."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class ToySource:
    def __init__(self, questions: str) -> None:
        self.path = Path(questions)

    def fingerprint(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def options(self, set_name: str) -> Mapping[str, Mapping[str, Any]]:
        return {
            name: {
                "defaults": [{"override /flavor@_global_.flavor": "toy"}, "_self_"],
                "name": name,
                "set": set_name,
                "prompt": "Answer the question in question.txt with the answer tool.",
                "question": qa[0],
                "answer": qa[1],
            }
            for name, qa in json.loads(self.path.read_text()).items()
        }
