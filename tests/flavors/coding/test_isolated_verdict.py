"""The isolated verdict's three scripts (envs/coding/verdict/), run for real on this host as
root: the launcher starts pytest as uid 1001 and every scenario as uid 1000 (setpriv), in a
throwaway repo — exactly what grading runs inside the workspace. The engine-level proof (the
sample tasks under ``strict``, the attack suite) is in test_attacks*.py and test_modes_matrix.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest
from attacks.payloads import FORCE_PASS_IN_PROCESS

from engine.interfaces import AGENT_UID, ROOT_UID
from envs.coding import isolated
from envs.coding.hidden import HiddenFile

PYTHON = "/usr/bin/python3"  # the system interpreter with Debian's pytest, as in the images
SCRIPTS = isolated.SCRIPTS

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(), reason="needs root and setpriv to change uids"
)

CODE = """
import os, sys

def page_count(total, per_page):
    return total // per_page            # the bug: a partial last page is lost

def identity():
    return os.getuid(), "_pytest" in sys.modules, os.getcwd()

class PageError(Exception):
    pass

def refuse():
    raise PageError("no page 3")
"""

FORCE_PASS = FORCE_PASS_IN_PROCESS  # the attack suite's: marks every report passed, once imported under pytest

HIDDEN = """
import os
import pytest
from crucible_probe import ScenarioFailed, ScenarioRaised, isolated


@isolated
def pages(total, per_page):
    from stock import page_count
    return page_count(total, per_page)


@isolated
def who():
    from stock import identity
    return identity()


@isolated
def refused():
    from stock import refuse
    refuse()


def test_a_partial_page_counts():
    assert pages(45, 20) == 3


def test_an_exact_multiple():
    assert pages(40, 20) == 2
"""


@pytest.fixture
def layout():
    """A repo (``stock.py``) and a verdict dir laid out as the stager lays them out."""
    top = Path(tempfile.mkdtemp(prefix="crucible-verdict-test-"))
    top.chmod(0o755)
    repo, verdict = top / "repo", top / "verdict"
    repo.mkdir(mode=0o755)
    (repo / "stock.py").write_text(CODE)
    for name in ("lib", "hidden", "home"):
        (verdict / name).mkdir(parents=True)
    verdict.chmod(0o755)
    (verdict / "lib").chmod(0o755)
    shutil.copy(SCRIPTS / "launch.py", verdict / "launch.py")  # run from a file here; grading sends it on stdin
    for name in ("crucible_probe.py", "crucible_scenario.py"):
        shutil.copy(SCRIPTS / name, verdict / "lib" / name)
    (verdict / "pytest.ini").write_text("[pytest]\n")
    (verdict / "hidden" / "tests").mkdir()
    yield repo, verdict
    shutil.rmtree(top, ignore_errors=True)


def hide(verdict: Path, body: str, owner: int = isolated.TESTER_UID) -> None:
    path = verdict / "hidden" / "tests" / "test_hidden.py"
    path.write_text(textwrap.dedent(body))
    for entry in [verdict / "hidden", verdict / "home", *(verdict / "hidden").rglob("*")]:
        os.chown(entry, owner, owner)
    (verdict / "hidden").chmod(0o700)
    (verdict / "home").chmod(0o700)


def launch(
    repo: Path,
    verdict: Path,
    *,
    tester: int = isolated.TESTER_UID,
    scenario: int = AGENT_UID,
    extra: tuple[str, ...] = (),
    python: str = PYTHON,
) -> subprocess.CompletedProcess:
    options = isolated.pytest_options(str(verdict))
    argv = [
        python,
        "-I",
        "-S",
        str(verdict / "launch.py"),
        "--verdict",
        str(verdict),
        "--workdir",
        str(repo),
        "--tester-uid",
        str(tester),
        "--scenario-uid",
        str(scenario),
        *extra,
        "--",
        *options,
        "tests/test_hidden.py",
    ]
    return subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=120)


def test_the_verdict_is_pytest_s_own_and_the_code_runs_elsewhere(layout):
    repo, verdict = layout
    hide(
        verdict,
        HIDDEN
        + f"""

def test_where_things_run():
    uid, pytest_loaded, cwd = who()
    assert (uid, pytest_loaded, cwd) == (1000, False, {str(repo)!r})
    assert os.getuid() == 1001


def test_a_raise_comes_back_by_name():
    with pytest.raises(ScenarioRaised) as raised:
        refused()
    assert raised.value.is_a("PageError") and raised.value.message == "no page 3"
""",
    )
    done = launch(repo, verdict)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED tests/test_hidden.py::test_a_partial_page_counts - assert 2 == 3" in done.stdout
    assert "1 failed, 3 passed" in done.stdout


def test_code_that_forges_pytest_s_verdict_from_inside_changes_nothing(layout):
    """The in-process attack that a canary can only catch when it cannot tell the canary
    apart: here it is imported in the scenario's interpreter, where there is no pytest."""
    repo, verdict = layout
    (repo / "stock.py").write_text(CODE + FORCE_PASS)
    hide(verdict, HIDDEN)
    done = launch(repo, verdict)
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout
    # ... the same code IS able to forge when it shares pytest's process (the contrast):
    shutil.copy(repo / "stock.py", verdict / "hidden" / "tests" / "stock.py")
    plain = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_hidden.py"],
        cwd=verdict / "hidden",
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "CRUCIBLE_PROBE": "in-process", "PYTHONPATH": str(verdict / "lib")},
    )
    assert plain.returncode == 0 and "2 passed" in plain.stdout, plain.stdout


