"""The run script's own edit of the test files, made in its place by root under crucible-strict.

22 of NodeBB's official run scripts rewrite every test file before mocha runs::

    find test/ -type f -regextype posix-extended -regex '.*\\.(ts|js|tsx|jsx)$' -print0 \\
    | while IFS= read -r -d '' file; do
        sed -i -E "s#(describe[[:space:]]*\\(\\s*)(['\\"\\`])(.*?)\\2#\\1\\2${file}::\\3\\2#g" "$file"
      done

Each describe title gets the path of the file it is written in, and the instance's parser takes
it out again to name the test by that file (a describe in a helper a test file requires is named
by the helper). Under strict the hidden test files are root's and read-only, so the tests' uid
cannot make that edit, and under ``set -e`` the script ends at the first locked file: a correct
patch scored 0.

Here such a loop is recognised in the script's text (``loop``), as words, never as shell to run.
sh/replay.sh, after the lock and before run_script.sh, runs that ``find`` as root and makes the
same ``sed`` edit, with the same arguments (and ``--sandbox``), to each file it lists that the
lock names itself (never one below a directory the lock names: the patch chose that name, and it
goes into sed's script, where ``#e;#`` in it would be a command run by root); it records each
argument list and puts a root-owned ``sed`` (sh/sed_wrap.sh) first on run_script.sh's PATH that
answers exactly a recorded argument list with success and no write (root made that edit
already) and runs the real sed for anything else. So a locked file gets the run script's edit
exactly once, before any process of the tests' uid starts; the script's own loop edits the files
it can write as it always did; the tested code can ask for the recorded edit again and gets a
no-op, and any other edit of a locked file is refused as before.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from engine.util import shell

FILE = "@@crucible-file@@"
"""Stands for the loop's variable (the file find listed) in the sed words; sh/replay.sh puts
each file's path there."""

_GAP = r"(?:[ \t]|\\\n)"
_BLANKS = r"(?:\\\n)*[ \t](?:[ \t]|\\\n)*"
"""Blanks between two words: a space or tab, with any backslash-newlines (bash removes those
before reading words, so one alone joins the words on either side)."""
_WORDS = r"""(?:'[^']*'|"(?:[^"\\]|\\[\s\S])*"|\\[\s\S]|[^\n|;&<>'"\\])*?"""
"""Shell words up to the first unquoted operator (``|``, ``;``, ...) or newline; a quoted newline
or a backslash-newline does not end them."""
_LOOP = re.compile(
    rf"(?<![\w/.-])find{_BLANKS}(?P<find>{_WORDS}){_BLANKS}-print0{_GAP}*\|\s*"
    r"while[ \t]+IFS=[ \t]+read[ \t]+-r[ \t]+-d[ \t]+''[ \t]+(?P<var>[A-Za-z_]\w*)[ \t]*;[ \t]*do\s+"
    rf"sed{_BLANKS}(?P<sed>{_WORDS}){_BLANKS}\"\$(?:\{{(?P=var)\}}|(?P=var))\"{_GAP}*(?:;|\n)\s*done\b"
)
_ACTIONS = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls", "-files0-from"}
)
"""find's words that do more than list files: root never runs them (NodeBB's loops have none)."""
_NAME = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass(frozen=True)
class Loop:
    """One ``find ... -print0 | while IFS= read -r -d '' VAR; do sed ... "$VAR"; done``."""

    find: tuple[str, ...]
    """find's words before ``-print0``, as bash would pass them."""
    sed: tuple[str, ...]
    """sed's words before the file, ``FILE`` where the script names the loop's variable."""


def loop(run_script: bytes) -> Loop | None:
    """The script's one test-file edit loop whose every word is plain text (quotes and escapes,
    the loop's variable, nothing else to expand), and whose sed edits in place; None where there
    is none, more than one, or one whose words need a shell (then nothing changes: the lock
    refuses the edit as before)."""
    text = run_script.decode("utf-8", "replace")
    found = [m for m in _LOOP.finditer(text) if not _commented(text, m.start())]
    if len(found) != 1:
        return None
    match = found[0]
    var = match.group("var")
    find, sed = words(match.group("find"), var), words(match.group("sed"), var)
    if not find or not sed or any(FILE in w or w in _ACTIONS for w in find) or not any(_in_place(w) for w in sed):
        return None
    return Loop(tuple(find), tuple(sed))


