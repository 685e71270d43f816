"""The tmux transport of a coding CLI: its interactive TUI driven through a private tmux server
(seed 001's provider contract). Only tmux commands cross the boundary, through ``run`` (``tmux
ARGS`` in the workspace, as the agent's uid, or on the host in tests), so the driver works in
any workspace that has tmux.

- One private server per run (``tmux -L NAME -f /dev/null``), a fixed window size and history
  limit, the CLI launched through a login shell in the run's cwd with the run's environment.
- Ready: the profile's prompt line alone at the bottom, no busy marker, the screen stable; a
  trust prompt on the way is answered.
- Submit: the draft is cleared first (a stale draft is never sent), the text goes in as a
  bracketed paste, its arrival is verified (the paste marker or the text on screen) before
  Enter, and Enter is verified to have started a turn; each with bounded retries.
- Done: the CLI idle (ready line, no busy marker) AND the screen unchanged for ``stable``
  seconds — never a timer alone, and never the prompt glyph alone (a running tool may show one);
  where the CLI's session record marks a turn's end (Codex's rollout), that mark too.
- Answer: the answer blocks after the last echo of the submitted prompt and after the turn's
  last tool panel, without tool panels, the echo itself, queued drafts or earlier turns.
- Cancel: Escape, then C-c; a pane that is not prompt-ready after that is killed, never reused.
- Resume: a lost server is a new pane started with the CLI's resume arguments.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.interfaces import Workspace

Run = Callable[[Sequence[str]], Awaitable[tuple[int, str]]]
"""Runs ``tmux ARGS...``; (exit code, stdout)."""
Over = Callable[[], Awaitable[bool]]
"""Whether the CLI's own record says its turn has ended (asked only when the screen looks idle)."""


def in_workspace(ws: Workspace, uid: int) -> Run:
    """``Run`` for tmux inside a workspace, as ``uid`` (its server socket is that uid's)."""

    async def run(argv: Sequence[str]) -> tuple[int, str]:
        result = await ws.exec(list(argv), user=uid, timeout=30)
        return result.exit_code, result.stdout.decode("utf-8", "replace")

    return run


class TuiError(Exception):
    """The TUI did not do what the contract needs (not ready, paste not taken, crashed)."""


@dataclass(frozen=True)
class TuiProfile:
    """What one CLI's TUI looks like on screen (regular expressions, matched per line)."""

    ready: str = r"^❯\s*$"
    busy: str = r"esc to interrupt"
    trust: str = r"Do you trust the files in this folder"
    trust_answer: str = "y"
    pasted: str = r"\[Pasted text #\d+"
    echo: str = r"^> "
    answer: str = r"^● "
    tool_panel: str = r"^(● \w+\(|\s*⎿)"
    interrupted: str = r"Interrupted"
    ready_within: int = 1
    """How many non-blank lines from the bottom the ready line may be (a TUI may draw a
    status line under its input box)."""


