"""The coding tools served over the REAL MCP protocol (official SDK, streamable HTTP).

One container (the coding task image, set up under integrity=strict: uid wall) and one
MCP server serve the whole module; every call goes client -> HTTP -> server -> tools ->
docker exec, as an agent's would. The unix-socket bind needs no container.
"""

from __future__ import annotations

import asyncio
import uuid

import coding_task as ct
import httpx
import pytest

from engine.capabilities.mcp_client import call_tool, open_mcp
from engine.capabilities.mcp_server import serve_mcp
from engine.runtimes.docker.runtime import DockerRuntime
from envs.coding.repo import setup_repo
from envs.coding.tools import CodingTools

TOKEN = "test-token-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def ws(docker_client, base_image, tmp_path_factory, run):
    repo = ct.build_repo(tmp_path_factory.mktemp("mcp") / "repo")
    image = ct.build_image(docker_client, base_image, repo, tmp_path_factory.mktemp("mcp-ctx"))
    workspace = DockerRuntime().provision(image, run_id=f"mcp-{uuid.uuid4().hex[:8]}", network=False, purpose="agent")
    run(workspace.__aenter__())
    try:
        run(setup_repo(workspace, ct.task(repo), ct.integrity("strict")))
        yield workspace
    finally:
        run(workspace.close())


@pytest.fixture(scope="module")
def url(ws, loop, run):
    """The module's MCP server, served by one long-lived task (its task groups must be
    entered and left by the same task)."""
    tools = CodingTools(ws, workdir=ct.WORKDIR, user=1000, bash_timeout=30, max_output_bytes=32768)
    ready, stop = loop.create_future(), asyncio.Event()

    async def serve():
        async with serve_mcp(tools, token=TOKEN) as address:
            ready.set_result(address)
            await stop.wait()

    server = loop.create_task(serve())
    yield run(ready)
    stop.set()
    run(server)


@pytest.fixture
def session(url, run):
    """session(body): run ``await body(call)`` over ONE MCP session, where
    ``await call(name, arguments)`` -> (text, is_error)."""

    async def within(body):
        async with open_mcp(url, TOKEN) as mcp:
            return await body(lambda name, arguments: call_tool(mcp, name, arguments))

    return lambda body: run(within(body))


def edit(call, **arguments):
    return call("str_replace_based_edit_tool", arguments)


@pytest.mark.docker
def test_list_tools_offers_bash_and_the_edit_tool(url, run):
    async def listing():
        async with open_mcp(url, TOKEN) as mcp:
            return (await mcp.list_tools()).tools

    tools = {tool.name: tool for tool in run(listing())}
    assert set(tools) == {"bash", "str_replace_based_edit_tool"}
    assert "command" in tools["bash"].inputSchema["properties"]
    assert tools["str_replace_based_edit_tool"].inputSchema["required"] == ["command", "path"]


QUOTING = r"""mkdir -p "out dir" && cat > "out dir/it's \"q\".txt" <<'EOF'
single 'quotes' and "double" quotes, $HOME unexpanded, a	tab, and é
EOF
printf '%s|%s\n' "a b" 'c"d' | tr '|' '\t' >> "out dir/it's \"q\".txt" && wc -l < "out dir/it's \"q\".txt" && cat "out dir/it's \"q\".txt"
echo "to stderr" >&2"""
EXPECTED_FILE = 'single \'quotes\' and "double" quotes, $HOME unexpanded, a\ttab, and é\na b\tc"d\n'.encode()


@pytest.mark.docker
def test_bash_over_mcp_is_byte_identical_to_bash_lc(session, ws):
    target = f'{ct.WORKDIR}/out dir/it\'s "q".txt'

    async def body(call):
        text, is_error = await call("bash", {"command": QUOTING})
        over_mcp = await ws.read_file(target)
        await ws.exec(["rm", "-rf", "--", f"{ct.WORKDIR}/out dir"])
        direct = await ws.exec(["bash", "-lc", QUOTING], user=1000, cwd=ct.WORKDIR)
        return text, is_error, over_mcp, direct, await ws.read_file(target)

    text, is_error, over_mcp, direct, directly_written = session(body)
    assert direct.ok and not is_error
    assert text == direct.text()
    assert directly_written == over_mcp == EXPECTED_FILE
    assert text == "2\n" + EXPECTED_FILE.decode() + "to stderr\n"


@pytest.mark.docker
def test_bash_runs_as_the_agent_uid_and_cannot_reach_the_vault(session):
    text, is_error = session(lambda call: call("bash", {"command": "id -u && ls /var/lib/crucible/vault"}))
    assert text.startswith("1000\n") and "Permission denied" in text
    assert is_error and text.endswith("[exit code 2]")