def _commented(text: str, at: int) -> bool:
    """Whether ``at`` lies in a comment or a quoted string as bash reads the script up to there
    (a ``#`` that starts a word, outside quotes, to the end of its line; backslash escapes;
    here-documents are not read as such)."""
    quote, i = "", 0
    while i < at:
        c = text[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 1
        elif quote:
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;|&()<>"):
            end = text.find("\n", i)
            if end < 0 or end >= at:
                return True
            i = end
        i += 1
    return bool(quote)


def _in_place(word: str) -> bool:
    return (
        word == "--in-place"
        or word.startswith("--in-place=")
        or (word.startswith("-") and not word.startswith("--") and "i" in word[1:])
    )


def words(text: str, var: str) -> list[str] | None:  # noqa: C901 (a tokenizer's states)
    """``text`` split as bash splits a simple command's words, with ``$var``/``${var}`` as
    ``FILE`` (inside double quotes, where it is one word); None where a word needs more than
    quote removal (another expansion, a glob, a newline or ``FILE`` itself)."""
    if FILE in text:
        return None
    found: list[str] = []
    word: list[str] | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and text[i + 1 : i + 2] == "\n":  # removed before words are read: joins or separates
            i += 2
            continue
        if c in " \t":
            if word is not None:
                found.append("".join(word))
                word = None
            i += 1
            continue
        word = [] if word is None else word
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                return None
            word.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
                    word.append(text[i + 1] if text[i + 1] != "\n" else "")  # bash drops a backslash-newline
                    i += 2
                elif text[i] == "$" and text[i + 1 : i + 2] in ('"', " ", "\t"):
                    word.append("$")  # no expansion follows: bash keeps it
                    i += 1
                elif text[i] == "$":
                    named = _NAME.match(text, i)
                    if named is None or (named.group(1) or named.group(2)) != var:
                        return None
                    word.append(FILE)
                    i = named.end()
                elif text[i] == "`":
                    return None
                else:
                    word.append(text[i])
                    i += 1
            if i >= len(text):
                return None
            i += 1
        elif c == "\\" and i + 1 < len(text):
            word.append(text[i + 1])
            i += 2
        elif c == "$" and text[i + 1 : i + 2] in ("", " ", "\t"):
            word.append(c)
            i += 1
        elif c in "$`*?[~{}()" or c == "\n":
            return None
        else:
            word.append(c)
            i += 1
    if word is not None:
        found.append("".join(word))
    return None if any("\n" in w or "\x00" in w for w in found) else found


_RM = re.compile(
    r"^[ \t]*rm((?:[ \t]+-[A-Za-z]+)*)((?:[ \t]+[\w.*?/-]+)+?)"
    r"(?:[ \t]+2>[ \t]*/dev/null)?(?:[ \t]*\|\|[ \t]*true)?[ \t]*$",
    re.M,
)


@dataclass(frozen=True)
class Removal:
    """One ``rm`` line of the run script: its paths (globs, relative) and whether it recurses."""

    paths: tuple[str, ...]
    recursive: bool
    line: int
    """Its line's index in the script (0 the first): it removes before a runner only on an earlier line."""


def removals(run_script: bytes) -> list[Removal]:
    """The run script's plain ``rm`` lines (options, relative paths or globs of word characters,
    ``.``, ``-`` and ``/``, optionally ``2>/dev/null`` and ``|| true``): NodeBB's remove
    ``test/activitypub*``, ``test/file.js`` and ``test/utils.js`` before mocha runs."""
    found, text = [], run_script.decode("utf-8", "replace")
    for match in _RM.finditer(text):
        paths = tuple(match.group(2).split())
        if any(p.startswith("/") or ".." in p.split("/") for p in paths):
            continue
        options = "".join(match.group(1).split()).replace("-", "")
        found.append(Removal(paths, "r" in options or "R" in options, text.count("\n", 0, match.start())))
    return found


def removed(found: list[Removal], rel: str) -> bool:
    """Whether one of ``found`` removes the file ``rel`` (relative to the workdir): a path that
    matches it as bash's glob would (one component per component, ``*`` not crossing ``/`` nor
    matching a leading ``.``), or, recursing, one of its directories."""
    parts = rel.split("/")
    for removal in found:
        for path in removal.paths:
            globs = path.rstrip("/").split("/")
            if len(globs) > len(parts) or (len(globs) < len(parts) and not removal.recursive):
                continue
            if all(
                fnmatch.fnmatchcase(part, glob) and not (part.startswith(".") and not glob.startswith("."))
                for part, glob in zip(parts, globs)
            ):
                return True
    return False


def args(found: Loop | None) -> list[str]:
    """sh/replay.sh's arguments for it: find's words and sed's, each newline-joined ("" for none)."""
    if found is None:
        return ["", ""]
    return ["\n".join(found.find), "\n".join(found.sed)]


def wrap_program() -> str:
    """The ``sed`` first on run_script.sh's PATH (sh/sed_wrap.sh, its comments left out)."""
    return "#!/bin/bash\n" + shell.script(__file__, "exec_next.sh") + shell.script(__file__, "sed_wrap.sh")


def shown(found: Loop | None, work: str) -> str:
    """What the recorded ``edit`` step shows as its command."""
    if found is None:
        return ""
    return (
        f"as root, for each file FILE the lock names itself of `find {' '.join(found.find)} -print0`: "
        f"sed --sandbox {' '.join(found.sed).replace(FILE, 'FILE')} FILE (run_script.sh's own edit, made once; "
        f"{work}/sed-wrap/sed first on its PATH answers exactly that call with no write)"
    )
