"""The `wrinkles` task set, and the repogen features it needs (deleted.txt, modes.txt, binary files).

No Docker. The repo is built with the set's own generator. Each Python task is checked the
way the grader sees it: a worktree of the baseline (or the golden) with the WHOLE hidden
change applied on top, ``git diff T_baseline T_test --binary | git apply`` (deletions,
renames, binary files and modes included, which ``git checkout T_test -- .`` would not
give), then the task's own test command with this interpreter as the image's ``python3``.
The Go task is checked for its shape only; running it needs ``go`` and is the Docker side's job.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from engine.config.schema import as_schema
from envs.coding.schema import CodingTaskConfig

ROOT = Path(__file__).resolve().parents[3]
SET_DIR = ROOT / "samples" / "wrinkles"
CONF = ROOT / "tests" / "conf"
PYTHON_TASKS = ("binary_fixture", "data_driven", "delete_rename", "xfail_skip")
# Per task: the tests that fail on baseline + hidden change and pass on golden + hidden change.
# Only xfail_skip names them in its config (its suite skips), the others are graded by the rule.
FAIL_TO_PASS = {
    "binary_fixture": {
        "tests/test_track_files.py::test_reads_a_track_south_and_west",
        "tests/test_track_files.py::test_hkt_dump_prints_the_track",
    },
    "data_driven": {"tests/test_cases.py::test_cases[decimal.json]", "tests/test_cases.py::test_cases[spaced.json]"},
    "delete_rename": {"tests/test_slugify.py::test_accented_letters_lose_their_accents"},
    "xfail_skip": {
        "tests/test_units.py::test_upper_case_units",
        "tests/test_units.py::test_mixed_case_units_without_a_space",
    },
}
# An honest fix for data_driven that shares no code with the golden: no regex for unit parts.
DATA_DRIVEN_ALTERNATIVE = '''\
"""Durations as hikers type them: "2h", "45m", "1h30m", "1.5h", "1h 30m", or "1:30:00"."""
from __future__ import annotations

SECONDS = {"h": 3600, "m": 60, "s": 1}
DIGITS = "0123456789"


def _number(text: str, original: str) -> float:
    whole, dot, fraction = text.partition(".")
    if not whole or any(c not in DIGITS for c in whole + fraction) or (dot and not fraction):
        raise ValueError(f"not a duration: {original!r}")
    return float(text)


def _clock(text: str) -> int | None:
    fields = text.strip().split(":")
    if len(fields) not in (2, 3) or not fields[0] or any(c not in DIGITS for c in fields[0]):
        return None
    if any(len(f) != 2 or any(c not in DIGITS for c in f) or f[0] > "5" for f in fields[1:]):
        return None
    hours, minutes, seconds = (int(f) for f in (fields + ["0"])[:3])
    return hours * 3600 + minutes * 60 + seconds


def parse_duration(text: str) -> int:
    """Whole seconds in ``text`` (rounded); ValueError if it is not a duration."""
    text = text.lower()
    clock = _clock(text)
    if clock is not None:
        return clock
    total, number, parts = 0.0, "", 0
    for char in text:
        if char in SECONDS:
            total += _number(number, text) * SECONDS[char]
            number, parts = "", parts + 1
        elif char.isspace():
            if number:
                raise ValueError(f"not a duration: {text!r}")
        else:
            number += char
    if number or not parts:
        raise ValueError(f"not a duration: {text!r}")
    return round(total)


def format_duration(seconds: int) -> str:
    """H:MM:SS, the way parse_duration reads it back."""
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
'''
# The tests that read `runs` share its 14 pytest runs (about 1 s of CPU each): slow, as a group.
slow = pytest.mark.slow
RESULT = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)", re.MULTILINE)


def git_env() -> dict[str, str]:
    """No inherited GIT_* (a GIT_DIR would redirect every call), no user or system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=git_env(), input=stdin, capture_output=True, check=True)
    return done.stdout.decode()


