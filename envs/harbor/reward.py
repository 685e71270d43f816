"""Harbor's reward, read from the raw grade alone (a pure function: a stored run regrades).

As Harbor's verifier (0.25) reads it: ``/logs/verifier/reward.json`` (an object of numbers, every
key kept as a subscore) first, else ``reward.txt`` (one number). The run's reward is the
number in reward.txt, or reward.json's ``reward`` key, or its only key. Anything else (no file,
not a number, several keys none named ``reward``, test.sh timed out, the captured diff did not
apply, and under ``strict`` a process of the tests that outlived test.sh) is a reward of 0 with
the reason recorded, and no subscores where the reward files are not to be trusted (they stay in
``raw.rewards``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from typing import Any

from engine.models import Verdict


def decode(value: Any) -> str:
    try:
        return base64.b64decode(str(value or ""), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def rewards(raw: Mapping[str, Any]) -> tuple[dict[str, float], str | None]:
    """(every reward key -> value, None), or ({}, why there is no reward)."""
    if raw.get("reward_json") is not None:
        text = decode(raw["reward_json"])
        try:
            data = json.loads(text)
        except ValueError as exc:
            return {}, f"reward.json is not JSON: {exc}"
        if not isinstance(data, dict) or not data:
            return {}, "reward.json is not a non-empty object of numbers"
        bad = [
            k
            for k, v in data.items()
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v))
        ]
        if bad:
            return {}, f"reward.json's {bad[0]!r} is not a number"
        return {str(k): float(v) for k, v in data.items()}, None
    if raw.get("reward_txt") is not None:
        text = decode(raw["reward_txt"]).strip()
        try:
            value = float(text)
        except ValueError:
            return {}, f"reward.txt is not a number: {text[:60]!r}"
        return ({"reward": value}, None) if math.isfinite(value) else ({}, f"reward.txt is not finite: {text!r}")
    return {}, "test.sh wrote no reward file (/logs/verifier/reward.txt or reward.json)"


def verdict(raw: Mapping[str, Any]) -> Verdict:
    full = dict(raw)
    found, why = rewards(raw)
    reward = 0.0
    if raw.get("apply") not in (None, "ok"):
        why = "the captured diff of the working directory did not apply onto the baseline"
    elif raw.get("timed_out"):
        why = f"test.sh timed out after {raw.get('limit')} s ([verifier].timeout_sec)"
    elif raw.get("mode") == "strict" and raw.get("outlived"):
        # First: such a process may have written (or be mid-way through writing) the reward file.
        why = "processes of the tests outlived test.sh (killed at its end): their reward is not trusted"
    elif why is None and "reward" not in found and len(found) > 1:
        why = f"reward.json has several keys ({', '.join(sorted(found))}) and none named reward"
    elif why is None:
        reward = found.get("reward", next(iter(found.values())))
    full["rewards"], full["reason"] = found, why or f"reward {reward:g}"
    trusted = why is None or why.startswith("reward.json has several keys")
    return Verdict(reward=reward, subscores=dict(found) if trusted else {}, raw=full)


def explain(raw: Mapping[str, Any]) -> list[str]:
    if not raw:
        return ["no raw grade: the run ended before grading (its error says why)"]
    lines = [f"reason: {raw.get('reason')}; test.sh exited {raw.get('exit_code')} (integrity {raw.get('mode')})"]
    source = next((f"reward.{kind}" for kind in ("json", "txt") if raw.get(f"reward_{kind}") is not None), "no file")
    lines.append(
        f"rewards {json.dumps(raw.get('rewards'), sort_keys=True)} from {source}; test.sh's limit "
        f"{raw.get('limit')} s{', timed out' if raw.get('timed_out') else ''}"
    )
    if raw.get("apply") not in (None, "ok"):
        lines += ["git apply output:", *decode(raw.get("apply")).strip().splitlines()[-8:]]
    if raw.get("violations"):
        lines.append("dropped from the graded diff (strict's protected paths): " + ", ".join(raw["violations"][:8]))
    for cmd in raw.get("outlived") or []:
        lines.append(f"outlived test.sh: {cmd[:120]}")
    output = decode(raw.get("output")).strip()
    if output:
        lines += ["test.sh output (last lines):", *output.splitlines()[-8:]]
    return lines
