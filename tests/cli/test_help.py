"""`crucible --help` lists the commands plug-in packages add (conf/command/<name>.yaml, its
`help` line), read from their config files: no plug-in is imported, and no task source run,
to list them (engine/cli/plugins.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LISTS_WITHOUT_IMPORTING = """
import sys
from engine.cli.main import main
assert main(["--help"]) == 0
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"swe_tasks", "envs", "hello_plugin"})
assert not loaded, loaded
"""


def crucible(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_help_lists_swe_eval_with_its_description_and_imports_no_flavor():
    # A dataset that cannot be read: listing the commands must not run the task sources either.
    proc = crucible("-c", LISTS_WITHOUT_IMPORTING, env={"CRUCIBLE_SWEBENCH_PRO_DATASET": "/nonexistent/d.jsonl"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("    crucible swe eval PREDICTIONS"))
    assert lines[at + 1].strip() == "grade SWE-bench Pro predictions"  # the description, aligned as the built-ins'
    assert lines[at - 1].startswith("    crucible doctor") and lines[-1].startswith("User mistakes")


def test_a_plug_in_command_of_ones_own_is_listed_from_its_config_alone(tmp_path):
    """Its target does not even exist: only running it would import it."""
    commands = tmp_path / "conf" / "command"
    commands.mkdir(parents=True)
    (commands / "hello.yaml").write_text('_target_: hello_plugin.Hello\nhelp: "hello NAME   say hello to NAME"\n')
    (commands / "bare.yaml").write_text("_target_: hello_plugin.Bare\n")
    env = {"CRUCIBLE_CONFIG_PATH": str(tmp_path / "conf")}
    proc = crucible("-c", LISTS_WITHOUT_IMPORTING, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    hello = next(line for line in lines if line.startswith("    crucible hello NAME "))
    run = next(line for line in lines if line.startswith("    crucible run "))
    assert hello.index("say hello to NAME") == run.index("a run, or")  # the built-ins' column
    bare = next(line for line in lines if line.startswith("    crucible bare "))
    assert bare.endswith("(its conf/command/bare.yaml has no help line)"), bare
    ran = crucible("-m", "engine.cli", "hello", "world", env=env)
    assert ran.returncode != 0 and "hello_plugin.Hello" in ran.stderr and len(ran.stderr.splitlines()) == 1, ran.stderr


def test_a_broken_plug_in_file_still_prints_the_usage_naming_the_file(tmp_path):
    commands = tmp_path / "conf" / "command"
    commands.mkdir(parents=True)
    (commands / "broken.yaml").write_text("- a list, not a mapping\n")
    proc = crucible("-m", "engine.cli", "--help", env={"CRUCIBLE_CONFIG_PATH": str(tmp_path / "conf")})
    assert proc.returncode == 0 and "crucible run [-m] [overrides]" in proc.stdout
    assert f"(plug-in commands not listed: {commands / 'broken.yaml'}: a command is a mapping" in proc.stdout
