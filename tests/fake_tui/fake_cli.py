"""A deterministic fake coding CLI that behaves like the TUIs (Claude Code, Codex) in tmux, for
the tmux provider-contract tests (tests/agents/test_cli_agents_tmux.py). Not a model: what it answers
is fixed by the prompt.

    python fake_cli.py --state DIR [--resume SESSION_ID] [--no-trust] [--mcp-socket PATH --mcp-token T]

Screen: a banner with its session id, a trust prompt ("Do you trust the files in this folder?
(y/n)"), then the prompt glyph "❯ ". Input is read raw: bracketed paste (ESC[200~ ... ESC[201~)
shows "[Pasted text #N +L lines]" until Enter submits it; typed text is echoed; C-u clears the
draft. While working it shows a spinner line with "(esc to interrupt)"; Esc interrupts
("⎿ Interrupted by user"). Prompts (their words decide):
    remember X        keeps X in the session's memory      -> "● Noted."
    recall            answers with what it remembered     -> "● You asked me to remember X."
    slow N            a tool call that takes N s, with a prompt-like footer ("❯ ...") visible
    slow-until-steered N
                      the same, ending once a message is steered in (at most N s)
    crash             exits with status 3
    call TOOL JSON    a real MCP tool call through the run's server (the official SDK's client over
                      --mcp-socket, bearer --mcp-token), shown as a tool panel -> "● The tool said: ..."
                      and kept in DIR/<session>.jsonl in Claude Code's transcript form
    anything else     echoed back                          -> "● You said: TEXT"
A message submitted while it works is queued into the same turn ("● (steered) TEXT").
The session's memory lives in DIR/<session>.json, so --resume SESSION_ID continues it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import sys
import termios
import time
import tty
import uuid
from pathlib import Path

GLYPH = "❯ "


def out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class Session:
    def __init__(self, state: str, session_id: str | None) -> None:
        self.state = state
        self.id = session_id or uuid.uuid4().hex[:12]
        path = os.path.join(state, f"{self.id}.json")
        self.memory: list[str] = json.loads(Path(path).read_text())["memory"] if os.path.exists(path) else []

    def save(self) -> None:
        with open(os.path.join(self.state, f"{self.id}.json"), "w") as f:
            json.dump({"memory": self.memory}, f)


async def mcp_call(socket_path: str, token: str, tool: str, arguments: dict) -> tuple[str, bool]:
    """One tool call through the run's MCP server, with the official SDK's client."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    client = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60, transport=httpx.AsyncHTTPTransport(uds=socket_path)
    )
    async with client, streamable_http_client("http://localhost/mcp/", http_client=client) as (read, write, _):  # noqa: SIM117 (the session opens on the transport)
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(tool, arguments)
    return "".join(getattr(block, "text", "") for block in result.content), bool(result.isError)