class TmuxPane:
    """One CLI in one private tmux server."""

    def __init__(
        self,
        run: Run,
        server: str,
        *,
        profile: TuiProfile = TuiProfile(),
        width: int = 160,
        height: int = 48,
        history: int = 50000,
        poll: float = 0.1,
    ) -> None:
        self.run, self.server, self.profile = run, server, profile
        self.width, self.height, self.history, self.poll = width, height, history, poll
        self.session = "crucible"
        self.poisoned = False
        self.status_lines = 6

    async def tmux(self, *args: str, check: bool = True) -> str:
        code, out = await self.run(["tmux", "-L", self.server, "-f", "/dev/null", *args])
        if check and code != 0 and ("no server running" in out or "can't find session" in out):
            raise TuiError("the CLI exited (its tmux session is gone)")
        if check and code != 0:
            raise TuiError(f"tmux {args[0]} failed ({code}): {out.strip()[:300]}")
        return out

    # ------------------------------------------------------------ lifecycle
    async def start(self, argv: Sequence[str], *, cwd: str, env: dict[str, str] | None = None) -> None:
        exports = [item for k, v in (env or {}).items() for item in ("-e", f"{k}={v}")]
        await self.tmux(
            "start-server",
            ";",
            "set-option",
            "-g",
            "history-limit",
            str(self.history),
            ";",
            "new-session",
            "-d",
            "-s",
            self.session,
            "-x",
            str(self.width),
            "-y",
            str(self.height),
            "-c",
            cwd,
            *exports,
            "--",
            "bash",
            "-lc",
            'cd "$0" && exec "$@"',
            cwd,
            *argv,
        )

    async def alive(self) -> bool:
        code, _ = await self.run(["tmux", "-L", self.server, "-f", "/dev/null", "has-session", "-t", self.session])
        return code == 0

    async def kill(self) -> None:
        await self.tmux("kill-server", check=False)

    async def screen(self, *, history: bool = False) -> list[str]:
        out = await self.tmux("capture-pane", "-p", "-J", "-t", self.session, *(["-S", "-"] if history else []))
        return out.rstrip("\n").split("\n")

    def idle(self, lines: list[str]) -> bool:
        """The prompt line alone at the bottom and no busy marker in the status area above it
        (the bottom lines: a TUI's spinner and footer live there, old turns scroll above)."""
        shown = [line for line in lines if line.strip()]
        bottom = shown[-self.profile.ready_within :]
        return any(re.search(self.profile.ready, line) for line in bottom) and not any(
            re.search(self.profile.busy, line) for line in shown[-self.status_lines :]
        )

    async def wait_ready(self, timeout: float = 30.0, *, stable: float = 0.5) -> None:
        """Until the TUI is idle and stable, answering a trust prompt on the way."""
        deadline, last, since, trusted = time.monotonic() + timeout, None, time.monotonic(), False
        while time.monotonic() < deadline:
            if not await self.alive():
                raise TuiError("the CLI exited (its tmux session is gone)")
            lines = await self.screen()
            shown = [line for line in lines if line.strip()]
            if not trusted and shown and re.search(self.profile.trust, shown[-1]):  # asked now, not scrolled by
                await self.tmux("send-keys", "-t", self.session, "-l", self.profile.trust_answer)
                trusted = True
            if lines != last:
                last, since = lines, time.monotonic()
            elif self.idle(lines) and time.monotonic() - since >= stable:
                return
            await asyncio.sleep(self.poll)
        raise TuiError(f"the CLI was not prompt-ready within {timeout:g} s")

    # ------------------------------------------------------------ a turn
    async def submit(self, text: str, *, retries: int = 3, clear: bool = True) -> None:
        """Paste ``text`` (bracketed) into an empty draft, verify it arrived, press Enter."""
        for _ in range(retries):
            if clear:
                await self.tmux("send-keys", "-t", self.session, "C-u")
            before = await self.screen()
            await self.tmux("set-buffer", "-b", "crucible", "--", text)
            await self.tmux("paste-buffer", "-p", "-d", "-b", "crucible", "-t", self.session)
            if await self._until(functools.partial(self._arrived, before, text=text), 3.0):
                break
        else:
            raise TuiError(
                f"the paste did not arrive after {retries} tries; the screen ends: {self._tail(await self.screen())!r}"
            )
        for _ in range(retries):
            await self.tmux("send-keys", "-t", self.session, "Enter")
            if await self._until(functools.partial(self._started, text=text), 3.0):
                return
        raise TuiError(
            f"Enter did not start a turn after {retries} tries; the screen ends: {self._tail(await self.screen())!r}"
        )

    def _tail(self, lines: list[str]) -> str:
        return " | ".join(line.strip() for line in lines if line.strip())[-600:]

    def _started(self, lines: list[str], *, text: str) -> bool:
        """The turn began: the CLI is busy, or the text is echoed and no longer in the draft
        (the input line, the last ready-like line, is empty again)."""
        first = text.strip().splitlines()[0][:40]
        shown = [line for line in lines if line.strip()]
        if any(re.search(self.profile.busy, line) for line in shown[-self.status_lines :]):
            return True
        echoed = any(first in line and re.search(self.profile.echo, line) for line in lines)
        return echoed and self.idle(lines)

    def _arrived(self, before: list[str], lines: list[str], *, text: str) -> bool:
        def markers(screen: list[str]) -> int:
            return sum(len(re.findall(self.profile.pasted, line)) for line in screen)

        if markers(lines) > markers(before):
            return True
        # Shown as text instead: in the input area at the bottom, however the TUI wrapped it.
        height = len(text) // max(1, self.width // 2) + text.count("\n") + self.status_lines + 2
        first = " ".join(text.split())[:40]
        return lines != before and first in " ".join(" ".join(lines[-height:]).split())

    async def _until(self, check: Callable[[list[str]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check(await self.screen()):
                return True
            await asyncio.sleep(self.poll)
        return False

    async def wait_done(self, timeout: float, *, stable: float = 1.0, over: Over | None = None) -> None:
        """Until the turn is over: idle and unchanged for ``stable`` s and, where the CLI's own
        record says when a turn ends (``over``), that record too (a TUI may look idle between a
        tool's result and the next model reply). Raises TimeoutError."""
        deadline, last, since, asked = time.monotonic() + timeout, None, time.monotonic(), 0.0
        while time.monotonic() < deadline:
            if not await self.alive():
                raise TuiError("the CLI exited during the turn (its tmux session is gone)")
            lines = await self.screen()
            if lines != last:
                last, since = lines, time.monotonic()
            elif self.idle(lines) and time.monotonic() - since >= stable and time.monotonic() - asked >= stable:
                if over is None or await over():
                    return
                asked = time.monotonic()
            await asyncio.sleep(self.poll)
        raise TimeoutError(f"the turn did not end within {timeout:g} s")

    async def answer(self, prompt: str) -> str:
        """The newest answer: answer blocks after the last echo of ``prompt`` and after the turn's
        last tool panel (text before a tool call is the agent's narration, not its answer, as a
        headless result event has only the last text), no tool panels."""
        lines = await self.screen(history=True)
        first = prompt.strip().splitlines()[0][:40]
        echoes = [i for i, line in enumerate(lines) if re.search(self.profile.echo, line) and first in line]
        if not echoes:
            raise TuiError("the submitted prompt is not on screen")
        blocks: list[str] = []
        inside = False  # within an answer block: its wrapped lines are indented
        for line in lines[echoes[-1] + 1 :]:
            if re.search(self.profile.ready, line):
                break
            if re.search(self.profile.tool_panel, line):
                blocks, inside = [], False
            elif re.search(self.profile.answer, line):
                blocks.append(re.sub(self.profile.answer, "", line).rstrip())
                inside = True
            elif inside and line.startswith("  ") and line.strip() and not re.search(self.profile.tool_panel, line):
                blocks[-1] += " " + line.strip()
            else:
                inside = False
        return "\n".join(blocks)

    async def turn(self, prompt: str, timeout: float, *, over: Over | None = None) -> str:
        await self.submit(prompt)
        await self.wait_done(timeout, over=over)
        return await self.answer(prompt)

    async def cancel(self, *, patience: float = 5.0) -> bool:
        """Interrupt the running turn: Escape, then C-c. Whether the pane is prompt-ready again;
        if not, it is killed (poisoned: never reused)."""
        for key in ("Escape", "C-c"):
            await self.tmux("send-keys", "-t", self.session, key, check=False)
            try:
                await self.wait_ready(patience)
                return True
            except TuiError:
                continue
        self.poisoned = True
        await self.kill()
        return False


__all__ = ["Over", "Run", "TmuxPane", "TuiError", "TuiProfile", "in_workspace"]
