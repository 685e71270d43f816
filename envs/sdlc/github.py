"""The mock GitHub: issues, comments and pull requests over the run's mock remote.

Host-side and per run: the state lives in this object, beside the workspace, never in it,
so the agent reaches it only through the ``github_*`` tools. Every call is recorded in
``transcript`` (tool, arguments, result, error flag, time) in the order it was made; the
flavor stores it with the grade. Results are JSON, and errors look like GitHub's REST API's
(``{"message": "Not Found", "status": "404"}``, ``422 Validation Failed`` with ``errors``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from envs.sdlc.remote import Remote
from envs.sdlc.schema import IssueConfig

OPENED_AT = "2024-01-01T00:00:00Z"
"""When the task's issues were opened (fixed: the same task shows the same issues)."""
DOCS = "https://docs.github.com/rest"


class GitHubError(Exception):
    """An error result, shaped like GitHub's REST API error bodies."""

    def __init__(self, status: int, message: str, errors: list[dict] | None = None) -> None:
        super().__init__(message)
        self.body: dict[str, Any] = {"message": message, "documentation_url": DOCS, "status": str(status)}
        if errors:
            self.body["errors"] = errors


def not_found() -> GitHubError:
    return GitHubError(404, "Not Found")


def invalid(resource: str, field_: str, message: str, code: str = "invalid") -> GitHubError:
    return GitHubError(
        422, "Validation Failed", [{"resource": resource, "field": field_, "code": code, "message": message}]
    )


@dataclass
class Comment:
    id: int
    user: str
    body: str
    created_at: str


@dataclass
class Issue:
    number: int
    title: str
    body: str
    user: str
    labels: list[str]
    state: str = "open"
    comments: list[Comment] = field(default_factory=list)
    created_at: str = OPENED_AT


