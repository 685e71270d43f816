"""`crucible --help` lists the commands plug-in packages add (conf/command/<name>.yaml, its
`help` line), read from their config files: no plug-in is imported, and no task source run,
to list them (engine/cli/plugins.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LISTS_WITHOUT_IMPORTING = """
import sys
from engine.cli.main import main
assert main(["--help"]) == 0
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"swe_tasks", "envs", "hello_plugin"})
assert not loaded, loaded
"""


def crucible(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_help_lists_swe_eval_with_its_description_and_imports_no_flavor():
    # A dataset that cannot be read: listing the commands must not run the task sources either.
    proc = crucible("-c", LISTS_WITHOUT_IMPORTING, env={"CRUCIBLE_SWEBENCH_PRO_DATASET": "/nonexistent/d.jsonl"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("    crucible swe eval PREDICTIONS"))
    assert lines[at + 1].strip() == "grade SWE-bench Pro predictions"  # the description, aligned as the built-ins'
    # After the built-ins (doctor last), among the other plug-in commands (export-task sorts first).
    doctor = next(i for i, line in enumerate(lines) if line.startswith("    crucible doctor"))
    assert doctor < at and lines[-1].startswith("User mistakes")


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


# Each command's --help (issue 39, point 5): what the command does and its main options, exit 0,
# with or without a task= beside it (Hydra's own help for `run` composed first: a traceback
# without task=, the whole config with one).
COMMAND_HELP = {
    "run": ("Run one task with one agent", "-m, --multirun"),
    "check": ("golden must score 1.0 and baseline 0.0", "--rebuild"),
    "build": ("build (or find in the cache) the images", "--dry-run"),
    "lock": ("derive each task's fail-to-pass", "--check N"),
    "rerun": ("plan a stored run again", "--into DIR"),
    "task": ("make a task", "--repo REPO"),
    "query": ("SQL over every run", "--store PATH"),
    "show": ("one run: spec, status", "--store PATH"),
    "report": ("per agent and model", "--sweep ID"),
    "gc": ("remove crucible/task images", "--min-age SECONDS"),
    "doctor": ("check (and with --fix, set up)", "--fix"),
    "terminals": ("the terminals of coding CLIs", "--all"),
    "selfcheck": ("against the flavor contract", "--rebuild"),
    "swe": ("grade SWE-bench Pro predictions", "crucible swe eval PREDICTIONS"),  # a plug-in's command
}


@pytest.mark.parametrize("with_task", [False, True], ids=["alone", "with task="])
@pytest.mark.parametrize("command", sorted(COMMAND_HELP))
def test_every_commands_help_says_what_it_does_and_its_options(command, with_task):
    description, option = COMMAND_HELP[command]
    # Wide enough that argparse does not wrap the description across lines.
    proc = crucible(
        "-m", "engine.cli", command, "--help", *(["task=sample/last_page"] if with_task else []), env={"COLUMNS": "200"}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and proc.stderr == ""
    assert proc.stdout.startswith(f"usage: crucible {command}"), proc.stdout[:300]
    assert description in proc.stdout and option in proc.stdout, proc.stdout


def test_run_help_lists_the_choices_as_the_config_files_have_them(tmp_path):
    """The options and defaults are read from the config files (a task set of one's own
    included), not written into the help: a new agent file is listed without a code change."""
    (tmp_path / "conf" / "task" / "mine").mkdir(parents=True)
    (tmp_path / "conf" / "task" / "mine" / "t.yaml").write_text("name: t\n")
    proc = crucible("-m", "engine.cli", "run", "-h", env={"CRUCIBLE_CONFIG_PATH": str(tmp_path / "conf")})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    agents = sorted(p.stem for p in (ROOT / "conf" / "agent").glob("*.yaml"))
    agent_line = next(line for line in lines if line.lstrip().startswith("agent=NAME"))
    assert agent_line.split(None, 1)[1] == ", ".join(f"[{a}]" if a == "noop" else a for a in agents)
    sets = next(line for line in lines if "task sets:" in line).split("task sets:", 1)[1].strip()
    base = ROOT / "conf" / "task"  # a set at any depth (harbor/dataset): a folder holding a YAML file
    assert sets.split(", ") == sorted(["mine", *{y.parent.relative_to(base).as_posix() for y in base.rglob("*.yaml")}])
    assert any(line.lstrip().startswith("store=PATH") for line in lines)