@pytest.mark.parametrize("extra", [(), ("--no-zygote",)], ids=["zygote", "fresh-interpreters"])
def test_a_scenario_cannot_read_the_hidden_tests_nor_touch_pytest(layout, extra):
    repo, verdict = layout
    hide(
        verdict,
        """
from crucible_probe import isolated


@isolated
def snoop(hidden, pytest_pid):
    import os, signal
    found = {}
    try:
        open(hidden).read()
        found["read"] = "ok"
    except OSError as exc:
        found["read"] = type(exc).__name__
    for name, act in (("signal", lambda: os.kill(pytest_pid, signal.SIGSTOP)),
                      ("environ", lambda: open(f"/proc/{pytest_pid}/environ").read()),
                      ("mem", lambda: open(f"/proc/{pytest_pid}/mem", "rb").read(1))):
        try:
            act()
            found[name] = "ok"
        except OSError as exc:
            found[name] = type(exc).__name__
    return found


def test_walls():
    import os
    assert snoop(os.path.abspath(__file__), os.getpid()) == {
        "read": "PermissionError", "signal": "PermissionError", "environ": "PermissionError",
        "mem": "PermissionError"}
""",
    )
    done = launch(repo, verdict, extra=extra)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout


def test_scenarios_start_clean_and_survive_one_that_kills_the_zygote(layout):
    """Forked from one zygote, each scenario still starts with nothing of another's; one that
    kills the zygote (its parent, the same uid) costs the rest only their speed."""
    repo, verdict = layout
    (repo / "stock.py").write_text(
        CODE
        + """
import os, signal
MARKS = []

def mark():
    MARKS.append(1)
    return len(MARKS)

def kill_parent():
    os.kill(os.getppid(), signal.SIGKILL)
    return "killed"
"""
    )
    hide(
        verdict,
        """
from crucible_probe import ScenarioFailed, isolated


@isolated
def mark():
    from stock import mark
    return mark()


@isolated
def kill_parent():
    from stock import kill_parent
    return kill_parent()


def test_each_scenario_starts_clean():
    assert [mark(), mark(), mark()] == [1, 1, 1]


def test_the_zygote_killed_then_more_scenarios():
    try:
        kill_parent()
    except ScenarioFailed:
        pass  # its own answer may go with its parent; what matters is what follows
    assert [mark(), mark()] == [1, 1]
""",
    )
    done = launch(repo, verdict)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("--no-zygote",)], ids=["zygote", "fresh-interpreters"])
def test_only_plain_data_crosses_and_a_stuck_scenario_ends(layout, extra):
    repo, verdict = layout
    (repo / "stock.py").write_text(
        CODE
        + """
import os, sys, time
class Sneaky:
    def __repr__(self):
        return "__import__('os').system('touch /tmp/crucible-pwned')"
    def __eq__(self, other):
        return True

def sneaky():
    return Sneaky()

def forged_answer():
    # the scenario's side is the agent's: it can write any answer line it likes, on every
    # descriptor it holds (the runner's answer pipe among them)...
    line = b'{"returned": "__import__(chr(111) + chr(115)).system(chr(116))"}' + bytes([10])
    for fd in range(1, 64):
        try:
            os.write(fd, line)
        except OSError:
            pass
    os._exit(0)

def flood():
    sys.stderr.write("x" * (50 << 20))
    return 1

def stuck():
    time.sleep(600)
"""
    )
    hide(
        verdict,
        """
import pytest
from crucible_probe import ScenarioFailed, isolated


@isolated
def sneaky():
    from stock import sneaky
    return sneaky()


@isolated
def forged():
    from stock import forged_answer
    return forged_answer()


@isolated
def flood():
    from stock import flood
    return flood()


@isolated(timeout=2)
def stuck():
    from stock import stuck
    return stuck()


def test_an_object_is_refused_whatever_its_repr_or_eq():
    with pytest.raises(Exception) as refused:
        sneaky()
    assert "plain data" in str(refused.value)


def test_a_forged_answer_line_is_read_as_data_never_run():
    with pytest.raises(ScenarioFailed, match="not plain data"):
        forged()


def test_a_flood_is_cut_and_the_answer_still_arrives():
    assert flood() == 1


def test_a_stuck_scenario_times_out():
    with pytest.raises(ScenarioFailed, match="within 2"):
        stuck()
""",
    )
    Path("/tmp/crucible-pwned").unlink(missing_ok=True)
    done = launch(repo, verdict, extra=extra)
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout[-3000:]
    assert not Path("/tmp/crucible-pwned").exists()