def load_repogen():
    """samples/repogen.py is a script's module, not a package's: load it by path."""
    spec = importlib.util.spec_from_file_location("samples_repogen", ROOT / "samples" / "repogen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


repogen = load_repogen()


def build(out: Path, umask: int = -1) -> dict[str, str]:
    subprocess.run(
        [sys.executable, str(SET_DIR / "build_repo.py"), str(out)], check=True, capture_output=True, umask=umask
    )
    listing = git(out, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split(" ", 1) for line in listing.splitlines())


def load_tasks() -> dict[str, dict]:
    names = sorted(p.stem for p in (CONF / "task" / "wrinkles").glob("*.yaml"))
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return {
            name: dataclasses.asdict(
                as_schema(
                    CodingTaskConfig,
                    compose(overrides=[f"hydra.searchpath=[file://{CONF}]", f"+task=wrinkles/{name}"]).task,
                    "task",
                )
            )
            for name in names
        }


@dataclasses.dataclass(frozen=True)
class Run:
    code: int
    output: str

    @property
    def results(self) -> dict[str, str]:
        """Node id -> PASSED / FAILED / ERROR / XFAIL / XPASS, from pytest's ``-rA`` summary."""
        return {node: status for status, node in RESULT.findall(self.output)}

    def with_status(self, status: str) -> set[str]:
        return {node for node, seen in self.results.items() if seen == status}

    @property
    def summary(self) -> str:
        return self.output.strip().splitlines()[-1]


@dataclasses.dataclass(frozen=True)
class Wrinkles:
    repo: Path
    refs: dict[str, str]
    tasks: dict[str, dict]
    work: Path
    bin_dir: Path
    """Holds a ``python3`` that is this interpreter, for the scripts the tests run by their shebang."""

    def diff(self, task: str, *options: str) -> str:
        refs = self.tasks[task]["refs"]
        return git(self.repo, "diff", *options, refs["baseline"], refs["test"])

    def tree(self, task: str, side: str, hidden: bool, name: str) -> Path:
        """A worktree of ``side``, with the whole hidden change applied when ``hidden``."""
        dest = self.work / f"{task}_{name}"
        git(self.repo, "worktree", "add", "--quiet", "--detach", str(dest), self.tasks[task]["refs"][side])
        if hidden:
            patch = subprocess.run(
                ["git", "diff", "--binary", self.tasks[task]["refs"]["baseline"], self.tasks[task]["refs"]["test"]],
                cwd=self.repo,
                env=git_env(),
                capture_output=True,
                check=True,
            ).stdout
            git(dest, "apply", stdin=patch)
        return dest

    def run_tests(self, task: str, workdir: Path) -> Run:
        """The task's test command, ``-rA`` added so that every test's outcome is listed."""
        argv = shlex.split(self.tasks[task]["test_command"])
        assert argv[:3] == ["python3", "-m", "pytest"], argv
        env = {
            **os.environ,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        done = subprocess.run(
            [sys.executable, *argv[1:], "-rA"], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
        )
        return Run(done.returncode, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def wrinkles(tmp_path_factory) -> Wrinkles:
    root = tmp_path_factory.mktemp("wrinkles")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    (root / "work").mkdir()
    return Wrinkles(root / "repo", build(root / "repo"), load_tasks(), root / "work", bin_dir)


@pytest.fixture(scope="module")
def runs(wrinkles) -> dict[tuple[str, str], Run]:
    """(task, tree) -> the test command's run. Trees: ``baseline`` (visible suite only),
    ``baseline+hidden``, ``golden+hidden``; plus delete_rename's ``golden`` (without the
    hidden change) and data_driven's ``alternative+hidden`` (golden tree, the alternative fix)."""
    jobs = {}
    for task in PYTHON_TASKS:
        jobs[task, "baseline"] = wrinkles.tree(task, "baseline", False, "baseline")
        jobs[task, "baseline+hidden"] = wrinkles.tree(task, "baseline", True, "baseline_hidden")
        jobs[task, "golden+hidden"] = wrinkles.tree(task, "golden", True, "golden_hidden")
    jobs["delete_rename", "golden"] = wrinkles.tree("delete_rename", "golden", False, "golden")
    alternative = wrinkles.tree("data_driven", "golden", True, "alternative_hidden")
    (alternative / "hikelog" / "duration.py").write_text(DATA_DRIVEN_ALTERNATIVE)
    jobs["data_driven", "alternative+hidden"] = alternative
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda job: wrinkles.run_tests(job[0][0], job[1]), jobs.items())
        return dict(zip(jobs, done))


# ------------------------------------------------------------------ repo and configs
def test_wrinkles_build_is_deterministic_and_checks_out_main_cleanly(wrinkles, tmp_path):
    assert build(tmp_path / "again", umask=0o077) == wrinkles.refs
    assert git(wrinkles.repo, "status", "--porcelain") == ""
    expected = {f"{task}_{side}" for task in wrinkles.tasks for side in ("baseline", "test", "golden")}
    assert set(wrinkles.refs) == {"main"} | expected


def test_wrinkles_configs_compose_with_the_whole_change_as_hidden_tests(wrinkles):
    assert sorted(wrinkles.tasks) == sorted(p.name for p in (SET_DIR / "tasks").iterdir())
    for name, task in wrinkles.tasks.items():
        assert (task["name"], task["set"], task["repo"]) == (name, "wrinkles", "generated://wrinkles")
        assert task["hidden_tests"] == [] and "{test_files}" not in task["test_command"]
    assert set(wrinkles.tasks["xfail_skip"]["fail_to_pass"]) == FAIL_TO_PASS["xfail_skip"]


def test_delete_rename_hidden_change_deletes_one_test_file_and_renames_another(wrinkles):
    lines = wrinkles.diff("delete_rename", "--name-status", "-M").splitlines()
    assert "D\ttests/test_slug_ascii.py" in lines
    assert any(re.fullmatch(r"R\d+\ttests/test_slug\.py\ttests/test_slugify\.py", line) for line in lines), lines
    assert len(lines) == 2, lines


def test_xfail_skip_hidden_change_modifies_a_visible_test_file(wrinkles):
    assert wrinkles.diff("xfail_skip", "--name-status").splitlines() == ["M\ttests/test_units.py"]


def test_data_driven_hidden_change_is_only_json_cases(wrinkles):
    lines = wrinkles.diff("data_driven", "--name-status").splitlines()
    assert lines == ["A\ttests/cases/decimal.json", "A\ttests/cases/spaced.json"]


def test_binary_fixture_hidden_change_has_a_binary_file_and_a_mode_change(wrinkles):
    refs = wrinkles.tasks["binary_fixture"]["refs"]
    assert "-\t-\ttests/data/patagonia.hkt" in wrinkles.diff("binary_fixture", "--numstat").splitlines()
    assert "mode change 100644 => 100755 tools/hkt_dump.py" in wrinkles.diff("binary_fixture", "--summary")
    blob = subprocess.run(
        ["git", "show", f"{refs['test']}:tests/data/patagonia.hkt"],
        cwd=wrinkles.repo,
        env=git_env(),
        capture_output=True,
        check=True,
    ).stdout
    assert blob.startswith(b"HKT\x00") and b"\xff" in blob
    with pytest.raises(UnicodeDecodeError):
        blob.decode("utf-8")
    for side, mode in (("baseline", "100644"), ("test", "100755"), ("golden", "100644")):
        assert git(wrinkles.repo, "ls-tree", refs[side], "tools/hkt_dump.py").split()[0] == mode, side


def test_go_module_is_a_dependency_free_go_1_19_module_with_a_table_test(wrinkles):
    task = wrinkles.tasks["go_module"]
    assert task["system_packages"] == ["golang-go"] and "go test -json" in task["test_command"]
    refs = task["refs"]
    go_mod = git(wrinkles.repo, "show", f"{refs['baseline']}:gomod/go.mod")
    assert go_mod.splitlines() == ["module example.com/wrinkles", "", "go 1.19"]
    assert wrinkles.diff("go_module", "--name-status").splitlines() == ["A\tgomod/clock/boundary_test.go"]
    hidden = git(wrinkles.repo, "show", f"{refs['test']}:gomod/clock/boundary_test.go")
    assert "t.Run(tc.name" in hidden and "cases := []struct" in hidden
    fix = git(wrinkles.repo, "diff", refs["baseline"], refs["golden"], "--name-only").splitlines()
    assert fix == ["gomod/clock/clock.go"]


# ------------------------------------------------------------------ the Python tasks work
@slow
@pytest.mark.parametrize("task", PYTHON_TASKS)
def test_visible_suite_passes_on_baseline(runs, task):
    run = runs[task, "baseline"]
    assert run.code == 0 and not run.with_status("FAILED") | run.with_status("ERROR"), run.output


@slow
@pytest.mark.parametrize("task", PYTHON_TASKS)
def test_hidden_change_fails_exactly_its_fail_to_pass_tests_on_baseline(runs, task):
    run = runs[task, "baseline+hidden"]
    assert run.code == 1, run.output  # 1 = tests ran and some failed; 2+ = collection or usage error
    assert run.with_status("FAILED") == FAIL_TO_PASS[task], run.output
    assert not run.with_status("ERROR"), run.output


@slow
@pytest.mark.parametrize("task", PYTHON_TASKS)
def test_golden_passes_with_the_hidden_change(runs, task):
    run = runs[task, "golden+hidden"]
    assert run.code == 0 and FAIL_TO_PASS[task] <= run.with_status("PASSED"), run.output
    assert set(run.results.values()) <= {"PASSED", "XFAIL"}, run.output
    if task != "xfail_skip":  # the rule without lists: nothing but passes
        assert re.fullmatch(r"[1-9][0-9]* passed in .*", run.summary.strip("= ")), run.output


@slow
def test_xfail_skip_suite_skips_and_xfails_and_keeps_its_pass_to_pass_tests(runs, wrinkles):
    task = wrinkles.tasks["xfail_skip"]
    for tree in ("baseline", "baseline+hidden", "golden+hidden"):
        run = runs["xfail_skip", tree]
        assert "2 skipped" in run.summary and "1 xfailed" in run.summary, run.output
        assert run.with_status("XFAIL") == {"tests/test_units_planned.py::test_nautical_miles"}, run.output
        assert set(task["pass_to_pass"]) <= run.with_status("PASSED"), (tree, run.output)


@slow
def test_delete_rename_deleted_test_pins_the_bug_so_golden_fails_it(runs):
    run = runs["delete_rename", "golden"]
    assert run.code == 1, run.output
    assert run.with_status("FAILED") == {"tests/test_slug_ascii.py::test_letters_outside_ascii_separate_words"}


def test_binary_fixture_hidden_change_makes_the_dump_tool_executable(wrinkles):
    """Its test runs tools/hkt_dump.py by its shebang: without the mode change it could not pass."""
    before = wrinkles.tree("binary_fixture", "golden", False, "mode_before")
    after = wrinkles.tree("binary_fixture", "golden", True, "mode_after")
    assert not os.access(before / "tools" / "hkt_dump.py", os.X_OK)
    assert os.access(after / "tools" / "hkt_dump.py", os.X_OK)
    assert (after / "tests" / "data" / "patagonia.hkt").read_bytes()[:4] == b"HKT\x00"


@slow
def test_data_driven_alternative_fix_passes_like_the_golden(runs):
    run = runs["data_driven", "alternative+hidden"]
    assert run.code == 0 and FAIL_TO_PASS["data_driven"] <= run.with_status("PASSED"), run.output
    assert run.results.keys() == runs["data_driven", "golden+hidden"].results.keys()


# ------------------------------------------------------------------ repogen: deletions, modes, errors
def write_step(set_dir: Path, step: str, files: dict[str, bytes], **lists: str) -> None:
    """One commit directory under ``set_dir/main``; ``lists`` become deleted.txt / modes.txt."""
    base = set_dir / "main" / step
    (base / "files").mkdir(parents=True)
    (base / "message.txt").write_text(f"{step}\n")
    for rel, data in files.items():
        (base / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / "files" / rel).write_bytes(data)
    for name, text in lists.items():
        (base / f"{name}.txt").write_text(text)


@pytest.fixture
def tiny(tmp_path) -> Path:
    set_dir = tmp_path / "tiny"
    (set_dir / "tasks").mkdir(parents=True)
    write_step(
        set_dir,
        "01_start",
        {"a.txt": b"a\n", "gone.txt": b"gone\n", "bin/run.sh": b"#!/bin/sh\n"},
        modes="100755 bin/run.sh\n",
    )
    return set_dir


def test_repogen_deletes_files_and_sets_modes(tiny, tmp_path):
    write_step(tiny, "02_more", {"blob.bin": bytes(range(256))}, deleted="gone.txt\n")
    refs = repogen.build(tiny, tmp_path / "repo")
    assert list(refs) == ["main"]
    listing = git(tmp_path / "repo", "ls-tree", "-r", "main").splitlines()
    assert [(line.split()[0], line.split("\t")[1]) for line in listing] == [
        ("100644", "a.txt"),
        ("100755", "bin/run.sh"),
        ("100644", "blob.bin"),
    ]
    assert (tmp_path / "repo" / "blob.bin").read_bytes() == bytes(range(256))
    assert (tmp_path / "repo" / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "repo" / "a.txt").stat().st_mode & 0o777 == 0o644
    assert git(tmp_path / "repo", "status", "--porcelain") == ""


def test_repogen_streams_a_plain_commit_exactly_as_before_deletions_and_modes():
    """The sample sets' SHAs depend on it: no deleted.txt and no modes.txt, no change in the stream."""
    commit = repogen.Commit(ref="main", parent=None, message="m\n", files={"a": b"x"})
    assert repogen.fast_import_stream([commit]) == (
        b"commit refs/heads/main\nmark :1\n"
        b"author Crucible Samples <samples@crucible.invalid> 1704067200 +0000\n"
        b"committer Crucible Samples <samples@crucible.invalid> 1704067200 +0000\n"
        b"data 2\nm\n\nM 100644 inline a\ndata 1\nx\n\ndone\n"
    )


@pytest.mark.parametrize(
    ("lists", "files", "message"),
    [
        (
            {"deleted": "nope.txt\n"},
            {"b.txt": b"b"},
            r"02_bad/deleted\.txt: deletes nope\.txt, which main does not have",
        ),
        ({"modes": "100777 b.txt\n"}, {"b.txt": b"b"}, r"02_bad/modes\.txt:1: mode '100777' for b\.txt is not one of"),
        ({"modes": "100755 a.txt\n"}, {"b.txt": b"b"}, r"02_bad/modes\.txt:1: a\.txt is not a file under files/"),
        (
            {"deleted": "\nb.txt\n"},
            {"b.txt": b"b"},
            r"02_bad/deleted\.txt:2: b\.txt is both written \(files/\) and deleted",
        ),
    ],
)
def test_repogen_rejects_bad_deletions_and_modes_in_one_line_naming_the_file(tiny, tmp_path, lists, files, message):
    write_step(tiny, "02_bad", files, **lists)
    with pytest.raises(repogen.RepoGenError, match=message) as raised:
        repogen.build(tiny, tmp_path / "repo")
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "repo").exists()
