"""What root does and reads back under crucible-strict (sh/replay.sh): it edits only the files the
lock names, with plain names and a sandboxed sed, and reads back what git wrote for the patch as
git applied it, whatever the patch text, its names, attributes or filters say."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from envs.integrity import patch as patch_module
from envs.integrity.scan import scanner
from swe_tasks import edits, replay, strict


def _replay_functions(*names: str) -> str:
    """sh/replay.sh's shell functions ``names``, as it defines them (to run one here alone)."""
    text = (Path(edits.__file__).parent / "sh" / "replay.sh").read_text()
    found = []
    for name in names:
        start = text.index(f"\n{name}() {{") + 1
        first_line = text[start : text.index("\n", start) + 1]
        found.append(first_line if first_line.rstrip().endswith("}") else text[start : text.index("\n}\n", start) + 3])
    return "".join(found)


def test_root_edits_only_the_files_the_lock_names_with_plain_names_and_a_sandboxed_sed(tmp_path):
    """sh/replay.sh's lock and edit_locked, run here as root on a tree of its own: a file the
    lock names itself gets the edit; one below a directory the lock names (its name the patch's
    choice, ``#e;#`` in it a command for sed to run) is never edited by root; a name the lock
    names with a character outside the plain set is refused; a sed script that would run a
    command is refused by --sandbox; a file reached through a directory that leads out of the
    tree (a symlink) is neither locked nor edited."""
    if os.geteuid() != 0:
        pytest.skip("edit_locked chowns files: run as root")
    tree = tmp_path / "tree"
    tests, alike, outside = tree / "test", tree / "test" / "a.jsx", tmp_path / "outside"
    alike.mkdir(parents=True)
    outside.mkdir()
    (tests / "a.js").write_text("describe('a', () => {});\n")
    (tests / "odd name.js").write_text("describe('o', () => {});\n")
    (alike / "x#e;#.js").write_text("touch pwned # describe('x')\n")
    (outside / "h.js").write_text("describe('h', () => {});\n")
    (tests / "link").symlink_to(outside)
    for f in (tests / "a.js", tests / "odd name.js", alike / "x#e;#.js"):
        f.chmod(0o444)
    os.chown(outside / "h.js", 1000, 1000)
    work = tmp_path / "work"
    work.mkdir()

    def edit(sed_words: list[str]) -> subprocess.CompletedProcess:
        program = (
            _replay_functions("now_us", "through_symlink", "lock_one", "lock_tree", "lock_hidden", "edit_locked")
            + "lock_hidden > /dev/null\nedit_locked\n"
        )
        env = {
            "PATH": os.environ["PATH"],
            "WORK": str(work),
            "EDIT_FIND": "test/\n-type\nf",
            "EDIT_SED": "\n".join(sed_words),
            "SED_WRAP": "#!/bin/bash\n",
            "LOCK": "test/a.js\ntest/a.jsx\ntest/odd name.js\ntest/link/h.js",
        }
        return subprocess.run(
            ["bash", "-c", f"export LOCK EDIT_FIND EDIT_SED SED_WRAP WORK\n{program}"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
        )

    done = edit(["-i", "-E", f"s#(describe\\()'#\\1'{edits.FILE}::#"])
    header, _, listed = done.stdout.partition("\n")
    assert header.startswith("@@crucible-step edit 1 0 "), done.stdout + done.stderr
    assert sorted(line.split(":")[0] for line in listed.splitlines()) == ["test/a.js", "test/odd name.js"]
    assert "test/odd name.js: not edited, a character outside" in listed
    assert (tests / "a.js").read_text() == "describe('test/a.js::a', () => {});\n"
    assert (alike / "x#e;#.js").read_text() == "touch pwned # describe('x')\n"  # not root's to edit
    assert not (tree / "pwned").exists()
    assert (outside / "h.js").read_text() == "describe('h', () => {});\n"  # through a symlinked directory
    assert (os.stat(outside / "h.js").st_uid, os.stat(outside / "h.js").st_mode & 0o777) == (1000, 0o644)  # nor locked
    assert shlex.split((work / "sed-wrap" / "sed-edits").read_text()) == [
        "-i",
        "-E",
        "s#(describe\\()'#\\1'test/a.js::#",
        "test/a.js",
    ]  # recorded without --sandbox
    (tests / "a.js").write_text("echo pwned > pwned # describe('a')\n")
    refused = edit(["-i", "-E", f"s#(describe\\()'#\\1'{edits.FILE}::#e"])
    assert (
        "test/a.js: sed: -e expression #1" in refused.stdout
        and "e/r/w commands disabled in sandbox mode" in refused.stdout
    )
    assert not (tree / "pwned").exists()


def _written(repo: Path, patch: str, work: Path) -> tuple[dict, list[str]]:
    """sh/replay.sh's read_written run here after `git apply` of ``patch`` in ``repo``: its record
    (exit code, output: git's own diff) and WRITTEN."""
    work.mkdir(exist_ok=True)
    (work / "patch.diff").write_text(patch)
    subprocess.run(["git", "-C", str(repo), "apply", str(work / "patch.diff")], check=True, capture_output=True)
    base = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    program = (
        _replay_functions("now_us", "through_symlink", "written_index", "read_written")
        + 'read_written\nprintf \'%s\\0\' "${WRITTEN[@]}" > "$WORK/written-list"\n'
    )
    done = subprocess.run(
        ["bash", "-c", f"export WORK BASE\n{program}"],
        cwd=repo,
        capture_output=True,
        env={"PATH": os.environ["PATH"], "WORK": str(work), "BASE": base},
    )
    records, _ = replay.parse_records(done.stdout)
    return records["written"], (work / "written-list").read_bytes().decode().split("\0")[:-1]


def _repo(root: Path, files: dict[str, str]) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return repo


def test_what_git_wrote_is_read_back_as_git_applied_it_whatever_the_patch_text_says(tmp_path):
    """A patch passed on verbatim (a prediction) can say one thing and make git write another:
    a header naming `x/test/a.js` (git strips any first component: it writes test/a.js), names
    swapped between a chunk's `diff --git` line and its `---`/`+++` lines (git goes by the
    latter), a hunk whose line numbers are off (git applies it at an offset), a plain hunk after
    a git one. The scan and the trust read git's own diff of what it wrote (the `written` step),
    so each is read as git applied it: the swapped module's test-aware line is found at its line,
    and the rewritten test file counts as touched, so it is not trusted."""
    base_mod = "def f():\n    return 1\n"
    repo = _repo(
        tmp_path, {"src/mod.py": base_mod, "tests/test_a.py": "def test_a():\n    pass\n", "test/a.js": "test/a.js\n"}
    )
    aware = "import sys; sys.modules['_pytest'] = None\n"
    swapped = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/src/mod.py\n+++ b/src/mod.py\n"
        f"@@ -50,2 +50,3 @@\n+{aware} def f():\n     return 1\n"
        "diff --git a/src/mod.py b/src/mod.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"
        "@@ -1,2 +1,3 @@\n def test_a():\n     pass\n+# more\n"
    )
    prefixed = (
        'diff --git "x/test/a.js" "x/test/a.js"\n--- "x/test/a.js"\n+++ "x/test/a.js"\n'
        "@@ -1 +1 @@\n-test/a.js\n+forged\n"
    )
    record, written = _written(repo, swapped + prefixed, tmp_path / "work")
    assert record["exit_code"] == 0, record
    assert sorted(written) == ["src/mod.py", "test/a.js", "tests/test_a.py"]
    diff = record["output"]
    patterns = ["tests/", "test/"]
    assert (
        scanner.scan(
            strict.patch_bytes(swapped + prefixed), {"src/mod.py": (repo / "src/mod.py").read_bytes()}, patterns
        )
        == []
    )  # the patch's own text: the line is the test's, at line 50
    found = scanner.scan(strict.patch_bytes(diff), {"src/mod.py": (repo / "src/mod.py").read_bytes()}, patterns)
    assert [(f.path, f.line) for f in found] and {f.path for f in found} == {"src/mod.py"}
    assert {f.line for f in found} == {1}
    raw = {"written": record}
    assert strict.written_diff(raw, "the patch") == diff and strict.written_diff({}, "the patch") == "the patch"
    task = SimpleNamespace(
        workdir="/app",
        before_repo_set_cmd="",
        selected_test_files_to_run=["test/a.js"],
        fail_to_pass=["test/a.js | a"],
        pass_to_pass=[],
    )
    assert strict.trusted_test_files(task, prefixed, {"test/a.js"}) == ["/app/test/a.js"]  # the patch's text alone
    assert strict.trusted_test_files(task, prefixed, {"test/a.js"}, diff) == []  # what git wrote


