"""The agent's tools, run host-side against the workspace: ``bash`` and ``str_replace_based_edit_tool``.

Everything runs through ``Workspace.exec`` AS THE TOOL'S USER (uid 1000 under the uid
wall): file reads are ``cat``, writes are ``cat >`` fed on stdin, never root-level
archive writes, so the wall holds for the edit tool exactly as for bash. The edit tool is
confined to the workdir: each path is resolved inside the container (``realpath -m``, as
the tool's user, so symlinks count) and refused when it leaves the workdir.

``call`` never raises for the agent's mistakes: an unknown tool or bad arguments come back
as ``(text, True)``. Bytes pass through unchanged (non-UTF-8, CRLF, no final newline).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

from engine.errors import WorkspaceError
from engine.interfaces import Workspace
from engine.util import shell
from envs.coding import editor

MAX_FILE_BYTES = 64 << 20
"""Largest file the edit tool reads whole."""

BASH_SPEC = {
    "name": "bash",
    "description": (
        "Run a bash command (bash -lc) in the repository directory and return its output "
        "(stdout, then stderr). Each call is a fresh shell; use && or ; to chain commands. "
        "A non-zero exit status is reported as [exit code N]; long output is truncated."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command to run."},
            "timeout": {"type": "number", "description": "Seconds before the command is killed."},
            "restart": {"type": "boolean", "description": "Accepted for compatibility; every call is a fresh shell."},
        },
        "required": [],
    },
}

EDIT_SPEC = {
    "name": "str_replace_based_edit_tool",
    "description": (
        "View, create and edit files in the repository. `view` shows a file with line numbers "
        "(or a directory two levels deep); `create` writes a file (replacing it); `str_replace` "
        "replaces exactly one occurrence of old_str with new_str; `insert` inserts text after "
        "line insert_line (0 = top of file). Paths are absolute or relative to the repository."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
            "path": {"type": "string"},
            "file_text": {"type": "string"},
            "old_str": {"type": "string"},
            "new_str": {"type": "string"},
            "insert_line": {"type": "integer"},
            "insert_text": {"type": "string"},
            "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        },
        "required": ["command", "path"],
    },
}

# One exec per edit-tool step (each costs ~0.1 s): sh/edit_step.sh resolves the path as the
# tool's user, refuses one outside the workdir, says what it is, and only then acts on it.
_HEADER_BYTES = 3 * 4096 + 16
"""Room for the "<root>\0<path>\0<kind>\0" header (two paths of at most PATH_MAX)."""


class ToolError(Exception):
    """The agent's mistake, returned as an error result (never raised past ``call``)."""


