"""``crucible run --help``: what the command does and the overrides a user chooses from.

Written by crucible rather than left to Hydra: Hydra's app help composes the config first, so
without ``task=`` it is a traceback, and with one it is the whole config, schemas' groups
included. This reads the config files as written (no compose, no Hydra, no task source run),
so it costs nothing and always works; ``--hydra-help`` still shows Hydra's own flags.
"""

from __future__ import annotations

from engine.config.tree import CONF_DIR, group_options, task_sets, written_config_dirs

CHOSEN_GROUPS = {
    "agent": "",
    "integrity": "",
    "runtime": "",
    "flavor": " (a task of another flavor names its own)",
    "env": "",
}
"""The groups listed with their options, in the order a user meets them, and a note on each."""

TEMPLATE = """\
usage: crucible run [-m] task=SET/NAME [OVERRIDE ...]

Run one task with one agent: build (or find in the cache) its image, set the task up in a
fresh workspace, let the agent work through the task's tools, grade the result in another
fresh workspace, and store the run with its verdict (see it with crucible show RUN_ID).
With -m (--multirun), a sweep: every combination of the comma lists and glob()s given,
in parallel; each run is stored, and the sweep's id is printed (crucible report --sweep ID).

choices (group=option; the default in brackets):
  task=SET/NAME           the task, required; task='glob(SET/*)' selects a whole set (with -m)
                          task sets: {task_sets}
{groups}
  model=PROVIDER/NAME     the model of a model-driven agent (e.g. openai/gpt-4o-mini)

values (key=value; any key of the composed config, see --cfg job):
  seed=N, attempt=N       the run's seed and attempt number (-m attempt='range(0,5)': 5 attempts)
  timeouts.setup=S        seconds per stage; also timeouts.agent, timeouts.capture, timeouts.grade
  store=PATH              the DuckDB store (default: $CRUCIBLE_STORE, else $CRUCIBLE_HOME/store.duckdb)
  resume=true             with -m: skip what the store already has a completed run of
  hydra.launcher.n_jobs=N with -m: runs in parallel (default {n_jobs})
  retries.infrastructure=N  more tries of a run a host or worker failed (default 2; docs/scale.md)
  runtime.hosts='[{{url: ssh://me@box:22, slots: 4}}]'  Docker hosts to place runs on (docs/scale.md)
  hydra/launcher=ray      with -m: the jobs on a Ray cluster (hydra.launcher.ray.init.address=HOST:PORT
                          joins one; default: a local one; the ray extra; docs/scale.md)

flags:
  -m, --multirun          a sweep over the comma lists and glob()s
  --cfg job               print the composed config of the overrides given, run nothing
  --hydra-help            Hydra's own flags

examples:
  crucible run task=sample/last_page agent=integration_test
  crucible run -m task='glob(sample/*)' agent=noop,integration_test runtime=local
  crucible run task=sample/query_ops agent=tool_calling model=openai/gpt-4o-mini timeouts.agent=600
"""


def run_help() -> str:
    import yaml  # plain files as written: no OmegaConf grammar to load (as ``_default_parallelism``)

    root = yaml.safe_load((CONF_DIR / "config.yaml").read_text())
    defaults = {}
    for entry in root.get("defaults", []):
        if isinstance(entry, dict):
            defaults.update({str(k): str(v) for k, v in entry.items()})
    lines = []
    for group, note in CHOSEN_GROUPS.items():
        options = [f"[{o}]" if o == defaults.get(group) else o for o in group_options(group, written_config_dirs())]
        lines.append(f"  {group + '=NAME':<24}{', '.join(options)}{note}")
    return TEMPLATE.format(
        task_sets=", ".join(task_sets()) or "(none)",
        groups="\n".join(lines),
        n_jobs=root["hydra"]["launcher"]["n_jobs"],
    )