def test_what_git_wrote_is_read_from_real_diffs_of_every_shape_and_never_names_git_s_own_files(tmp_path):
    """Real diffs made by git (new, changed, deleted, renamed, mode-changed files, a symlink, a new
    directory, names with spaces, quotes, a tab, non-ASCII) are read back path for path; a patch
    that makes git write `.git/...`'s name at the top (`config`) never has `.git` in WRITTEN."""
    names = ["a.py", "old name.py", "gone.txt", "run.sh", "d\u00e9j\u00e0/vu.py", 'q"uote.txt', "t\tab.txt"]
    repo = _repo(tmp_path, {name: f"{name}\n" * 20 for name in names})
    scratch = tmp_path / "scratch"
    subprocess.run(["git", "clone", "-q", str(repo), str(scratch)], check=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(scratch), *args], check=True, capture_output=True, text=True).stdout

    (scratch / "a.py").write_text("changed\n")
    git("mv", "old name.py", "new name.py")
    (scratch / "gone.txt").unlink()
    (scratch / "run.sh").chmod(0o755)
    (scratch / "link").symlink_to("a.py")
    (scratch / "new dir").mkdir()
    (scratch / "new dir" / "n.py").write_text("x = 1\n")
    (scratch / "d\u00e9j\u00e0" / "vu.py").write_text("y\n")
    (scratch / 'q"uote.txt').write_text("z\n")
    (scratch / "t\tab.txt").write_text("w\n")
    git("add", "-A")
    record, written = _written(repo, git("diff", "--cached", "-M"), tmp_path / "work")
    assert record["exit_code"] == 0, record
    assert sorted(written) == sorted(
        ["a.py", "new name.py", "run.sh", "link", "new dir/n.py", "d\u00e9j\u00e0/vu.py", 'q"uote.txt', "t\tab.txt"]
    )
    read = {path for chunk in patch_module.parse_chunks(strict.patch_bytes(record["output"])) for path in chunk.paths}
    assert read == set(written) | {"gone.txt"}  # a deletion, shown as git made it
    dot_git = (
        'diff --git ".git/config" ".git/config"\nnew file mode 100644\n--- /dev/null\n+++ ".git/config"\n'
        "@@ -0,0 +1 @@\n+x\n"
    )
    (tmp_path / "other").mkdir()
    _, written = _written(_repo(tmp_path / "other", {"a": "a\n"}), dot_git, tmp_path / "work2")
    assert written == ["config"]  # what git wrote: never a path in .git