@pytest.mark.slow
@pytest.mark.docker
def test_bash_timeout_is_an_error_with_a_note(session):
    text, is_error = session(lambda call: call("bash", {"command": "echo started; sleep 20", "timeout": 1}))
    assert is_error and text.startswith("started\n") and "timed out after 1 s" in text


ESCAPES = [
    {"command": "view", "path": "../etc/passwd"},
    {"command": "view", "path": f"{ct.WORKDIR}/../etc/passwd"},
    {"command": "create", "path": "/tmp/outside.txt", "file_text": "x"},
    {"command": "create", "path": f"{ct.WORKDIR}/escape/evil.conf", "file_text": "x"},  # via a symlinked dir
    {"command": "str_replace", "path": f"{ct.WORKDIR}/host.txt", "old_str": "a", "new_str": "b"},  # symlinked file
    {"command": "view", "path": "escape"},
]


@pytest.mark.slow
@pytest.mark.docker
def test_edit_tool_refuses_paths_that_leave_the_workdir(session, ws, run):
    run(ws.exec(["ln", "-sfn", "/etc", f"{ct.WORKDIR}/escape"]))
    run(ws.exec(["ln", "-sfn", "/etc/hostname", f"{ct.WORKDIR}/host.txt"]))

    async def body(call):
        return [await edit(call, **arguments) for arguments in ESCAPES]

    for arguments, (text, is_error) in zip(ESCAPES, session(body)):
        assert is_error and "outside the repository" in text, (arguments, text)
    assert run(ws.exec(["test", "-e", "/etc/evil.conf"])).exit_code == 1
    assert run(ws.exec(["test", "-e", "/tmp/outside.txt"])).exit_code == 1


@pytest.mark.docker
def test_edit_tool_writes_as_the_agent_uid(session, ws, run):
    run(ws.exec(["mkdir", "-m", "755", f"{ct.WORKDIR}/rootonly"]))  # root's directory inside the repo

    async def body(call):
        return (
            await edit(call, command="create", path="rootonly/f.txt", file_text="x"),
            await edit(call, command="create", path="mine/f.txt", file_text="x"),
        )

    (denied_text, denied), (_, failed) = session(body)
    assert denied and "Permission denied" in denied_text and not failed
    assert run(ws.exec(["stat", "-c", "%u:%g", f"{ct.WORKDIR}/mine/f.txt"])).stdout == b"1000:1000\n"


@pytest.mark.slow
@pytest.mark.docker
def test_edit_tool_keeps_bytes_and_follows_text_editor_semantics(session, ws):
    path, latin = f"{ct.WORKDIR}/e/crlf.txt", f"{ct.WORKDIR}/e/latin.txt"

    async def body(call):
        seen = {}
        seen["create"] = await edit(call, command="create", path="e/crlf.txt", file_text="a\r\nbé\r\nc")
        seen["created"] = await ws.read_file(path)
        seen["view"] = await edit(call, command="view", path=path, view_range=[2, -1])
        seen["replace"] = await edit(call, command="str_replace", path=path, old_str="bé", new_str="B")
        seen["replaced"] = await ws.read_file(path)
        seen["twice"] = await edit(call, command="str_replace", path=path, old_str="\r\n", new_str="")
        seen["absent"] = await edit(call, command="str_replace", path=path, old_str="zzz", new_str="")
        seen["insert"] = await edit(call, command="insert", path=path, insert_line=1, insert_text="X")
        seen["inserted"] = await ws.read_file(path)
        await ws.write_file(latin, b"caf\xe9 ok\n", owner=1000)
        seen["latin"] = await edit(call, command="str_replace", path="e/latin.txt", old_str="ok", new_str="OK")
        seen["latin_bytes"] = await ws.read_file(latin)
        seen["dir"] = await edit(call, command="view", path="e")
        seen["missing"] = await edit(call, command="view", path="e/missing.txt")
        seen["unknown"] = await edit(call, command="undo_edit", path=path)
        return seen

    seen = session(body)
    assert seen["create"] == (f"File created successfully at: {path}", False)
    assert seen["created"] == "a\r\nbé\r\nc".encode()  # CRLF, non-ASCII, no final newline: as given
    assert seen["view"][0].endswith("     2\tbé\r\n     3\tc\n") and not seen["view"][1]
    assert "has been edited" in seen["replace"][0] and seen["replaced"] == b"a\r\nB\r\nc"
    assert seen["twice"][1] and "Multiple occurrences" in seen["twice"][0]
    assert seen["absent"][1] and "did not appear verbatim" in seen["absent"][0]
    assert not seen["insert"][1] and seen["inserted"] == b"a\r\nX\nB\r\nc"
    assert not seen["latin"][1] and seen["latin_bytes"] == b"caf\xe9 OK\n"  # non-UTF-8 bytes kept
    assert not seen["dir"][1] and path in seen["dir"][0] and latin in seen["dir"][0]
    assert seen["missing"][1] and seen["unknown"][1]


