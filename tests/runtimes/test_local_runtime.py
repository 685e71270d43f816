"""``runtime=local``: a per-run host dir behind a real bubblewrap sandbox.

Proves what the sandbox hides (the host's home, crucible's home and store, the project,
other runs), what it forbids (writes outside the workspace, network, privileges), that a
mode the host cannot give is refused rather than faked, that a crashed engine leaves
nothing running and only directories to reap, and that the coding flavor grades a sample
task end to end on it (golden 1.0, empty diff 0.0). The shared Workspace contract runs
against it in tests/runtimes/test_workspace_conformance.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import coding_task as ct
import pytest

from engine.errors import BuildError, IntegrityUnavailable, WorkspaceError
from engine.interfaces import AGENT_UID
from engine.models import ImageRef
from engine.runtimes.local.conformance import is_zombie, processes_with, sandboxes_of
from engine.runtimes.local.runtime import LocalRuntime
from engine.runtimes.local.template import plan_template, reap_local_orphans, run_roots
from engine.util import paths
from envs.coding.gitops import VAULT
from envs.coding.isolated import TESTER_UID, VERDICT_DIR

BASELINE_REF = "tiny_baseline"
BASELINE_FILES = {"README.md": b"tiny\n", "pkg/mod.py": b"VALUE = 1\n"}
STRICT = ct.integrity("strict")
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_DATE": "2001-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+0000",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env={**os.environ, **_GIT_ENV}
    ).stdout.strip()


def tiny_image(where: Path, **build_args: str) -> ImageRef:
    """A local template's ImageRef: a two-file repo whose bundle holds only the baseline branch."""
    repo, context = where / "repo", where / "context"
    if not (context / "repo.bundle").is_file():
        repo.mkdir(parents=True)
        _git(repo, "init", "-q", "-b", BASELINE_REF)
        for rel, data in BASELINE_FILES.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes(data)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "baseline")
        _git(repo, "checkout", "-q", "-b", "tiny_golden")
        (repo / "pkg/mod.py").write_bytes(b"VALUE = 2\n")
        _git(repo, "commit", "-q", "-am", "golden")
        context.mkdir()
        _git(repo, "bundle", "create", str(context / "repo.bundle"), f"refs/heads/{BASELINE_REF}")
    args = {"REPO_DIR": "/app", "BASELINE_REF": BASELINE_REF, **build_args}
    return plan_template(context, args, "test")