@dataclass
class PullRequest:
    number: int
    title: str
    body: str
    head: str
    base: str
    user: str = "agent"
    state: str = "open"
    comments: list[Comment] = field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _schema(props: dict[str, dict], required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


NUMBER = {"type": "integer", "description": "the issue's or pull request's number"}
TEXT = {"type": "string"}
STATE = {"type": "string", "enum": ["open", "closed", "all"], "description": "default open"}

SPECS: list[dict] = [
    {
        "name": "github_list_issues",
        "description": "List the repository's issues (not pull requests).",
        "inputSchema": _schema({"state": STATE}, []),
    },
    {
        "name": "github_get_issue",
        "description": "One issue with its comments.",
        "inputSchema": _schema({"number": NUMBER}, ["number"]),
    },
    {
        "name": "github_comment_issue",
        "description": "Add a comment to an issue.",
        "inputSchema": _schema({"number": NUMBER, "body": TEXT}, ["number", "body"]),
    },
    {
        "name": "github_close_issue",
        "description": "Close an issue.",
        "inputSchema": _schema({"number": NUMBER}, ["number"]),
    },
    {
        "name": "github_create_pull_request",
        "description": "Open a pull request from a branch you pushed to origin (git push origin BRANCH) into base.",
        "inputSchema": _schema(
            {
                "title": TEXT,
                "body": TEXT,
                "head": {"type": "string", "description": "the pushed branch"},
                "base": {"type": "string", "description": "default main"},
            },
            ["title", "head"],
        ),
    },
    {
        "name": "github_list_pull_requests",
        "description": "List pull requests.",
        "inputSchema": _schema({"state": STATE}, []),
    },
    {
        "name": "github_get_pull_request",
        "description": "One pull request, with its head commit and comments.",
        "inputSchema": _schema({"number": NUMBER}, ["number"]),
    },
    {
        "name": "github_comment_pull_request",
        "description": "Add a comment to a pull request.",
        "inputSchema": _schema({"number": NUMBER, "body": TEXT}, ["number", "body"]),
    },
    {
        "name": "github_update_pull_request",
        "description": "Change a pull request's title, body or state.",
        "inputSchema": _schema(
            {"number": NUMBER, "title": TEXT, "body": TEXT, "state": {"type": "string", "enum": ["open", "closed"]}},
            ["number"],
        ),
    },
    {
        "name": "github_list_branches",
        "description": "The branches origin holds, with their head commits.",
        "inputSchema": _schema({}, []),
    },
    {
        "name": "github_get_file",
        "description": "A file's content at a ref (branch or commit) of origin.",
        "inputSchema": _schema({"path": TEXT, "ref": {"type": "string", "description": "default main"}}, ["path"]),
    },
    {
        "name": "github_get_pull_request_diff",
        "description": "A pull request's diff (base...head).",
        "inputSchema": _schema({"number": NUMBER}, ["number"]),
    },
]
NAMES = frozenset(s["name"] for s in SPECS)


class MockGitHub:
    """One run's mock GitHub over ``remote`` (None until the run's remote exists)."""

    def __init__(self, issues: list[IssueConfig], remote: Remote | None = None) -> None:
        self.remote = remote
        self.issues = {
            i.number: Issue(
                i.number,
                i.title,
                i.body,
                i.author,
                list(i.labels),
                comments=[Comment(n + 1, c.author, c.body, OPENED_AT) for n, c in enumerate(i.comments)],
            )
            for i in issues
        }
        self.pulls: dict[int, PullRequest] = {}
        self.transcript: list[dict] = []
        self._next_comment = 1000
        self._handlers: dict[str, Callable[[dict], Awaitable[Any]]] = {
            name: getattr(self, "_" + name.removeprefix("github_")) for name in NAMES
        }

    async def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        """Run one ``github_*`` call and record it: (JSON text, is_error)."""
        at = _now()
        try:
            if self.remote is None:
                raise GitHubError(503, "Service Unavailable")
            result: Any = await self._handlers[name](arguments)
            text, is_error = (result if isinstance(result, str) else json.dumps(result, indent=1)), False
        except GitHubError as exc:
            text, is_error = json.dumps(exc.body), True
        except (KeyError, TypeError, ValueError) as exc:
            text = json.dumps(invalid("Request", "arguments", f"bad arguments: {exc}").body)
            is_error = True
        self.transcript.append(
            {
                "seq": len(self.transcript),
                "tool": name,
                "arguments": json.loads(json.dumps(arguments)),
                "result": text[:4000],
                "is_error": is_error,
                "at": at,
            }
        )
        return text, is_error

    def latest_open_pull(self) -> PullRequest | None:
        open_ = [p for p in self.pulls.values() if p.state == "open"]
        return max(open_, key=lambda p: p.number) if open_ else None

    # ------------------------------------------------------------ issues
    def _issue(self, arguments: dict) -> Issue:
        issue = self.issues.get(_int(arguments, "number"))
        if issue is None:
            raise not_found()
        return issue

    async def _list_issues(self, arguments: dict) -> list[dict]:
        state = _state(arguments)
        return [
            _issue_view(i, brief=True)
            for i in sorted(self.issues.values(), key=lambda i: i.number)
            if state in ("all", i.state)
        ]

    async def _get_issue(self, arguments: dict) -> dict:
        return _issue_view(self._issue(arguments))

    async def _comment_issue(self, arguments: dict) -> dict:
        return self._comment(self._issue(arguments).comments, arguments)

    async def _close_issue(self, arguments: dict) -> dict:
        issue = self._issue(arguments)
        issue.state = "closed"
        return _issue_view(issue, brief=True)

    def _comment(self, thread: list[Comment], arguments: dict) -> dict:
        body = _text(arguments, "body")
        if not body.strip():
            raise invalid("IssueComment", "body", "body cannot be blank", "missing_field")
        self._next_comment += 1
        comment = Comment(self._next_comment, "agent", body, _now())
        thread.append(comment)
        return asdict(comment)

    # ------------------------------------------------------------ pull requests
    def _pull(self, arguments: dict) -> PullRequest:
        pull = self.pulls.get(_int(arguments, "number"))
        if pull is None:
            raise not_found()
        return pull

    async def _create_pull_request(self, arguments: dict) -> dict:
        assert self.remote is not None
        head, base = _text(arguments, "head"), str(arguments.get("base") or "main")
        head = head.split(":", 1)[-1]  # "owner:branch" as GitHub takes it
        branches = await asyncio.to_thread(self.remote.branches)
        if head not in branches:
            raise invalid(
                "PullRequest",
                "head",
                f"head branch {head!r} does not exist on the remote (push it first: git push origin HEAD:BRANCH)",
            )
        if base not in branches:
            raise invalid("PullRequest", "base", f"base branch {base!r} does not exist")
        if head == base or branches[head] == branches[base]:
            raise invalid("PullRequest", "head", f"No commits between {base} and {head}", "custom")
        if any(p.head == head and p.base == base and p.state == "open" for p in self.pulls.values()):
            raise invalid("PullRequest", "head", f"A pull request already exists for {head}.", "custom")
        number = max([0, *self.issues, *self.pulls]) + 1
        now = _now()
        pull = PullRequest(
            number,
            _text(arguments, "title", required=False),
            _text(arguments, "body", required=False),
            head,
            base,
            created_at=now,
            updated_at=now,
        )
        self.pulls[number] = pull
        return await self._pull_view(pull)

    async def _list_pull_requests(self, arguments: dict) -> list[dict]:
        state = _state(arguments)
        return [
            await self._pull_view(p, brief=True)
            for p in sorted(self.pulls.values(), key=lambda p: p.number)
            if state in ("all", p.state)
        ]

    async def _get_pull_request(self, arguments: dict) -> dict:
        return await self._pull_view(self._pull(arguments))

    async def _comment_pull_request(self, arguments: dict) -> dict:
        return self._comment(self._pull(arguments).comments, arguments)

    async def _update_pull_request(self, arguments: dict) -> dict:
        pull = self._pull(arguments)
        state = arguments.get("state")
        if state is not None and state not in ("open", "closed"):
            raise invalid("PullRequest", "state", "state must be open or closed")
        for key in ("title", "body"):
            if key in arguments:
                setattr(pull, key, _text(arguments, key, required=False))
        if state is not None:
            pull.state = state
        pull.updated_at = _now()
        return await self._pull_view(pull)

    async def _get_pull_request_diff(self, arguments: dict) -> str:
        assert self.remote is not None
        pull = self._pull(arguments)
        remote = self.remote
        head, base = remote.head_of(pull.head), remote.head_of(pull.base)
        if head is None or base is None:
            raise invalid("PullRequest", "head", "the pull request's branch no longer exists", "missing")
        since = remote.merge_base(base, head) or base
        return (await asyncio.to_thread(remote.diff, since, head)).decode("utf-8", "replace")

    async def _pull_view(self, pull: PullRequest, *, brief: bool = False) -> dict:
        assert self.remote is not None
        view = asdict(pull)
        view["head"] = {"ref": pull.head, "sha": await asyncio.to_thread(self.remote.head_of, pull.head)}
        view["base"] = {"ref": pull.base}
        if brief:
            view.pop("comments")
            view.pop("body")
        return view

    # ------------------------------------------------------------ the repository
    async def _list_branches(self, arguments: dict) -> list[dict]:
        assert self.remote is not None
        branches = await asyncio.to_thread(self.remote.branches)
        return [
            {"name": name, "commit": {"sha": sha}, "protected": name == "main"}
            for name, sha in sorted(branches.items())
        ]

    async def _get_file(self, arguments: dict) -> str:
        assert self.remote is not None
        path, ref = _text(arguments, "path").strip("/"), str(arguments.get("ref") or "main")
        data = await asyncio.to_thread(self.remote.read_file, ref, path)
        if data is None:
            raise not_found()
        return data.decode("utf-8", "replace")


def _int(arguments: dict, key: str) -> int:
    value = arguments[key]
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().lstrip("#").isdigit():
        raise ValueError(f"{key} must be a number, got {value!r}")
    return int(str(value).strip().lstrip("#"))


def _text(arguments: dict, key: str, *, required: bool = True) -> str:
    value = arguments.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _state(arguments: dict) -> str:
    state = arguments.get("state") or "open"
    if state not in ("open", "closed", "all"):
        raise ValueError("state must be open, closed or all")
    return str(state)


def _issue_view(issue: Issue, *, brief: bool = False) -> dict:
    view = asdict(issue)
    view["labels"] = [{"name": label} for label in issue.labels]
    if brief:
        view["comments"] = len(issue.comments)
        view.pop("body")
    return view
