"""engine.util.paths: where a command keeps its state."""

from __future__ import annotations

from engine.util import paths


def test_an_empty_crucible_home_is_the_default_home_not_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRUCIBLE_HOME", "")
    assert paths.home() == tmp_path / "user" / ".crucible"
    monkeypatch.delenv("CRUCIBLE_HOME")
    assert paths.home() == tmp_path / "user" / ".crucible"
    monkeypatch.setenv("CRUCIBLE_HOME", "state")  # a relative one is the working directory's
    assert paths.home() == tmp_path / "state"
    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    assert paths.store_path() == tmp_path / "state" / "store.duckdb"


def test_an_empty_crucible_home_is_unset_for_the_configs_too(tmp_path):
    """Hydra's run and sweep dirs read ``${oc.env:CRUCIBLE_HOME,~/.crucible}``, which takes an
    empty value as given: the command unsets it, so they agree with engine.util.paths."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "CRUCIBLE_HOME": "", "HOME": str(tmp_path / "user")}
    shown = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "--cfg", "hydra", "--resolve", "task=sample/last_page"],
        capture_output=True, text=True, cwd=paths.PROJECT_ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    dirs = [line.split(":", 1)[1].strip() for line in shown.stdout.splitlines() if line.strip().startswith("dir:")]
    assert len(dirs) == 2 and all(d.startswith(f"{tmp_path}/user/.crucible/runs/") for d in dirs), shown.stdout