@pytest.mark.docker
def test_unknown_tools_and_bad_arguments_come_back_as_errors(session):
    async def body(call):
        return [
            await call("no_such_tool", {}),
            await call("bash", {"command": 42}),
            await call("bash", {"command": " "}),
        ]

    unknown, mistyped, blank = session(body)
    assert unknown[1] and "no_such_tool" in unknown[0]
    # the SDK's own words for it (its check is made with each schema's validator made once)
    assert mistyped == ("Input validation error: 42 is not of type 'string'", True)
    assert blank[1]


@pytest.mark.docker
def test_a_wrong_or_missing_token_is_rejected(url, run):
    async def status(headers):
        async with httpx.AsyncClient() as client:
            request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            return (await client.post(url, json=request, headers=headers)).status_code

    assert run(status({"Authorization": "Bearer wrong"})) == 401
    assert run(status({})) == 401
    assert run(status({"Authorization": f"Bearer {TOKEN}x"})) == 401

    async def connect_with_wrong_token():
        async with open_mcp(url, "wrong") as mcp:
            await mcp.list_tools()

    with pytest.raises(Exception) as caught:
        run(connect_with_wrong_token())
    assert "401" in repr(caught.value) or any("401" in repr(e) for e in getattr(caught.value, "exceptions", []))


class _Echo:
    def specs(self):
        return [{"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}]

    async def call(self, name, arguments):
        return f"{name}:{arguments.get('text', '')}", bool(arguments.get("fail"))


def test_serving_over_a_unix_socket_for_clis_inside_containers(tmp_path, run):
    socket_path = str(tmp_path / "mcp.sock")

    async def scenario():
        async with serve_mcp(_Echo(), token=TOKEN, uds=socket_path) as address:  # noqa: SIM117 (the session opens on the transport)
            async with open_mcp(address, TOKEN, uds=socket_path) as mcp:
                return await call_tool(mcp, "echo", {"text": "hi"}), await call_tool(mcp, "echo", {"fail": True})

    assert run(scenario()) == (("echo:hi", False), ("echo:", True))
    assert not (tmp_path / "mcp.sock").exists()  # removed on exit


# An MCP initialize request, as an in-workspace client (a coding CLI) sends it, over the
# bridge's unix socket with perl (in every Debian image): the status line comes back.
_HTTP_OVER_SOCKET = r"""
use IO::Socket::UNIX;
my ($path, $token) = @ARGV;
my $body = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26",'
         . '"capabilities":{},"clientInfo":{"name":"inside","version":"0"}}}';
my $s = IO::Socket::UNIX->new(Peer => $path) or die "connect: $!\n";
print $s "POST /mcp/ HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
       . "Accept: application/json, text/event-stream\r\n"
       . ($token ? "Authorization: Bearer $token\r\n" : "")
       . "Content-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
my $status = <$s>; print $status;
"""


@pytest.mark.slow
@pytest.mark.docker
def test_an_agent_inside_a_workspace_without_network_reaches_the_runs_mcp_server_through_the_bridge(
    base_image, tmp_path_factory, run
):
    """The run's MCP server also listens in the agent workspace's bridge (BRIDGE_PATH/mcp.sock):
    a client inside, as the agent's uid, with no network, gets the server with the run's
    token, and 401 without it."""
    import os
    import tempfile

    from engine.capabilities.mcp_server import MCP_SOCKET
    from engine.interfaces import AGENT_UID, BRIDGE_PATH

    bridge = tempfile.mkdtemp(prefix="crucible-bridge-", dir="/tmp")
    os.chmod(bridge, 0o755)

    async def scenario():
        async with serve_mcp(_Echo(), token=TOKEN, also_uds=f"{bridge}/{MCP_SOCKET}"):
            runtime = DockerRuntime()
            async with runtime.provision(
                base_image, run_id=f"bridge-{uuid.uuid4().hex[:8]}", network=False, purpose="test", bridge=bridge
            ) as ws:
                assert ws.bridge == BRIDGE_PATH
                inside = f"{ws.bridge}/{MCP_SOCKET}"
                answers = [
                    await ws.exec(["perl", "-e", _HTTP_OVER_SOCKET, inside, *token], user=AGENT_UID, timeout=30)
                    for token in ([TOKEN], [])
                ]
                return [a.stdout.decode().strip() for a in answers], ws.network

    (with_token, without), network = run(scenario())
    assert network is False
    assert with_token.startswith("HTTP/1.1 200"), with_token
    assert without.startswith("HTTP/1.1 401"), without
    assert not os.path.exists(f"{bridge}/{MCP_SOCKET}")  # removed with the server