def test_what_git_apply_wrote_for_the_patch_becomes_the_tests_uids_before_the_lock(tmp_path):
    """sh/replay.sh's own_patched, then the lock, run here as root: the patch's files (root's from
    git apply) and the directories made for them become uid 1000's, the image's own directories
    stay as they are, a symlink is given over itself, and the lock then takes a hidden file back;
    a hidden file with a symlinked directory on its path (even one inside the tree) is not
    locked. (read_written leaves `.git` and paths through a symlinked directory out of WRITTEN.)"""
    if os.geteuid() != 0:
        pytest.skip("own_patched chowns files: run as root")
    tree, elsewhere = tmp_path / "tree", tmp_path / "elsewhere"
    for d in (tree / ".git", tree / "test" / "new", tree / "real", elsewhere):
        d.mkdir(parents=True)
    for d in (tree, tree / "test", tree / "real"):
        os.chown(d, 1000, 1000)  # the image's tree is the tests' uid's; test/new is git apply's
    for f in (".git/config", "test/new/n.js", "test/mine.js", "test/hidden.js", "real/i.js"):
        (tree / f).write_text("x\n")
    (elsewhere / "e.js").write_text("x\n")
    (tree / "test" / "via").symlink_to(elsewhere)
    (tree / "test" / "inside").symlink_to(tree / "real")
    (tree / "link.js").symlink_to("test/mine.js")
    written = "WRITTEN=(test/new/n.js test/mine.js test/hidden.js link.js)\n"  # as read_written leaves it
    program = (
        _replay_functions("now_us", "through_symlink", "own_patched", "lock_one", "lock_tree", "lock_hidden")
        + written
        + "own_patched\nlock_hidden > /dev/null\n"
    )
    env = {"PATH": os.environ["PATH"], "TEST_UID": "1000", "LOCK": "test/hidden.js\ntest/inside/i.js"}
    done = subprocess.run(
        ["bash", "-c", f"export LOCK TEST_UID\n{program}"], cwd=tree, env=env, capture_output=True, text=True
    )
    assert done.stdout == "@@crucible-step own 0 0 0 1\n4", done.stdout + done.stderr

    def uid(rel: str) -> int:
        return os.lstat(tree / rel).st_uid

    assert [uid(r) for r in ("test/new/n.js", "test/new", "test/mine.js", "link.js")] == [1000] * 4
    assert uid(".git/config") == uid(".git") == 0 and os.stat(elsewhere / "e.js").st_uid == 0
    assert uid("test/hidden.js") == 0 and os.stat(tree / "test/hidden.js").st_mode & 0o222 == 0  # locked again
    assert uid("test") == 0 and os.stat(tree / "test").st_mode & 0o1777 == 0o1777
    assert uid("real/i.js") == 0 and os.stat(tree / "real/i.js").st_mode & 0o200  # not locked: root's, writable
    assert uid("real") == 1000  # its directory stays the tests'


