"""The ``ssh/2`` capability: a real asyncssh server over real containers (the coding task image).

Parity is the point: the same validation commands staged through MCP (the bash tool) and
through SSH (the integration_test agent's ``bash -lc`` over ``run_bash``), in two fresh
workspaces, must leave byte-identical trees and give byte-identical step results. The other
tests share one workspace (set up under integrity=strict: uid wall, vault) and one server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid

import asyncssh
import coding_task as ct
import pytest

from engine.agents import AgentContext
from engine.agents.integration_test import IntegrationTestAgent
from engine.capabilities.mcp_server import serve_mcp
from engine.capabilities.ssh_client import SSHEndpoint, open_ssh, run_bash
from engine.capabilities.ssh_server import serve_ssh
from engine.errors import AgentError
from engine.runtimes.docker.runtime import DockerRuntime
from envs.coding.repo import setup_repo
from envs.coding.tools import CodingTools

BIG = ('0123456789 abc $HOME "dq" \\ é|<>&;*?[] ' * 2600)[:100_000]
"""A 100 KB argument (> 100,000 bytes: é is two) full of shell metacharacters."""

AWKWARD = {
    "quotes": r"""mkdir -p "out dir" && cat > "out dir/it's \"q\".txt" <<'EOF'
single 'quotes' and "double" quotes, $HOME unexpanded, a	tab, and é
EOF
printf '%s|%s\n' "a b" 'c"d' | tr '|' '\t' >> "out dir/it's \"q\".txt" && wc -l < "out dir/it's \"q\".txt" && cat "out dir/it's \"q\".txt"
echo "to stderr" >&2""",
    "nested quotes": """bash -c 'printf "%s\\n" "inner \\"$0\\" '"'"'single'"'"'" $'"'"'ansi\\ttab'"'"'' zero > nested.txt; cat nested.txt""",
    "heredoc": "x=42\ncat > here.txt <<EOF\nvalue $x, sum $((1+2)), sub `echo sub`, \"dq\" 'sq' \\$literal\nEOF\ncat here.txt",
    "redirects": (
        "exec 3>fd3.txt; echo three >&3; exec 3>&-; echo out > r.txt; ls /no/such 2>> r.txt;"
        " echo append >> r.txt; wc -l < r.txt; cat fd3.txt 1>&2"
    ),
    "globs": (
        "mkdir -p g && touch g/a.txt g/b.txt 'g/c d.txt' g/.hidden && echo g/*.txt > globs.txt"
        " && echo 'g/*.txt' \"g/*.txt\" >> globs.txt && shopt -s nullglob && echo [g]/*.none >> globs.txt"
        " && cat globs.txt"
    ),
    "non-ascii": "printf 'héllo wörld — 日本語 🎉\\n' > 'ü ñ.txt' && echo $'\\xe2\\x82\\xac' >> 'ü ñ.txt' && ls *.txt && cat 'ü ñ.txt'",
    "100 KB argument": f"printf '%s' '{BIG}' > big.txt && wc -c < big.txt && sha256sum big.txt",
    # stderr written well before stdout: one merged stream would put it first; both
    # capabilities give stdout, then stderr
    "stderr first": "echo 'to stderr, first' >&2; sleep 0.3; printf 'then stdout, no newline'",
    "failing": "echo partial; ls /no/such/file; exit 3",
}

TREE = (
    "cd /app && find . -path ./.git -prune -o -printf '%M %U:%G %s %p\\n' | LC_ALL=C sort"
    " && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"
)


@pytest.fixture(scope="module")
def task(docker_client, base_image, tmp_path_factory):
    repo = ct.build_repo(tmp_path_factory.mktemp("ssh") / "repo")
    image = ct.build_image(docker_client, base_image, repo, tmp_path_factory.mktemp("ssh-ctx"))
    return image, ct.task(repo)


@contextlib.asynccontextmanager
async def fresh_workspace(task):
    image, task_dict = task
    async with DockerRuntime().provision(
        image, run_id=f"ssh-{uuid.uuid4().hex[:8]}", network=False, purpose="agent"
    ) as ws:
        await setup_repo(ws, task_dict, ct.integrity("strict"))
        yield ws


@pytest.fixture(scope="module")
def ws(task, loop, run):
    ready, stop = loop.create_future(), asyncio.Event()

    async def hold():
        async with fresh_workspace(task) as workspace:
            ready.set_result(workspace)
            await stop.wait()

    holder = loop.create_task(hold())
    yield run(ready)
    stop.set()
    run(holder)


@pytest.fixture(scope="module")
def endpoint(ws, loop, run):
    ready, stop = loop.create_future(), asyncio.Event()

    async def serve():
        async with serve_ssh(ws, user=1000, cwd=ct.WORKDIR) as address:
            ready.set_result(address)
            await stop.wait()

    server = loop.create_task(serve())
    yield run(ready)
    stop.set()
    run(server)


def bash(run, endpoint, command, timeout=30.0):
    async def go():
        async with open_ssh(endpoint) as conn:
            return await run_bash(conn, command, timeout)

    return run(go())


async def stage(capabilities, auth, validation):
    ctx = AgentContext(spec=None, capabilities=capabilities, capability_auth=auth, validation=validation, prompt="")
    return await IntegrationTestAgent(timeout_seconds=120).run(ctx)


async def stage_over_mcp(ws, commands):
    tools = CodingTools(ws, workdir=ct.WORKDIR, user=1000, bash_timeout=60)
    async with serve_mcp(tools, token="parity-token") as url:
        return await stage(
            {"mcp": url}, {"mcp": "parity-token"}, [{"name": "bash", "arguments": {"command": c}} for c in commands]
        )


async def stage_over_ssh(ws, commands):
    async with serve_ssh(ws, user=1000, cwd=ct.WORKDIR) as ep:
        return await stage(
            {"ssh": ep.url},
            {"ssh": ep.credential()},
            [{"name": "bash", "capability": "ssh", "arguments": {"command": c}} for c in commands],
        )


async def tree_of(ws) -> str:
    result = await ws.exec(["bash", "-c", TREE])
    assert result.ok, result.text()
    return result.stdout.decode()


@pytest.mark.docker
@pytest.mark.slow
def test_mcp_and_ssh_staging_are_byte_identical_on_awkward_commands(task, run):
    commands = list(AWKWARD.values())

    async def both():
        async with fresh_workspace(task) as ws_mcp, fresh_workspace(task) as ws_ssh:
            over_mcp, over_ssh = await stage_over_mcp(ws_mcp, commands), await stage_over_ssh(ws_ssh, commands)
            return over_mcp, over_ssh, await tree_of(ws_mcp), await tree_of(ws_ssh)

    over_mcp, over_ssh, tree_mcp, tree_ssh = run(both())
    assert over_ssh.warnings == over_mcp.warnings == []
    assert [s.capability for s in over_ssh.steps] == ["ssh"] * len(commands)
    for label, by_mcp, by_ssh in zip(AWKWARD, over_mcp.steps, over_ssh.steps):
        assert (by_ssh.result, by_ssh.is_error) == (by_mcp.result, by_mcp.is_error), label
    assert tree_ssh == tree_mcp
    # Not vacuous: the commands really ran, and did what they say.
    results = dict(zip(AWKWARD, (s.result for s in over_ssh.steps)))
    assert results["quotes"].startswith("2\nsingle 'quotes' and \"double\" quotes, $HOME unexpanded, a\ttab, and é\n")
    assert results["nested quotes"] == "inner \"zero\" 'single'\nansi\ttab\n"
    assert results["heredoc"] == "value 42, sum 3, sub sub, \"dq\" 'sq' $literal\n"
    assert results["globs"] == "g/a.txt g/b.txt g/c d.txt\ng/*.txt g/*.txt\n\n"
    assert "héllo wörld — 日本語 🎉\n€\n" in results["non-ascii"]
    assert results["100 KB argument"].startswith(f"{len(BIG.encode())}\n")
    assert results["stderr first"] == "then stdout, no newline\nto stderr, first\n"
    assert results["failing"].startswith("partial\n") and results["failing"].endswith("[exit code 3]")
    assert [s.is_error for s in over_ssh.steps] == [False] * (len(commands) - 1) + [True]
    assert "./big.txt" in tree_ssh and "1000:1000" in tree_ssh


@pytest.mark.docker
def test_large_output_is_delivered_whole_after_the_command_exits(run, endpoint):
    text, code = bash(run, endpoint, "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo done")
    assert code == 0 and "[output truncated: 5000006 bytes in all" in text
    assert text.startswith("x" * 1000) and "x\ndone\n\n[output truncated" in text


@pytest.mark.docker
def test_sessions_run_as_the_agent_uid_behind_the_wall(run, endpoint):
    text, code = bash(run, endpoint, "id -u; id -g; pwd; ls /var/lib/crucible/vault")
    assert text.startswith(f"1000\n1000\n{ct.WORKDIR}\n") and "Permission denied" in text
    assert code == 2 and text.endswith("[exit code 2]")


@pytest.mark.docker
def test_exit_codes_propagate_and_mark_the_step_an_error(run, endpoint):
    assert bash(run, endpoint, "echo out; exit 3") == ("out\n[exit code 3]", 3)
    assert bash(run, endpoint, "true") == ("", 0)
    # the session's own shell killed by SIGTERM travels as an exit-signal: still 128 + 15 here, as MCP says
    assert bash(run, endpoint, "kill -TERM $PPID") == ("[exit code 143]", 143)

    outcome = run(
        stage(
            {"ssh": endpoint.url},
            {"ssh": endpoint.credential()},
            [
                {"name": "bash", "capability": "ssh", "arguments": {"command": "exit 3"}},
                {"name": "bash", "capability": "ssh", "arguments": {"command": "echo fine"}},
            ],
        )
    )
    assert [(s.capability, s.is_error, s.result) for s in outcome.steps] == [
        ("ssh", True, "[exit code 3]"),
        ("ssh", False, "fine\n"),
    ]


@pytest.mark.docker
def test_only_bash_travels_over_ssh_and_bad_steps_are_not_executed(run, endpoint, ws):
    outcome = run(
        stage(
            {"ssh": endpoint.url},
            {"ssh": endpoint.credential()},
            [
                {
                    "name": "str_replace_based_edit_tool",
                    "capability": "ssh",
                    "arguments": {"command": "create", "path": "/app/edited.txt", "file_text": "x"},
                },
                {"name": "bash", "capability": "ssh", "arguments": {"command": ""}},
                {"name": "bash", "capability": "ssh", "arguments": {"command": "touch /app/never", "timeout": "soon"}},
            ],
        )
    )
    assert [s.is_error for s in outcome.steps] == [True, True, True]
    assert all("not executed" in s.result for s in outcome.steps)
    assert run(ws.exec(["bash", "-c", "ls /app/edited.txt /app/never"])).exit_code == 2


@pytest.mark.docker
def test_wrong_credentials_are_rejected(run, endpoint, ws):
    stranger = asyncssh.generate_private_key("ssh-ed25519").export_private_key("openssh").decode()
    impostor_host = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode()
    attempts = {
        "another client key": SSHEndpoint(endpoint.host, endpoint.port, endpoint.username, stranger, endpoint.host_key),
        "another username": SSHEndpoint(endpoint.host, endpoint.port, "root", endpoint.client_key, endpoint.host_key),
        "another host key": SSHEndpoint(
            endpoint.host, endpoint.port, endpoint.username, endpoint.client_key, impostor_host
        ),
    }
    for label, attempt in attempts.items():
        with pytest.raises(AgentError, match="cannot connect"):
            bash(run, attempt, f"touch /tmp/{label.replace(' ', '-')}")
    assert run(ws.exec(["bash", "-c", "ls /tmp/another-*"])).exit_code == 2  # nothing ran

    async def with_password():
        await asyncssh.connect(
            endpoint.host,
            endpoint.port,
            username=endpoint.username,
            password="crucible",
            client_keys=None,
            known_hosts=None,
            agent_path=None,
            config=None,
        )

    with pytest.raises(asyncssh.PermissionDenied):
        run(with_password())
    assert bash(run, endpoint, "echo still fine") == ("still fine\n", 0)


@pytest.mark.slow
@pytest.mark.docker
def test_credentials_never_reach_the_workspace(run, endpoint, ws):
    keys = json.loads(endpoint.credential())
    private_body = "".join(keys["client_key"].splitlines()[1:-1])
    needles = [
        private_body[40:80],
        private_body[-60:-20],
        keys["host_key"].split()[1][20:60],
        asyncssh.import_private_key(keys["client_key"]).export_public_key().decode().split()[1][20:60],
    ]
    seen_by_session, _ = bash(
        run, endpoint, "env; tr '\\0' '\\n' < /proc/$$/environ; tr '\\0' '\\n' < /proc/$PPID/environ"
    )
    assert "PATH=" in seen_by_session and "HOME=" in seen_by_session
    assert not any(n in seen_by_session for n in needles)
    assert "SSH_" not in seen_by_session

    grep = [
        "grep",
        "-rlsF",
        "--exclude-dir=proc",
        "--exclude-dir=sys",
        "--exclude-dir=dev",
        *(arg for n in needles for arg in ("-e", n)),
        "/",
    ]
    pid1 = run(ws.exec(["cat", "/proc/1/environ"]))
    assert pid1.ok and not any(n.encode() in pid1.stdout for n in needles)
    assert run(ws.exec(grep, timeout=120)).exit_code == 1, "a credential was found in the workspace"
    # The search does find what is there (so the line above can fail).
    run(ws.write_file("/tmp/planted.txt", needles[0].encode()))
    try:
        assert run(ws.exec(grep, timeout=120)).stdout == b"/tmp/planted.txt\n"
    finally:
        run(ws.exec(["rm", "-f", "/tmp/planted.txt"]))


@pytest.mark.docker
def test_an_interactive_shell_session_works_over_pipes(run, endpoint):
    async def shell():
        async with open_ssh(endpoint) as conn:
            process = await conn.create_process(encoding=None)
            process.stdin.write(b"echo hi; id -u\ncd /tmp && pwd\n")
            process.stdin.write(b"exit\n")
            output = await process.stdout.read()
            await process.wait_closed()
            on_terminal = await conn.run("test -t 0 && stty size && echo $TERM", term_type="xterm", term_size=(90, 30))
            return output, process.exit_status, on_terminal.stdout

    output, status, on_terminal = run(shell())
    assert (output, status) == (b"hi\n1000\n/tmp\n", 0)
    assert on_terminal == "30 90\r\nxterm\r\n"  # a pty request is honoured (tests/capabilities/test_ssh_openssh.py)


def _wait_until_gone(run, ws, marker, patience=10.0):
    """The processes whose command line holds ``marker`` still alive after ``patience`` s."""

    async def poll():
        deadline = asyncio.get_running_loop().time() + patience
        while (alive := await _marked_async(ws, marker)) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.2)
        return alive

    return run(poll())


async def _marked_async(ws, marker):
    listing = await ws.exec(
        ["bash", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"]
    )
    return [line for line in listing.stdout.decode().splitlines() if marker in line]


@pytest.mark.slow
@pytest.mark.docker
def test_a_timed_out_command_is_killed_in_the_workspace(run, endpoint, ws):
    marker = f"crucible-timeout-{uuid.uuid4().hex[:8]}"
    text, code = bash(run, endpoint, f"(exec -a {marker}-child sleep 300) & exec -a {marker} sleep 300", timeout=1.5)
    assert code == 124 and "timed out after 1.5 s" in text
    assert _wait_until_gone(run, ws, marker) == []


@pytest.mark.slow
@pytest.mark.docker
def test_closing_the_endpoint_kills_running_sessions(run, ws):
    marker = f"crucible-close-{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with serve_ssh(ws, user=1000, cwd=ct.WORKDIR) as ep:
            conn = await asyncssh.connect(
                ep.host,
                ep.port,
                username=ep.username,
                config=None,
                agent_path=None,
                client_keys=[asyncssh.import_private_key(ep.client_key)],
                known_hosts=([asyncssh.import_public_key(ep.host_key)], [], []),
            )
            await conn.create_process(f"(exec -a {marker}-child sleep 300) & exec -a {marker} sleep 300")
            for _ in range(50):
                if len(await _marked_async(ws, marker)) >= 2:
                    break
                await asyncio.sleep(0.1)
            before = await _marked_async(ws, marker)
        # The client never closed its session: the server's exit alone must end it.
        await asyncio.wait_for(conn.wait_closed(), 10)
        return before

    before = run(scenario())
    assert len(before) >= 2, before  # the command and its background child were running
    assert _wait_until_gone(run, ws, marker) == []


def test_an_endpoint_travels_as_url_and_credential_and_hides_its_key():
    key = asyncssh.generate_private_key("ssh-ed25519")
    endpoint = SSHEndpoint(
        "127.0.0.1", 2222, "crucible", key.export_private_key().decode(), key.export_public_key().decode().strip()
    )
    assert endpoint.url == "ssh://crucible@127.0.0.1:2222"
    assert SSHEndpoint.from_capability(endpoint.url, endpoint.credential()) == endpoint
    assert "PRIVATE" not in repr(endpoint)
    for url, credential in [
        ("http://x@h:1", endpoint.credential()),
        ("ssh://h:1", endpoint.credential()),
        (endpoint.url, ""),
        (endpoint.url, "{}"),
    ]:
        with pytest.raises(AgentError, match="malformed ssh capability"):
            SSHEndpoint.from_capability(url, credential)