class Tui:
    def __init__(self, session: Session, mcp: tuple[str, str] | None = None) -> None:
        self.session = session
        self.mcp = mcp
        self.pastes = 0
        self.draft = ""
        self.pending: list[str] = []
        self.buffer = b""
        self.busy = False

    # ------------------------------------------------------------ input
    def read(self, timeout: float) -> bytes:
        ready, _, _ = select.select([sys.stdin], [], [], timeout)
        return os.read(sys.stdin.fileno(), 4096) if ready else b""

    def prompt(self) -> None:
        out(f"\r\n{GLYPH}")

    def edit(self, data: bytes) -> list[str]:
        """Apply keystrokes to the draft; the texts submitted (Enter)."""
        submitted = []
        self.buffer += data
        while self.buffer:
            if self.buffer.startswith(b"\x1b[200~"):
                end = self.buffer.find(b"\x1b[201~")
                if end < 0:
                    return submitted
                text = self.buffer[6:end].decode()
                self.buffer = self.buffer[end + 6 :]
                self.pastes += 1
                self.draft += text
                marker = f"[Pasted text #{self.pastes} +{text.count(chr(10)) + 1} lines]"
                out(f"\r\x1b[2K  {marker}\r\n" if self.busy else marker)
                continue
            byte, self.buffer = self.buffer[:1], self.buffer[1:]
            if byte in (b"\r", b"\n"):
                if self.draft.strip():
                    submitted.append(self.draft)
                self.draft = ""
            elif byte == b"\x15":  # C-u: the draft is gone
                self.draft = ""
                out(f"\r\x1b[2K{GLYPH}")
            elif byte == b"\x1b":
                submitted.append("\x1b")
            elif byte == b"\x03":
                raise KeyboardInterrupt
            elif byte >= b" ":
                self.draft += byte.decode(errors="replace")
                out(byte.decode(errors="replace"))
        return submitted

    # ------------------------------------------------------------ turns
    def work(self, text: str) -> None:
        self.busy = True
        try:
            self.turn(text)
        finally:
            self.busy = False

    def queue(self, item: str) -> None:
        """A message submitted while working: steered into this very turn."""
        self.pending.append(item)
        out(f"\r\x1b[2K> {item} (queued)\r\n")

    def turn(self, text: str) -> None:
        out(f"\r\n> {text}\r\n")
        words = text.split()
        if words[:1] == ["crash"]:
            out("fatal: the fake CLI crashed\r\n")
            sys.exit(3)
        if words[:1] == ["remember"]:
            self.session.memory.append(" ".join(words[1:]))
            self.session.save()
            reply = "Noted."
        elif words[:1] == ["recall"]:
            reply = f"You asked me to remember {self.session.memory[-1]}." if self.session.memory else "Nothing."
        elif words[:1] == ["call"] and len(words) >= 2:
            reply = self.call(words[1], json.loads(text.split(None, 2)[2]) if len(words) > 2 else {})
        elif words[:1] in (["slow"], ["slow-until-steered"]):
            if not self.tool(float(words[1]), until_steered=words[0] == "slow-until-steered"):
                return
            reply = "The slow tool is done."
        else:
            reply = f"You said: {text}"
        if not self.spin(0.6):
            return
        for queued in self.pending:
            out(f"● (steered) {queued}\r\n")
        self.pending = []
        out(f"● {reply}\r\n")

    def call(self, tool: str, arguments: dict) -> str:
        if self.mcp is None:
            return "No MCP server configured."
        call_id = f"toolu_{uuid.uuid4().hex[:12]}"
        name = f"mcp__crucible__{tool}"
        self.transcript("assistant", {"type": "tool_use", "id": call_id, "name": name, "input": arguments})
        out("● Let me call the tool.\r\n")  # narration before a tool call: not the final answer
        out(f"● {name}({json.dumps(arguments)[:80]})\r\n")
        try:
            text, is_error = asyncio.run(mcp_call(*self.mcp, tool, arguments))
        except Exception as exc:  # the panel says it, as a TUI would
            text, is_error = f"{type(exc).__name__}: {exc}", True
        self.transcript("user", {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": is_error})
        first = (text.strip().splitlines() or [""])[0]
        out(f"  ⎿ {first[:120]}\r\n")
        return f"The tool {'failed' if is_error else 'said'}: {first}"

    def transcript(self, kind: str, block: dict) -> None:
        """Claude Code's session record: the same messages as its stream-json."""
        line = {
            "type": kind,
            "session_id": self.session.id,
            "message": {"content": [block]},
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
        }
        with open(os.path.join(self.session.state, f"{self.session.id}.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")

    def spin(self, seconds: float) -> bool:
        """Think for ``seconds``; False when interrupted (Esc)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            out("\r\x1b[2K✻ Thinking… (esc to interrupt)")
            for item in self.edit(self.read(0.1)):
                if item == "\x1b":
                    out("\r\x1b[2K⎿ Interrupted by user\r\n")
                    return False
                self.queue(item)
        out("\r\x1b[2K")
        return True

    def tool(self, seconds: float, *, until_steered: bool = False) -> bool:
        out("● Bash(sleep)\r\n  ⎿ running…\r\n")
        end = time.monotonic() + seconds
        # The false-idle trap: a prompt glyph visible while it works.
        while time.monotonic() < end and not (until_steered and self.pending):
            out(f"\r\x1b[2K{GLYPH}(tool output streaming)  · esc to interrupt")
            for item in self.edit(self.read(0.2)):
                if item == "\x1b":
                    out("\r\x1b[2K⎿ Interrupted by user\r\n")
                    return False
                self.queue(item)
        out("\r\x1b[2K  ⎿ done (3 lines)\r\n")
        return True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--resume")
    parser.add_argument("--no-trust", action="store_true")
    parser.add_argument("--mcp-socket")
    parser.add_argument("--mcp-token", default="")
    args = parser.parse_args()
    session = Session(args.state, args.resume)
    saved = termios.tcgetattr(sys.stdin)
    tty.setraw(sys.stdin)
    try:
        out("\x1b[?2004h")  # bracketed paste on, as the real TUIs ask for it
        out(f"╭─ Fake CLI ─╮\r\n│ session: {session.id} │\r\n│ cwd: {os.getcwd()} │\r\n╰────────────╯\r\n")
        if not args.no_trust and not args.resume:
            out("Do you trust the files in this folder? (y/n) ")
            while (key := os.read(sys.stdin.fileno(), 1)) not in (b"y", b"n"):
                pass
            out(key.decode() + "\r\n")
            if key == b"n":
                return 1
        tui = Tui(session, (args.mcp_socket, args.mcp_token) if args.mcp_socket else None)
        tui.prompt()
        while True:
            for text in tui.edit(tui.read(0.5)):
                if text != "\x1b":
                    tui.work(text)
                    tui.prompt()
    except KeyboardInterrupt:
        return 130
    finally:
        out("\x1b[?2004l")
        termios.tcsetattr(sys.stdin, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main())