def test_what_git_wrote_is_read_back_whatever_names_attributes_or_filters_the_patch_adds(tmp_path):
    """The read-back takes the bytes on disk, under no pathspec and no attribute: a file the patch
    names `:(exclude)*` (pathspec magic, had it been a pathspec), a `.gitattributes` saying
    `*.py -diff` (the diff would print "Binary files differ") and `filter=` a clean filter the
    image's git knows (as git-lfs installs one; the index would hold the filter's output) hide
    nothing: the module's test-aware line is in the diff and the scan finds it."""
    repo = _repo(tmp_path, {"src/mod.py": "def f():\n    return 1\n"})
    subprocess.run(["git", "-C", str(repo), "config", "filter.first.clean", "head -1"], check=True)
    scratch = tmp_path / "scratch"
    subprocess.run(["git", "clone", "-q", str(repo), str(scratch)], check=True)
    (scratch / "src" / "mod.py").write_text("def f():\n    return 1\nimport sys; sys.modules['_pytest'] = None\n")
    (scratch / ":(exclude)*").write_text("x\n")
    (scratch / '"lib"').mkdir()  # hash-object --stdin-paths would read the name as quoted: `lib`
    (scratch / '"lib"' / "evil.py").write_text("import sys; sys.modules['_pytest'] = None\n")
    (scratch / "lib").write_text("")
    (scratch / ".gitattributes").write_text("*.py -diff filter=first\n")
    subprocess.run(["git", "-C", str(scratch), "add", "-A"], check=True)
    patch = subprocess.run(
        ["git", "-C", str(scratch), "diff", "--cached", "--text"], check=True, capture_output=True, text=True
    ).stdout
    record, written = _written(repo, patch, tmp_path / "work")
    assert record["exit_code"] == 0, record
    assert sorted(written) == ['"lib"/evil.py', ".gitattributes", ":(exclude)*", "lib", "src/mod.py"]
    assert "+import sys; sys.modules['_pytest'] = None" in record["output"]
    contents = {rel: (repo / rel).read_bytes() for rel in ("src/mod.py", '"lib"/evil.py')}
    found = scanner.scan(strict.patch_bytes(record["output"]), contents, ["tests/"])
    assert {(f.path, f.line) for f in found} == {("src/mod.py", 3), ('"lib"/evil.py', 1)}
    assert not (repo / ".git" / "objects" / "info" / "alternates").exists()  # objects went to WORK, not the repo
