"""engine/util/deferred.py: paramiko, imported by the Docker SDK but never used by crucible
(its ssh:// hosts go through the OpenSSH client), is loaded only when something reads it.

Each check runs in a fresh interpreter: what a module import leaves behind is process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from engine.util.paths import PROJECT_ROOT


def _python(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_importing_the_docker_sdk_through_crucible_leaves_paramiko_unloaded_even_for_an_ssh_client() -> None:
    out = _python(
        """
        import sys
        import engine
        import docker
        # An ssh:// client as placement.py makes one (the OpenSSH client): paramiko unused.
        client = docker.DockerClient(base_url="ssh://nobody@127.0.0.1:1", use_ssh_client=True, version="1.41")
        client.close()
        print(type(sys.modules["paramiko"]).__name__, "paramiko.transport" in sys.modules)
        """
    )
    assert out == "DeferredModule False"


def test_reading_paramiko_loads_the_real_module_for_every_reference_to_it() -> None:
    out = _python(
        """
        import sys
        import engine
        from docker.transport import sshconn  # holds the stand-in it imported
        import paramiko.transport  # a submodule import loads the package first
        real = sys.modules["paramiko"]
        print(type(real).__name__, sshconn.paramiko.SSHClient is real.SSHClient, paramiko.transport.Transport.__name__)
        """
    )
    assert out == "module True Transport"


def test_a_module_imported_before_crucible_is_left_as_it_is() -> None:
    out = _python(
        """
        import sys
        import paramiko
        import engine
        print(sys.modules["paramiko"] is paramiko, type(paramiko).__name__)
        """
    )
    assert out == "True module"


def test_httpx_without_its_command_line_client_until_that_is_called() -> None:
    out = _python(
        """
        import sys
        import engine
        import httpx
        httpx.Client().close()  # what the MCP SDK's client does with it
        before = "rich.console" in sys.modules or "click" in sys.modules
        try:
            httpx.main(["--help"])
        except SystemExit as exc:
            code = exc.code
        print(before, code, "click" in sys.modules)
        """
    )
    assert out.splitlines()[-1] == "False 0 True"


def test_trio_stays_unloaded_under_the_mcp_clients_http_stack_on_asyncio() -> None:
    out = _python(
        """
        import asyncio, sys, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import engine
        import httpx
        import mcp.client.session  # noqa: F401

        class Answer(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
        threading.Thread(target=server.serve_forever, daemon=True).start()

        async def main():
            async with httpx.AsyncClient() as client:  # httpcore's pool asks which library runs it
                return (await client.get(f"http://127.0.0.1:{server.server_port}/")).text

        assert asyncio.run(main()) == "ok"
        server.shutdown()
        print(type(sys.modules.get("trio")).__name__, "trio._core" in sys.modules)
        """
    )
    assert out.splitlines()[-1] in ("DeferredModule False", "NoneType False")  # NoneType: trio not installed