def test_an_editable_install_of_the_repo_lets_nothing_of_it_into_pytest(layout):
    """An image that pip-installed the repo in editable mode has a .pth naming it in
    site-packages: pytest's process must not follow it, or a dist-info the diff adds to the
    repo would autoload a pytest11 plugin there (found by review; pytest runs with -S)."""
    repo, verdict = layout
    env_dir = verdict.parent / "image-python"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", "--system-site-packages", str(env_dir)], check=True)
    python = str(env_dir / "bin" / "python3")
    site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(site, "__editable__.stock-0.1.pth").write_text(f"{repo}\n")
    dist = repo / "evilplug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evilplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nevil = evilplug_mod\n")
    (repo / "evilplug_mod.py").write_text(FORCE_PASS.replace('if "_pytest" in _sys.modules:', "if True:"))
    os.chmod(verdict.parent, 0o755)
    hide(verdict, HIDDEN)
    done = launch(repo, verdict, python=python)
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout
    # the contrast: an ordinary pytest with that site-packages loads the plugin and passes
    shutil.copy(verdict / "lib" / "crucible_probe.py", verdict / "hidden" / "tests")
    plain = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_hidden.py"],
        cwd=verdict / "hidden",
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "CRUCIBLE_PROBE": "in-process"},
    )
    assert plain.returncode == 0 and "2 passed" in plain.stdout, plain.stdout + plain.stderr


def test_without_a_uid_wall_both_sides_run_as_root_and_the_answers_are_the_same(layout):
    repo, verdict = layout
    hide(verdict, HIDDEN, owner=ROOT_UID)
    done = launch(repo, verdict, tester=ROOT_UID, scenario=ROOT_UID)
    assert done.returncode == 1 and "1 failed, 1 passed" in done.stdout, done.stdout


def test_in_process_and_by_hand_the_probe_keeps_its_contract(tmp_path):
    """CRUCIBLE_PROBE=in-process (modes that do not isolate) and the by-hand subprocess give
    the same answers and the same exceptions as the launcher."""
    (tmp_path / "stock.py").write_text(CODE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_hidden.py").write_text(
        HIDDEN
        + """

def test_raise_and_tuple():
    with pytest.raises(ScenarioRaised) as raised:
        refused()
    assert raised.value.is_a("stock.PageError")
    assert isinstance(who(), tuple)
"""
    )
    for mode in ("in-process", ""):
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{SCRIPTS}:{tmp_path}", "CRUCIBLE_PROBE": mode}
        done = subprocess.run(
            [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_hidden.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 1 and "1 failed, 2 passed" in done.stdout, (mode, done.stdout)


def test_the_plan_per_mode():
    hidden = [HiddenFile("tests/test_h.py", "644", b"def test_x(): pass\n")]
    strict = isolated.plan(
        "python3 -m pytest -q {test_files}",
        ["tests/test_h.py"],
        workdir="/app",
        separate=True,
        uid_wall=True,
        files=hidden,
    )
    assert strict.user == ROOT_UID and (strict.pytest_uid, strict.scenario_uid) == (1001, 1000)
    assert "--tester-uid 1001 --scenario-uid 1000 --wait-for-go" in strict.command and "--noconftest" in strict.command
    assert strict.gates_itself and strict.support == {}  # the launcher writes its files, not the stager
    # the launcher and the zygote's code come first on its stdin, then the verdict dir's files
    # (the hidden tests among them), not in the argv, where they would fill `ps`
    code = (SCRIPTS / "launch.py").read_bytes() + (SCRIPTS / "crucible_scenario.py").read_bytes()
    assert strict.preamble.startswith(code) and strict.preamble.endswith(b"def test_x(): pass\n")
    assert f"--files-bytes {len(strict.preamble) - len(code)} " in strict.command
    assert len(strict.command) < 1000 and "def main" not in strict.command
    assert "<envs/coding/verdict/launch.py>" in strict.shown and len(strict.shown) < 1000
    vault = isolated.plan(
        "python3 -m pytest -q {test_files}", ["tests/test_h.py"], workdir="/app", separate=False, uid_wall=False
    )
    assert vault.user == ROOT_UID and set(vault.support) == {
        f"{isolated.VERDICT_DIR}/lib/crucible_probe.py",
        f"{isolated.VERDICT_DIR}/lib/crucible_scenario.py",
    }
    assert (
        vault.command.endswith("python3 -m pytest -q tests/test_h.py") and "CRUCIBLE_PROBE=in-process" in vault.command
    )
    for workdir in ("/", "/tmp", "/tmp/"):  # the launcher's files would be in the repo, in the diff's reach
        with pytest.raises(ValueError, match="holds /tmp/crucible-verdict"):
            isolated.plan("pytest {test_files}", ["t.py"], workdir=workdir, separate=True, uid_wall=True)
    with pytest.raises(ValueError, match="is inside /tmp/crucible-verdict"):  # the launcher would remove it
        isolated.plan(
            "pytest {test_files}", ["t.py"], workdir="/tmp/crucible-verdict/app", separate=True, uid_wall=True
        )
    assert isolated.workdir_refusal("/tmp/crucible-verdicts") is None and isolated.workdir_refusal("/srv/app") is None
