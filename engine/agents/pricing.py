"""Token prices, and the cost of one model call.

Prices are deliberately NOT part of the run spec: a price change must not make the same
run a different one. The table is ``conf/prices.yaml`` (shipped, dated), overlaid by the
file named by ``$CRUCIBLE_PRICES``, else by ``$CRUCIBLE_HOME/prices.yaml`` if it exists.
Keys are the ``model=`` value (``openai/gpt-4o-mini``); values are USD per million tokens:

    models:
      openai/gpt-4o-mini: {input: 0.15, cached_input: 0.075, output: 0.60}

A model without an entry, or a call that used a kind of token the entry has no price
for (e.g. cache reads), costs ``None``: unknown, never guessed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

from engine.agents.providers import Usage
from engine.errors import ConfigError
from engine.util import paths

SHIPPED = paths.PROJECT_ROOT / "conf" / "prices.yaml"


@dataclass(frozen=True)
class Price:
    input: float | None = None
    output: float | None = None
    cached_input: float | None = None
    cache_write: float | None = None


def table_files() -> list[Path]:
    explicit = os.environ.get("CRUCIBLE_PRICES")
    overlay = Path(explicit).expanduser() if explicit else paths.home() / "prices.yaml"
    if explicit and not overlay.is_file():
        raise ConfigError(f"$CRUCIBLE_PRICES names {overlay}, which is not a file")
    return [SHIPPED] + ([overlay] if overlay.is_file() else [])


def load_prices() -> dict[str, Price]:
    """The merged price table; later files override whole entries of earlier ones."""
    table: dict[str, Price] = {}
    for path in table_files():
        table.update(_read(path))
    return table


def _read(path: Path) -> dict[str, Price]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"price table {path}: {str(exc).splitlines()[0]}") from exc
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ConfigError(f"price table {path}: expected a top-level 'models:' mapping")
    known = {f.name for f in fields(Price)}
    table = {}
    for model, entry in models.items():
        if not isinstance(entry, dict) or set(entry) - known:
            raise ConfigError(f"price table {path}: '{model}' must map some of {sorted(known)} to USD per Mtok")
        for key, value in entry.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise ConfigError(f"price table {path}: '{model}'.{key} is {value!r}, not a price")
        table[str(model)] = Price(**{k: (None if v is None else float(v)) for k, v in entry.items()})
    return table


def cost_usd(price: Price | None, usage: Usage) -> float | None:
    """The call's cost in USD, or None when any part of it has no known price."""
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    parts = [
        (usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens, price.input),
        (usage.cached_input_tokens, price.cached_input),
        (usage.cache_write_tokens, price.cache_write),
        (usage.output_tokens, price.output),
    ]
    total = 0.0
    for tokens, per_million in parts:
        if tokens:
            if per_million is None:
                return None
            total += tokens * per_million
    return round(total / 1_000_000, 10)
