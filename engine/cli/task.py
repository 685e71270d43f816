"""``crucible task new``: a task from one upstream fix, gated and locked in one command.

The flavor (``--flavor``, default ``coding``) makes the task's repo and YAML
(``TaskAuthoring.new_task``); then ``crucible lock`` derives its named tests and
``crucible check`` runs its gate with them. A fix the flavor cannot split, a task whose
F2P comes out empty or a gate that fails is one line and a non-zero exit; the repo and YAML
written stay, for the author to look at.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from engine.config.plugins import flavor_class
from engine.config.tree import config_dirs, option_file
from engine.errors import ConfigError
from engine.interfaces import TaskAuthoring
from engine.models import UpstreamFix
from engine.util import paths


def run_task_new(
    task_id: str,
    *,
    repo: str,
    fix: str,
    base: str | None,
    tests: list[str],
    prompt_file: str | None,
    install: str,
    packages: list[str],
    test_command: str | None,
    flavor: str,
    conf_dir: str | None,
    check: int,
    parallel: int,
    echo: Callable[[str], object] = print,
) -> int:
    authoring = _authoring(flavor)
    conf = Path(conf_dir).resolve() if conf_dir else config_dirs()[-1]
    if conf not in [d.resolve() for d in config_dirs()]:
        # Composing finds tasks only on the config path: this process adds it; later commands need it too.
        os.environ["CRUCIBLE_CONFIG_PATH"] = ":".join(filter(None, [os.environ.get("CRUCIBLE_CONFIG_PATH"), str(conf)]))
        echo(f"note: {conf} is not on CRUCIBLE_CONFIG_PATH; add it there to use the task later")
    prompt = None
    if prompt_file is not None:
        try:
            prompt = Path(prompt_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"--prompt-file {prompt_file}: {exc.strerror}") from exc
    request = UpstreamFix(
        task_id=task_id,
        repo=repo,
        fix=fix,
        base=base,
        tests=tests,
        prompt=prompt,
        install=install,
        packages=packages,
        test_command=test_command,
        conf_dir=conf,
        repos_dir=paths.sub("task-repos"),
    )
    written = authoring.new_task(request)
    echo(f"wrote {written}")
    if prompt is None:  # UpstreamFix: no prompt = the fix commit's message
        echo(
            f"note: the prompt is the fix's commit message, which usually names the fix: write the task's own "
            f"in {written} or give --prompt-file (check notes it until then)"
        )
    from engine.cli.check import run_check
    from engine.cli.lock import run_lock

    if run_lock([f"task={task_id}"], check=check, parallel=parallel, echo=echo) != 0:
        echo(f"task {task_id} is not shippable: no lock written")
        return 1
    return run_check([f"task={task_id}"], parallel=parallel, echo=echo)


def _authoring(flavor: str) -> type[TaskAuthoring]:
    source = option_file("flavor", flavor)
    if source is None:
        raise ConfigError(f"unknown flavor '{flavor}' (no conf/flavor/{flavor}.yaml)")
    loaded = OmegaConf.load(source)
    target = str(loaded.get("_target_", "")) if isinstance(loaded, DictConfig) else ""
    cls = flavor_class(target)
    if not callable(getattr(cls, "new_task", None)):
        raise ConfigError(f"flavor '{flavor}' cannot make a task from an upstream fix")
    return cls
