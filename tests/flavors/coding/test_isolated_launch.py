"""The isolated verdict's launcher as grading starts it (envs/coding/verdict/launch.py, run for
real on this host as root): its code, the zygote's and the verdict dir's files on its stdin; it
writes the dir, and pytest (uid 1001) gets as far as its first test — imported, configured,
collected — before "go", while the submission is still being staged. Scenarios (uid 1000) run
only after "go", so even one called while collecting sees the staged code.
"""

from __future__ import annotations

import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from engine.interfaces import AGENT_UID
from envs.coding import isolated
from envs.coding.hidden import HiddenFile

PYTHON = "/usr/bin/python3"  # the system interpreter with Debian's pytest, as in the images

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(), reason="needs root and setpriv to change uids"
)

CODE = """
def page_count(total, per_page):
    return total // per_page            # the bug: a partial last page is lost
"""
FIXED = CODE.replace("total // per_page", "-(-total // per_page)")


def start_gated(
    repo: Path, verdict: Path, hidden: list[HiddenFile], preload: list[str] | None = None
) -> subprocess.Popen:
    """The launcher as grading starts it: its code, the zygote's and the verdict dir's files on
    its stdin (the dir written by it), then waiting for "go"."""
    plan = isolated.plan(
        "unused",
        ["tests/test_hidden.py"],
        workdir=str(repo),
        separate=True,
        uid_wall=True,
        files=hidden,
        preload=preload,
    )
    argv = shlex.split(plan.command)
    argv = [PYTHON if a == "python3" else a for a in argv]
    argv = [a.replace(isolated.VERDICT_DIR, str(verdict)) for a in argv]  # --verdict, and pytest's options
    launcher = subprocess.Popen(argv, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert launcher.stdin is not None
    launcher.stdin.write(plan.preamble)
    launcher.stdin.flush()
    return launcher


GATED = """
import os
from crucible_probe import isolated

with open(FIFO, "w") as said:  # pytest captures what collecting prints
    said.write(f"collecting as {os.getuid()}\\n")


@isolated
def pages(total, per_page):
    from stock import page_count
    return page_count(total, per_page)


AT_IMPORT = pages(45, 20)  # a scenario called while collecting: answered only after "go"


def test_the_staged_code_answers():
    assert AT_IMPORT == 3 and pages(40, 20) == 2
"""


def said(fifo: Path, launcher: subprocess.Popen) -> str:
    """The line written to ``fifo``: waited for as long as the launcher lives (its output's end
    says it died first)."""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        text = b""
        while not text.endswith(b"\n"):
            ready, _, _ = select.select([reader, launcher.stdout], [], [], 120)
            assert reader in ready, launcher.stdout.read() if launcher.stdout in ready else "nothing in 120 s"
            text += os.read(reader, 4096)
        return text.decode()
    finally:
        os.close(reader)


@pytest.fixture
def top():
    """A directory the other uids reach (pytest's tmp_path sits under a root-only one)."""
    path = Path(tempfile.mkdtemp(prefix="crucible-gated-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_launcher_lays_out_the_verdict_dir_and_pytest_collects_before_go(top):
    repo, verdict = top / "repo", top / "verdict"
    repo.mkdir(mode=0o755)
    (repo / "stock.py").write_text(CODE)  # the bug: what is there before the submission
    os.chown(repo / "stock.py", AGENT_UID, AGENT_UID)
    fifo = top / "said"
    os.mkfifo(fifo)
    fifo.chmod(0o666)
    hidden = [
        HiddenFile("tests/test_hidden.py", "644", f"FIFO = {str(fifo)!r}\n{GATED}".encode()),
        HiddenFile("tests/data/expected.txt", "755", b"3\n"),
        HiddenFile("tests/data/link.txt", "link", b"expected.txt"),
        HiddenFile("tests/gone.py", "del"),
    ]
    launcher = start_gated(repo, verdict, hidden)
    assert launcher.stdout is not None and launcher.stdin is not None
    # pytest runs its collection before "go": the module is imported, its scenario call waits
    assert said(fifo, launcher) == f"collecting as {isolated.TESTER_UID}\n"
    mode = lambda p: (p.lstat().st_uid, oct(p.lstat().st_mode & 0o7777))  # noqa: E731
    assert mode(verdict) == (0, "0o755") and mode(verdict / "lib") == (0, "0o755")
    assert mode(verdict / "pytest.ini") == (0, "0o644") and mode(verdict / "lib" / "crucible_probe.py") == (0, "0o644")
    assert mode(verdict / "hidden") == (isolated.TESTER_UID, "0o700") and mode(verdict / "home")[1] == "0o700"
    data = verdict / "hidden" / "tests" / "data"
    assert (
        mode(data / "expected.txt") == (isolated.TESTER_UID, "0o755") and (data / "expected.txt").read_bytes() == b"3\n"
    )
    assert (
        os.readlink(data / "link.txt") == "expected.txt" and (data / "link.txt").lstat().st_uid == isolated.TESTER_UID
    )
    assert not (verdict / "hidden" / "tests" / "gone.py").exists()
    # the submission is staged after the launcher started: the scenarios see it, even the one
    # called while collecting
    (repo / "stock.py").write_text(FIXED)
    out, _ = launcher.communicate(b"go\n", timeout=120)
    assert launcher.returncode == 0 and b"1 passed" in out, out


def test_a_launcher_never_told_go_runs_no_test(top):
    repo, verdict = top / "repo", top / "verdict"
    repo.mkdir(mode=0o755)
    (repo / "stock.py").write_text(CODE)
    fifo = top / "said"
    os.mkfifo(fifo)
    fifo.chmod(0o666)
    test = f"FIFO = {str(fifo)!r}\n{GATED}".replace("AT_IMPORT = pages(45, 20)", "AT_IMPORT = 3")
    launcher = start_gated(repo, verdict, [HiddenFile("tests/test_hidden.py", "644", test.encode())])
    assert said(fifo, launcher) == f"collecting as {isolated.TESTER_UID}\n"  # pytest got as far as its tests
    out, _ = launcher.communicate(b"", timeout=120)  # dismissed: its stdin closes
    assert launcher.returncode == 97 and b"passed" not in out and b"failed" not in out, out


@pytest.mark.slow
@pytest.mark.parametrize("workdir", ["/", "/tmp"])
def test_a_scenario_task_whose_repo_would_hold_the_verdict_dir_is_one_line_before_anything_runs(workdir, tmp_path):
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "task=sample/last_page", "agent=noop", f"+task.workdir={workdir}"],
        cwd=root,
        env={**os.environ, "CRUCIBLE_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"task 'sample/last_page': workdir '{workdir}' holds /tmp/crucible-verdict" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("record.json"))


INSIDE = """
# what no scenario may read: {marker}
from crucible_probe import isolated


@isolated
def inside(pieces):
    import os
    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    names = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")
    credentials = {{name: status[name].split() for name in names}}
    with open("/proc/%d/cmdline" % os.getppid(), "rb") as cmdline:
        zygote = cmdline.read()
    import ctypes

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    libc = ctypes.CDLL(None, use_errno=True)
    found, seen = {{}}, 0  # each marker, looked for in every readable page without ever being made here
    for line in open("/proc/self/maps"):
        span, perms = line.split()[:2]
        start, end = (int(x, 16) for x in span.split("-"))
        if "r" not in perms or end - start > 1 << 28:
            continue
        buffer = ctypes.create_string_buffer(end - start)
        local, remote = Iovec(ctypes.addressof(buffer), end - start), Iovec(start, end - start)
        # process_vm_readv: a non-dumpable process (a scenario is one) may not open its /proc/self/mem
        got = libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            continue
        seen += got
        data = buffer.raw[:got]
        for first, second in pieces:
            at = data.find(first)
            while at >= 0:
                hit = data[at + len(first) : at + len(first) + len(second)] == second
                found[first] = found.get(first, 0) + hit
                at = data.find(first, at + 1)
    return credentials, b"launch.py" in zygote, seen, sum(found.values())


def test_a_scenario_runs_as_setpriv_would_start_it_and_reads_nothing_of_the_hidden_tests():
    credentials, forked, seen, found = inside({pieces!r})
    none = ["0000000000000000"]
    assert credentials == {{
        "Uid": ["1000"] * 4, "Gid": ["1000"] * 4, "Groups": [], "NoNewPrivs": ["1"],
        "CapInh": none, "CapPrm": none, "CapEff": none, "CapBnd": none, "CapAmb": none,
    }}
    assert forked, "the zygote was started afresh, not forked from the launcher"
    assert seen > 1 << 20, "the scenario read too little of its memory for the search to mean anything"
    assert found == 0, "the hidden tests' text, or the launcher's environment, is in the scenario's memory"
"""


def test_the_zygote_is_forked_from_the_launcher_with_setprivs_credentials_and_none_of_the_hidden_tests(top):
    """The zygote is forked from the launcher (an interpreter's start saved), before the launcher
    reads a byte of the verdict dir's files: a scenario forked from it runs as the scenario uid
    with no group, no capability and no new privileges, as setpriv starts one, and finds neither
    the hidden tests nor the launcher's (root's) environment anywhere in its memory, read page by
    page (process_vm_readv: more than a MiB of it)."""
    import uuid

    repo, verdict = top / "repo", top / "verdict"
    repo.mkdir(mode=0o755)
    hidden, environment = uuid.uuid4().hex.encode(), uuid.uuid4().hex.encode()
    pieces = [(m[:16], m[16:]) for m in (hidden, environment)]
    text = INSIDE.format(marker=hidden.decode(), pieces=pieces)
    os.environ["CRUCIBLE_TEST_LAUNCHER_ONLY"] = environment.decode()  # the launcher's, root's
    try:
        launcher = start_gated(repo, verdict, [HiddenFile("tests/test_hidden.py", "644", text.encode())])
    finally:
        del os.environ["CRUCIBLE_TEST_LAUNCHER_ONLY"]
    out, _ = launcher.communicate(b"go\n", timeout=120)
    assert launcher.returncode == 0 and b"1 passed" in out, out.decode(errors="replace")


PRELOADED = """
from crucible_probe import isolated

EXPECTED = {expected!r}


@isolated
def loaded_ahead(names):
    import sys
    return [name for name in names if name in sys.modules]


def test_the_zygote_loaded_ahead_what_it_was_told():
    assert loaded_ahead(["csv", "decimal", "fractions", "statistics"]) == EXPECTED
"""


@pytest.mark.parametrize(
    ("preload", "expected"),
    [
        (["csv", "stockroom", "os"], ["csv"]),  # of its list, only what the repo imports
        ([], []),
        (None, ["csv", "decimal", "fractions", "statistics"]),  # not told: all of its list
    ],
)
def test_the_zygote_loads_ahead_only_the_common_modules_the_repo_imports(top, preload, expected):
    """A scenario is a fork of the zygote: what the zygote imported ahead is in its sys.modules
    before its own code runs (none of these modules is the launcher's or the zygote's own)."""
    repo, verdict = top / "repo", top / "verdict"
    repo.mkdir(mode=0o755)
    text = PRELOADED.format(expected=expected)
    launcher = start_gated(repo, verdict, [HiddenFile("tests/test_hidden.py", "644", text.encode())], preload)
    out, _ = launcher.communicate(b"go\n", timeout=120)
    assert launcher.returncode == 0 and b"1 passed" in out, out.decode(errors="replace")


def test_a_scenario_inherits_none_of_the_launchers_rarer_modules(top):
    """The launcher relays each scenario's pipes itself (no reader thread a pipe) and uses
    ``_socket``, so the zygote, forked from it, carries neither ``threading`` nor ``socket``
    (their imports cost the launcher and the zygote ~3.4 ms of CPU a grading), nor the fresh
    interpreter's ``subprocess``: a scenario finds none of them loaded before its own code runs."""
    repo, verdict = top / "repo", top / "verdict"
    repo.mkdir(mode=0o755)
    names = ["threading", "socket", "subprocess", "selectors"]
    text = PRELOADED.format(expected=[]).replace('["csv", "decimal", "fractions", "statistics"]', repr(names))
    launcher = start_gated(repo, verdict, [HiddenFile("tests/test_hidden.py", "644", text.encode())], [])
    out, _ = launcher.communicate(b"go\n", timeout=120)
    assert launcher.returncode == 0 and b"1 passed" in out, out.decode(errors="replace")


PATIENT = """
from crucible_probe import isolated


@isolated(timeout=3e6)
def patient():
    return 7


def test_a_scenario_given_a_month_still_answers():
    assert patient() == 7
"""


def test_a_scenario_timeout_past_what_poll_takes_is_waited_for_in_steps(top):
    """The launcher waits on a scenario with ``poll``, whose timeout is an int of milliseconds: a
    timeout of ~35 days (3e6 s, past INT_MAX ms) is waited for in steps, not an OverflowError that
    ends the launcher (found by review)."""
    repo, verdict = top / "repo", top / "verdict"
    repo.mkdir(mode=0o755)
    launcher = start_gated(repo, verdict, [HiddenFile("tests/test_hidden.py", "644", PATIENT.encode())], [])
    out, _ = launcher.communicate(b"go\n", timeout=120)
    assert launcher.returncode == 0 and b"1 passed" in out, out.decode(errors="replace")