class CodingTools:
    def __init__(
        self,
        ws: Workspace,
        *,
        workdir: str,
        user: int,
        bash_timeout: float = 120.0,
        max_output_bytes: int = 32768,
        enabled: Sequence[str] | None = None,
        max_timeout: float | None = None,
    ) -> None:
        self.ws = ws
        self.workdir = workdir.rstrip("/") or "/"
        self.user = user
        self.bash_timeout = float(bash_timeout)
        self.max_output_bytes = int(max_output_bytes)
        self.max_timeout = float(max_timeout) if max_timeout else max(self.bash_timeout, 900.0)
        """Cap on a per-call ``timeout`` an agent may ask for."""
        known = {"bash": BASH_SPEC, "str_replace_based_edit_tool": EDIT_SPEC}
        names = list(enabled) if enabled is not None else list(known)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown coding tools {unknown}; known: {sorted(known)}")
        self._specs = [known[n] for n in names]

    def specs(self) -> list[dict]:
        return [dict(spec) for spec in self._specs]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[str, bool]:
        if name not in {s["name"] for s in self._specs}:
            return f"Error: unknown tool {name!r}; available: {[s['name'] for s in self._specs]}", True
        if not isinstance(arguments, dict):
            return "Error: arguments must be an object", True
        try:
            if name == "bash":
                return await self._bash(arguments)
            return editor.display(await self._edit(arguments)), False
        except ToolError as exc:
            return editor.display(f"Error: {exc}"), True
        except WorkspaceError as exc:
            return f"Error: the workspace failed to run the tool: {exc}", True

    # ------------------------------------------------------------------ bash
    async def _bash(self, args: dict[str, Any]) -> tuple[str, bool]:
        command = args.get("command")
        if args.get("restart") and command is None:
            return "tool has been restarted (every call already runs in a fresh shell)", False
        if not isinstance(command, str) or not command.strip():
            raise ToolError("bash needs a non-empty string `command`")
        timeout = self._timeout(args.get("timeout"))
        result = await self.ws.exec(
            ["bash", "-lc", command],
            user=self.user,
            cwd=self.workdir,
            timeout=timeout,
            max_output=self.max_output_bytes,
        )
        text = result.text()
        if result.truncated:
            total = result.stdout_bytes_total + result.stderr_bytes_total
            text += f"\n[output truncated: {total} bytes in all, the middle was dropped]"
        if result.timed_out:
            return _join(text, f"[command timed out after {timeout:g} s and was killed]"), True
        if result.exit_code != 0:
            return _join(text, f"[exit code {result.exit_code}]"), True
        return text, False

    def _timeout(self, value: Any) -> float:
        if value is None:
            return self.bash_timeout
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ToolError(f"`timeout` must be a positive number of seconds, got {value!r}")
        return min(float(value), self.max_timeout)

    # ------------------------------------------------------------------ edit
    async def _edit(self, args: dict[str, Any]) -> str:
        command, raw_path = args.get("command"), args.get("path")
        if not isinstance(raw_path, str) or not raw_path:
            raise ToolError("`path` must be a non-empty string")
        wanted = raw_path if raw_path.startswith("/") else posixpath.join(self.workdir, raw_path)
        if command == "view":
            return await self._view(raw_path, wanted, args.get("view_range"))
        if command == "create":
            file_text = _str_arg(args, "file_text")
            path = await self._write(raw_path, wanted, editor.encode(file_text))
            return f"File created successfully at: {path}"
        if command == "str_replace":
            old, new = _str_arg(args, "old_str"), args.get("new_str", "")
            if not isinstance(new, str):
                raise ToolError("`new_str` must be a string")
            path, content = await self._read_text(raw_path, wanted)
            try:
                updated, line = editor.replace_once(content, old, new)
            except ValueError as exc:
                raise ToolError(f"{exc} in {path}") from exc
            await self._write(raw_path, path, editor.encode(updated))
            return editor.edited_message(path, updated, line, new.count("\n") + 1)
        if command == "insert":
            text = args.get("insert_text", args.get("new_str"))
            if not isinstance(text, str):
                raise ToolError("insert needs `insert_text` (or `new_str`), a string")
            path, content = await self._read_text(raw_path, wanted)
            try:
                updated = editor.insert_after(content, args.get("insert_line"), text)
            except ValueError as exc:
                raise ToolError(str(exc)) from exc
            await self._write(raw_path, path, editor.encode(updated))
            return editor.edited_message(path, updated, int(args["insert_line"]) + 1, text.count("\n") + 1)
        raise ToolError(f"unknown command {command!r}; use view, create, str_replace or insert")

    async def _view(self, raw_path: str, wanted: str, view_range: Any) -> str:
        path, kind, body = await self._step("view", raw_path, wanted)
        if kind == "dir":
            if view_range is not None:
                raise ToolError("`view_range` is not allowed when `path` is a directory")
            listing = _bounded(body.decode("utf-8", "replace"), self.max_output_bytes)
            return (
                f"Here are the files and directories up to 2 levels deep in {path}, excluding hidden items:\n{listing}"
            )
        content = self._file_text(path, kind, body)
        try:
            numbered = editor.numbered(content, view_range)
        except ValueError as exc:
            raise ToolError(str(exc)) from exc
        return f"Here's the result of running `cat -n` on {path}:\n" + _bounded(numbered, self.max_output_bytes)

    # ------------------------------------------------------------------ I/O as the tool's user
    async def _step(self, action: str, raw_path: str, wanted: str, data: bytes | None = None) -> tuple[str, str, bytes]:
        """Run one sh/edit_step.sh as the tool's user: (the path resolved in the container, what it is,
        what the step printed after the header). Refused when the path leaves the workdir."""
        step = shell.script(__file__, "edit_step.sh")
        result = await self.ws.exec(
            ["bash", "-c", step, "edit", action, self.workdir, wanted, str(MAX_FILE_BYTES)],
            user=self.user,
            cwd=self.workdir,
            timeout=self.bash_timeout,
            stdin=data,
            max_output=2 * (MAX_FILE_BYTES + _HEADER_BYTES),
        )
        fields = result.stdout.split(b"\0", 3)
        if len(fields) != 4:
            raise ToolError(f"cannot resolve {raw_path!r}: {result.text().strip()}")
        root, resolved, kind = (f.decode("utf-8", "surrogateescape") for f in fields[:3])
        if kind == "outside" or (resolved != root and not resolved.startswith(root.rstrip("/") + "/")):
            raise ToolError(f"{raw_path!r} resolves to {resolved!r}, outside the repository {self.workdir}; refused")
        if result.exit_code != 0:
            verb = "write" if action == "write" else "read"
            raise ToolError(f"cannot {verb} {resolved}: {result.stderr.decode('utf-8', 'replace').strip()}")
        return resolved, kind, fields[3]

    async def _read_text(self, raw_path: str, wanted: str) -> tuple[str, str]:
        path, kind, body = await self._step("read", raw_path, wanted)
        return path, self._file_text(path, kind, body)

    @staticmethod
    def _file_text(path: str, kind: str, body: bytes) -> str:
        if kind == "missing":
            raise ToolError(f"the path {path} does not exist")
        if kind != "file":
            raise ToolError(f"the path {path} is a {'directory' if kind == 'dir' else 'special file'}, not a file")
        if len(body) > MAX_FILE_BYTES:
            raise ToolError(f"{path} is larger than {MAX_FILE_BYTES} bytes; use bash to inspect it")
        return editor.decode(body)

    async def _write(self, raw_path: str, wanted: str, data: bytes) -> str:
        path, kind, _ = await self._step("write", raw_path, wanted, data)
        if kind == "dir":
            raise ToolError(f"the path {path} is a directory")
        return path


def _str_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"`{key}` is required and must be a string")
    return value


def _join(text: str, note: str) -> str:
    return f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}{note}"


def _bounded(text: str, limit: int) -> str:
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", "ignore")
    return head + f"\n[output truncated at {limit} of {len(data)} bytes; use view_range to see the rest]"