def require_sandbox(runtime: LocalRuntime) -> None:
    """Skip where this host cannot sandbox at all; with CI=true that is a failure."""
    reason = runtime.supports(STRICT)
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def runtime() -> LocalRuntime:
    runtime = LocalRuntime()
    require_sandbox(runtime)
    return runtime


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> ImageRef:
    return tiny_image(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def workspaces(runtime, image, run):
    """Two started network-less workspaces (this run's and a neighbour's), shared by the module."""
    started = [
        runtime.provision(image, run_id=f"local-{uuid.uuid4().hex[:8]}", network=False, purpose=p)
        for p in ("agent", "neighbour")
    ]
    for ws in started:
        run(ws.__aenter__())
    yield started
    for ws in started:
        run(ws.close())


@pytest.fixture(scope="module")
def ws(workspaces):
    return workspaces[0]


def sh(run, ws, script: str, user: int = 0, **kwargs):
    return run(ws.exec(["sh", "-c", script], user=user, **kwargs))


# -- provisioning ---------------------------------------------------------------------------


def test_provisioning_puts_the_baseline_at_the_workdir_and_the_history_in_a_root_only_vault(ws, run, image):
    listing = sh(run, ws, "cd /app && find . -type f | sort && stat -c '%u:%g' . pkg pkg/mod.py").stdout.decode()
    assert listing.split() == ["./README.md", "./pkg/mod.py", "1000:1000", "1000:1000", "1000:1000"]
    assert run(ws.read_file("/app/pkg/mod.py")) == b"VALUE = 1\n"
    modes = sh(run, ws, "stat -c '%a %u %n' /var/lib/crucible /var/lib/crucible/vault").stdout.decode()
    assert modes.splitlines() == ["700 0 /var/lib/crucible", "700 0 /var/lib/crucible/vault"]
    refs = run(ws.exec(["git", f"--git-dir={VAULT}", "for-each-ref", "--format=%(refname)", "refs/heads"]))
    assert refs.stdout.split() == [f"refs/heads/{BASELINE_REF}".encode()]  # no golden in the vault
    host = _git(Path(image.context_dir).parent / "repo", "rev-parse", BASELINE_REF)
    assert run(ws.exec(["git", f"--git-dir={VAULT}", "rev-parse", BASELINE_REF])).stdout.decode().strip() == host
    assert sh(run, ws, "test -e /app/.git").exit_code == 1


def test_each_run_gets_its_own_copy_of_the_template(workspaces, run):
    first, second = workspaces
    run(first.write_file("/app/pkg/mod.py", b"VALUE = 'changed in the first run'\n", owner=AGENT_UID))
    assert run(second.read_file("/app/pkg/mod.py")) == b"VALUE = 1\n"
    assert first.root != second.root


# -- what the sandbox hides -----------------------------------------------------------------


@pytest.mark.parametrize("user", [0, AGENT_UID])
def test_sandbox_hides_host_home_crucible_home_store_project_and_other_runs(workspaces, run, user):
    ws, neighbour = workspaces
    run(neighbour.write_file("/app/neighbour-secret", b"x"))
    host_home = [str(p) for p in Path.home().iterdir()][:5]  # e.g. /root/.bashrc
    secrets = [
        *host_home,
        str(paths.home()),
        str(paths.store_path().parent),
        str(paths.PROJECT_ROOT / "conf"),
        str(neighbour.root),
        str(neighbour.root / "app" / "neighbour-secret"),
        str(ws.root),
    ]
    for path in secrets:
        assert os.path.exists(path), path  # the control: each is really there on the host
    probe = sh(
        run,
        ws,
        'for p in "$@"; do if [ -e "$p" ]; then echo "VISIBLE $p"; fi; done; ls -A /root || true',
        user=user,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert b"VISIBLE" not in probe.stdout, probe.text()
    assert probe.stdout == b""  # /root is this run's own, empty (and closed to uid 1000)


def test_host_secrets_in_etc_are_covered_even_for_root_in_the_sandbox(ws, run):
    from engine.runtimes.local.sandbox import private_etc_entries

    private = dict(private_etc_entries())
    assert "/etc/shadow" in private and Path("/etc/shadow").read_bytes()  # the control: the host's is not empty
    for path, is_dir in private.items():
        seen = run(ws.exec(["ls", "-A", path] if is_dir else ["cat", path]))
        assert seen.ok and seen.stdout == b"", (path, seen.text())
    assert run(ws.read_file("/etc/passwd")) == Path("/etc/passwd").read_bytes()  # the rest of /etc is there


def test_sandbox_sees_only_its_own_processes(ws, run):
    listing = sh(run, ws, "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done").stdout.decode()
    assert "pytest" not in listing and str(paths.home()) not in listing  # no host process, no host layout
    assert "sleep infinity" in listing and "for p in" in listing  # its own init and itself: the listing works


def test_read_file_resolves_an_agent_symlink_inside_the_sandbox_not_on_the_host(ws, run):
    target = paths.PROJECT_ROOT / "conf" / "config.yaml"
    assert target.is_file()
    assert sh(run, ws, f"ln -sf {target} /app/leak", user=AGENT_UID).ok
    with pytest.raises(FileNotFoundError):
        run(ws.read_file("/app/leak"))


# -- what the sandbox forbids ---------------------------------------------------------------


def test_uid_1000_cannot_write_outside_the_workspace(ws, run):
    script = textwrap.dedent("""
        for p in /usr/crucible-x /etc/crucible-x /crucible-x /var/lib/crucible/vault/crucible-x \
                 /var/lib/crucible/vault/repo.git/HEAD /root/crucible-x /proc/sys/kernel/hostname; do
          if (echo x >> "$p") 2>/dev/null; then echo "WROTE $p"; fi
        done
        echo x > /app/ok && echo x > /tmp/ok && echo allowed
    """)
    result = sh(run, ws, script, user=AGENT_UID)
    assert result.stdout == b"allowed\n", result.text()


def test_root_in_the_sandbox_cannot_write_system_dirs_or_reach_host_capabilities(ws, run):
    assert sh(run, ws, "echo x > /usr/crucible-x").exit_code != 0
    assert sh(run, ws, "echo 1 > /proc/sys/kernel/printk_ratelimit").exit_code != 0
    caps = int(sh(run, ws, "grep CapEff /proc/self/status | cut -f2").stdout, 16)
    for bit, name in ((21, "sys_admin"), (2, "dac_read_search"), (19, "sys_ptrace"), (27, "mknod"), (16, "sys_module")):
        assert not caps & (1 << bit), name
    assert caps & (1 << 0) and caps & (1 << 1)  # chown, dac_override: root can still stage files
    assert sh(run, ws, "mount -t tmpfs none /tmp").exit_code != 0
    with pytest.raises(PermissionError):
        run(ws.write_file("/usr/local/crucible-x", b"x"))


def test_uid_1000_has_no_groups_capabilities_or_setuid_escalation(ws, run):
    status = (
        sh(run, ws, "id -u; id -G; grep -E '^(Groups|CapEff|CapBnd|NoNewPrivs):' /proc/self/status", user=AGENT_UID)
        .stdout.decode()
        .split("\n")
    )
    assert status[:2] == ["1000", "1000"]
    fields = dict(line.split(":", 1) for line in status[2:] if line)
    assert fields["Groups"].strip() == ""
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    # A setuid-root binary (staged by root) does not elevate uid 1000.
    assert (
        sh(run, ws, "cp /usr/bin/id /tmp/suid-id && chmod 4755 /tmp/suid-id && stat -c %a /tmp/suid-id").stdout
        == b"4755\n"
    )
    assert sh(run, ws, "/tmp/suid-id -u", user=AGENT_UID).stdout == b"1000\n"


@pytest.fixture
def listener():
    """A TCP port listening on the host's 127.0.0.1."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3); print('connected')"


def test_no_network_without_network_but_the_host_is_reachable_with_it(ws, runtime, image, run, listener):
    assert sh(run, ws, "ls /sys/class/net").stdout.split() == [b"lo"]
    blocked = run(ws.exec(["python3", "-c", CONNECT, str(listener)], user=AGENT_UID, timeout=30))
    assert blocked.exit_code != 0 and b"connected" not in blocked.stdout

    async def with_network():  # the control: the same connect works when network is given
        async with runtime.provision(image, run_id=f"local-{uuid.uuid4().hex[:8]}", network=True, purpose="net") as net:
            return await net.exec(["python3", "-c", CONNECT, str(listener)], user=AGENT_UID, timeout=30)

    assert run(with_network()).stdout == b"connected\n"


# -- what cannot be had is refused ----------------------------------------------------------


def test_strict_is_refused_without_bubblewrap(tmp_path):
    runtime = LocalRuntime(bwrap="/nonexistent/bwrap")
    reason = runtime.supports(STRICT)
    assert reason is not None and "\n" not in reason and "apt-get install -y bubblewrap" in reason
    with pytest.raises(IntegrityUnavailable) as caught:
        runtime.require(STRICT)
    assert str(caught.value) == reason


def test_strict_is_refused_when_bwrap_cannot_make_namespaces(tmp_path, runtime):
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    refusing = LocalRuntime(bwrap=str(broken))
    with pytest.raises(IntegrityUnavailable, match="No permissions to creating new namespace"):
        refusing.require(STRICT)
    assert runtime.supports(STRICT) is None  # the real bwrap here gives strict


def test_config_knob_points_the_probe_at_another_bwrap():
    from engine.config.compose import compose_config, to_typed
    from engine.runtimes import build_runtime

    cfg = to_typed(compose_config(["task=sample/last_page", "runtime=local", "runtime.bwrap=/nonexistent"]))
    runtime = build_runtime(cfg.runtime)
    with pytest.raises(IntegrityUnavailable, match="integrity=strict"):
        runtime.require(cfg.integrity)


def test_a_broken_sandbox_fails_provisioning_instead_of_running_unsandboxed(tmp_path, image, run):
    refusing = LocalRuntime(bwrap="/bin/false")

    async def scenario():
        async with refusing.provision(image, run_id="local-broken", network=False, purpose="agent"):
            pass

    with pytest.raises(WorkspaceError, match="sandbox did not start"):
        run(scenario())
    assert run_roots("local-broken") == []


def test_missing_system_packages_are_named_with_the_apt_command(tmp_path, runtime, run):
    image = tiny_image(tmp_path, SYSTEM_PACKAGES="python3 crucible-no-such-package")

    async def scenario():
        async with runtime.provision(image, run_id="local-pkgs", network=False, purpose="agent"):
            pass

    with pytest.raises(BuildError) as caught:
        run(scenario())
    message = str(caught.value)
    assert "\n" not in message and "apt-get install -y crucible-no-such-package" in message
    assert "python3 " not in message.split(":", 1)[1]  # installed packages are not named


def test_install_cmd_runs_as_root_in_the_repo_at_template_time_and_the_tree_goes_to_uid_1000(tmp_path, runtime, run):
    image = tiny_image(tmp_path, INSTALL_CMD="id -u > installed-by && pwd >> installed-by")

    async def scenario():
        async with runtime.provision(image, run_id="local-install", network=False, purpose="agent") as ws:
            return await ws.read_file("/app/installed-by"), (await ws.exec(["stat", "-c", "%u", "/app/installed-by"]))

    content, owner = run(scenario())
    assert content == b"0\n/app\n" and owner.stdout == b"1000\n"


def test_templates_are_addressed_by_their_inputs_and_built_once(tmp_path, runtime):
    builder = runtime.image_builder()
    ref = tiny_image(tmp_path, BASE="anything", INSTALL_CMD="true")
    assert tiny_image(tmp_path, BASE="another base", INSTALL_CMD="true").input_hash == ref.input_hash
    assert tiny_image(tmp_path, INSTALL_CMD="true ").input_hash != ref.input_hash
    assert builder.status(ref) == "missing"
    first, second = builder.ensure(ref), builder.ensure(ref)
    assert (first.cache_hit, second.cache_hit) == (False, True) and builder.status(ref) == "cached"


# -- crashes --------------------------------------------------------------------------------


CRASHER = r"""
import asyncio, os, signal, sys
sys.path.insert(0, sys.argv[1])
from engine.runtimes.local.runtime import LocalRuntime
from engine.runtimes.local.template import plan_template

async def main():
    ref = plan_template(sys.argv[2], {"REPO_DIR": "/app", "BASELINE_REF": sys.argv[3]}, "test")
    ws = LocalRuntime().provision(ref, run_id="local-crash", network=False, purpose="agent")
    await ws.__aenter__()
    await ws.exec(["sh", "-c", f"sleep {sys.argv[4]} >/dev/null 2>&1 &"], user=1000)
    needle, running = f"sleep\0{sys.argv[4]}\0".encode(), 0
    for _ in range(100):  # the background sleep appears a moment after its shell returned
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                running += needle in open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                pass
        if running:
            break
        await asyncio.sleep(0.02)
    print(ws.init_pid, ws.root, running, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_a_killed_engine_leaves_no_sandbox_running_and_its_dir_is_reaped(runtime, image, ws):
    seconds = str(uuid.uuid4().int % 900_000 + 100_000)  # a sleep no other process runs
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHER, str(paths.PROJECT_ROOT), image.context_dir, BASELINE_REF, seconds],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode == -9, crashed.stderr
    init_pid, root, sleepers = crashed.stdout.split()
    assert Path(root).is_dir() and sleepers == "1"  # the control: a background process was running
    for _ in range(100):  # --die-with-parent: the init, and with it the PID namespace, dies
        if not Path(f"/proc/{init_pid}").exists() or is_zombie(init_pid):
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{init_pid}").exists() or is_zombie(init_pid)
    assert sandboxes_of(ws.run_id)  # the control: a live sandbox is found this way
    assert not sandboxes_of("local-crash") and not processes_with(f"sleep\0{seconds}\0".encode())
    assert Path(root).name in reap_local_orphans()
    assert not Path(root).exists() and run_roots("local-crash") == []


def test_reaper_keeps_roots_of_live_owners(ws):
    assert ws.root.name not in reap_local_orphans()
    assert ws.root.is_dir()


# -- the coding env, end to end ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_plan(runtime):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan

    # build.base: the image's BASE is meaningless locally (the host is the base), and naming
    # one keeps planning from asking Docker for the bootstrapped base image.
    cfg = to_typed(compose_config(["task=sample/last_page", "runtime=local", "integrity=strict", "build.base=host"]))
    return plan(cfg, builder=runtime.image_builder(ca_bundle=None))


@pytest.mark.slow
@pytest.mark.parametrize("submission", ["golden", "empty"])
def test_coding_flavor_scores_golden_1_and_empty_diff_0_on_local(sample_plan, runtime, run, submission):
    from engine.plan.repos import resolve_repo
    from envs.coding.flavor import CodingFlavor

    spec, flavor = sample_plan.spec, CodingFlavor()
    pins = spec.task.pins
    golden = subprocess.run(
        [
            "git",
            "-C",
            str(resolve_repo(spec.task.repo)),
            "diff",
            "--binary",
            "--full-index",
            pins["baseline"],
            pins["golden"],
        ],
        check=True,
        capture_output=True,
    ).stdout

    async def scenario():
        run_id = f"local-e2e-{uuid.uuid4().hex[:8]}"
        async with runtime.provision(sample_plan.image, run_id=run_id, network=False, purpose="agent") as ws:
            await flavor.setup(ws, spec)
            if submission == "golden":  # the agent's side: uid 1000, in its own repo
                await ws.write_file("/tmp/golden.patch", golden, owner=AGENT_UID)
                applied = await ws.exec(["git", "apply", "--binary", "/tmp/golden.patch"], user=AGENT_UID)
                assert applied.ok, applied.text()
            captured = await flavor.capture(ws, spec)
        async with runtime.provision(sample_plan.image, run_id=run_id, network=False, purpose="grade") as fresh:
            return captured, await flavor.grade(fresh, spec, captured)

    captured, verdict = run(scenario())
    if submission == "golden":
        assert captured.diff and not captured.violations
        assert verdict.reward == 1.0, verdict.raw
        # the isolated verdict: pytest as its own uid, the code under test as the agent's
        assert verdict.raw["isolated"] == {
            "separate": True,
            "pytest_uid": TESTER_UID,
            "scenario_uid": AGENT_UID,
            "dir": VERDICT_DIR,
        }
        assert verdict.raw["test"]["user"] == TESTER_UID
    else:
        assert captured.diff == ""
        assert verdict.reward == 0.0 and verdict.raw["reason"] != "tests passed", verdict.raw
