"""The run script's own edit of the test files under crucible-strict (swe_tasks/edits.py): which
loops are recognised, their words as bash reads them, and the `sed` first on the tests' PATH
(sh/sed_wrap.sh) run on this host as uid 1000, as the tests are; the script's own ``rm`` of a
hidden test file, which leaves it unlocked. The edit made in a grading
container: tests/flavors/swebench_pro/test_swe_strict_js.py (``mochafile``)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import swe_synth_instances

from envs.integrity.sources import jsresults as js_source
from swe_tasks import edits, jsresults, strict

NODEBB_LOOP = swe_synth_instances.MOCHA_FILE_RUN_SCRIPT.encode()


"""The loop as NodeBB's 22 scripts write it (the synthetic run script holds the same lines)."""


NODEBB_SED = ("-i", "-E", f"s#(describe[[:space:]]*\\(\\s*)(['\"`])(.*?)\\2#\\1\\2{edits.FILE}::\\3\\2#g")


def test_nodebbs_loop_is_recognised_with_its_words_as_bash_reads_them():
    found = edits.loop(NODEBB_LOOP)
    assert found == edits.Loop(
        ("test/", "-type", "f", "-regextype", "posix-extended", "-regex", ".*\\.(ts|js|tsx|jsx)$"), NODEBB_SED
    )
    assert edits.args(found) == [
        "test/\n-type\nf\n-regextype\nposix-extended\n-regex\n.*\\.(ts|js|tsx|jsx)$",
        "\n".join(NODEBB_SED),
    ]
    assert edits.args(None) == ["", ""]
    shown = edits.shown(found, "/crucible-work")
    assert "sed --sandbox -i -E s#(describe" in shown and "FILE::" in shown and edits.FILE not in shown


@pytest.mark.parametrize(
    "text",
    [
        '-i -E "s#(describe[[:space:]]*\\(\\s*)([\'\\"\\`])(.*?)\\2#\\1\\2${file}::\\3\\2#g"',
        "-i 's/a b/c/' \"x$file\"y 'it'\\''s' plain\\ word",
        "test/ -type f -name '*.js' -o -regex \".*\\.ts$\"",
        '-E -i\t\'\' "$file::${file}" a$ "b$"',
        "-i \\\n  -E 's/a/b/' plain\\\nword \"s/a\\\nb/\"",
    ],
)
def test_words_are_split_and_unquoted_as_bash_does(text):
    """Each word as bash passes it to the command, with the loop's variable set to the placeholder."""
    done = subprocess.run(
        ["bash", "-c", f"file={shlex.quote(edits.FILE)}; printf '%s\\0' {text}"], capture_output=True, check=True
    )
    assert edits.words(text, "file") == done.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize(
    "text",
    [
        '-i "s/$(id -u)/x/"',
        '-i "s/$HOME/x/"',
        "-i s/a/b/ *.js",
        "-i `id`",
        "-i 's/a/b/",
        '-i "s/a/b/',
        "-i ~/x",
        f"-i {edits.FILE}",
        '-i "a\nb"',
        "-i 's/a \\\nb/'",
    ],
)
def test_a_word_that_needs_more_than_quote_removal_is_refused(text):
    assert edits.words(text, "file") is None


def _script(loop: str) -> bytes:
    return f"#!/bin/bash\nset -e\n{loop}\nmocha test/a.js\n".encode()


LOOP = (
    "find test/ -type f -print0 | while IFS= read -r -d '' file; do\n"
    '  sed -i -E "s#(describe\\()\'#\\1\'${file}::#" "$file"\ndone'
)


def test_only_one_plain_in_place_loop_is_recognised():
    assert edits.loop(_script(LOOP)) == edits.Loop(
        ("test/", "-type", "f"), ("-i", "-E", f"s#(describe\\()'#\\1'{edits.FILE}::#")
    )
    assert edits.loop(_script(LOOP.replace("done", "  done"))) is not None
    assert edits.loop(_script(LOOP.replace("| while", "|| while"))) is None  # 7 NodeBB scripts: the loop never runs
    assert edits.loop(_script("# " + LOOP.replace("\n", "\n# "))) is None
    assert edits.loop(_script(LOOP + "\n" + LOOP)) is None  # two: which one ran where is the script's to say
    assert edits.loop(_script(LOOP.replace("sed -i -E", "sed -E"))) is None  # not an edit in place
    assert edits.loop(_script(LOOP.replace('-E "', '-E "$(cat /x)'))) is None
    assert edits.loop(_script(LOOP.replace('"$file"\n', '"$other"\n'))) is None
    assert edits.loop(_script(LOOP.replace("test/", "$(pwd)/test/"))) is None
    assert edits.loop(_script(LOOP.replace("-i -E", "--in-place -E"))) is not None
    assert edits.loop(b"#!/bin/bash\nmocha test/a.js\n") is None
    assert edits.loop(_script(LOOP.replace('"$file"\n', '"$file" '))) is None  # `done` would be sed's word
    assert edits.loop(_script("x=a#b; " + LOOP)) is not None  # a `#` inside a word starts no comment
    assert edits.loop(_script('echo "it\'s"; # ' + LOOP)) is None
    assert edits.loop(_script(LOOP.replace("sed -i -E", "sed -i \\\n    -E"))).sed == edits.loop(_script(LOOP)).sed
    assert edits.loop(_script(LOOP.replace("-type f -print0", "-type f\\\n-print0"))) is None  # bash: `f-print0`
    assert edits.loop(_script(LOOP.replace('::#" "$file"', '::#"\\\n"$file"'))) is None  # one word with the file
    assert edits.loop(_script('x="\n" # ' + LOOP.replace("\n", "\n# "))) is None  # a comment after a quote closed
    assert edits.loop(_script('echo \\" # ' + LOOP.replace("\n", "\n# "))) is None  # an escaped quote opens none
    assert edits.loop(_script("echo '" + LOOP + "'")) is None  # text, not a command


@pytest.mark.parametrize("action", ["-exec rm {} +", "-delete", "-fprint /tmp/x", "-execdir true ;", "-ok true ;"])
def test_a_find_that_does_more_than_list_files_is_never_run_by_root(action):
    """root runs the loop's find before the run: only one whose words list files."""
    assert edits.loop(_script(LOOP.replace("-type f", f"-type f {action}"))) is None


def test_the_sed_wrapper_answers_only_a_recorded_edit_and_leaves_the_rest_to_the_real_sed():
    """Run as uid 1000 over a root's read-only file in a root's sticky directory (a locked test file
    under strict): the edit root already made, asked for again with the same words, exits 0 and
    writes nothing; another edit of that file reaches the real sed, which is refused; an edit of
    the tests' own file is made. In a directory uid 1000 can reach (pytest's tmp_path is root's)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as where:
        _wrapped_seds(Path(where))


def _wrapped_seds(root: Path) -> None:
    wrap, tests = root / "sed-wrap", root / "test"
    wrap.mkdir()
    tests.mkdir()
    locked, own = tests / "a.js", tests / "b.js"
    locked.write_text("describe('a', () => {});\n")
    own.write_text("describe('b', () => {});\n")
    os.chown(own, 1000, 1000)
    locked.chmod(0o444)
    tests.chmod(0o1777)
    root.chmod(0o755)
    recorded = ["-i", "-E", f"s#(describe\\()'#\\1'{locked}::#", str(locked)]
    quoted = subprocess.run(
        ["bash", "-c", "printf '%q ' \"$@\"", "bash", *recorded], capture_output=True, text=True, check=True
    ).stdout
    (wrap / "sed-edits").write_text(quoted + "\n")
    (wrap / "sed").write_text(edits.wrap_program())
    (wrap / "sed").chmod(0o755)
    as_tests = [shutil.which("setpriv") or "setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
    env = {"PATH": f"{wrap}:/usr/bin:/bin", "LC_ALL": "C"}

    def sed(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*as_tests, "sed", *args], capture_output=True, text=True, env=env, cwd=root)

    assert sed(*recorded).returncode == 0
    assert locked.read_text() == "describe('a', () => {});\n"  # no write: root made this edit before the run
    refused = sed("-i", "-E", "s#a#x#", str(locked))
    assert refused.returncode != 0 and "cannot rename" in refused.stderr
    assert locked.read_text() == "describe('a', () => {});\n"
    assert sed(*recorded[:-1], str(own)).returncode == 0
    assert own.read_text() == f"describe('{locked}::b', () => {{}});\n"  # the real sed, the script's own file
    printed = sed("-n", "p", str(locked))
    assert printed.returncode == 0 and printed.stdout == locked.read_text()
    lone = subprocess.run([*as_tests, str(wrap / "sed"), "p"], capture_output=True, text=True, env={"PATH": str(wrap)})
    assert lone.returncode == 127 and "no sed on PATH" in lone.stderr  # said, not looped


def test_a_test_named_by_the_file_its_describe_is_written_in_maps_to_the_runners_test():
    """NodeBB's parser names a test by the FILE:: the run script's sed put before its describe
    title: for a describe in a helper the test file requires, the helper, not mocha's file; only
    where that helper is trusted too (locked, the patch leaves it alone), else whatever the patch
    made of the helper would answer for the name."""
    hidden, helper = "/app/test/user.js", "/app/test/user/emails.js"
    tests = js_source.tests_in(
        json.dumps(
            {
                "runner": "mocha",
                "tests": [
                    {
                        "file": hidden,
                        "titlePath": ["test/user/emails.js::email confirmation", "sends"],
                        "status": "passed",
                    },
                    {
                        "file": hidden,
                        "titlePath": ["test/user.js::User", "test/user.js::.create()", "works"],
                        "status": "failed",
                    },
                    {
                        "file": "/app/test/other.js",
                        "titlePath": ["test/user/emails.js::email confirmation", "sends"],
                        "status": "failed",
                    },
                ],
            }
        ).encode()
    )
    assert jsresults.map_name("test/user/emails.js | email confirmation sends", tests, [hidden, helper]) == (
        [0],
        "describe-file",
    )
    assert jsresults.map_name("test/user/emails.js | email confirmation sends", tests, [hidden])[0] == []
    assert jsresults.map_name("test/user.js | User .create() works", tests, [hidden]) == ([1], "path-suffix")
    assert jsresults.map_name("test/user/other.js | email confirmation sends", tests, [hidden, helper])[0] == []


def test_a_helper_a_listed_name_names_is_locked_and_trusted_where_the_script_edits_every_test_file():
    """7 NodeBB instances list names by a helper (test/user/emails.js) that no before_repo_set_cmd
    restores nor is selected: locked, root's edit made to it, and trusted if the patch leaves it."""
    task = SimpleNamespace(
        workdir="/app",
        before_repo_set_cmd="git checkout s -- test/user.js",
        selected_test_files_to_run=["test/user.js"],
        fail_to_pass=["test/user/emails.js | email confirmation sends"],
        pass_to_pass=["test/user.js | User works", "test/user/../../etc/x.js | y"],
    )
    assert strict.described_test_files(task) == ["test/user/emails.js"]
    looped = strict.plan(task, "", run_script=_script(LOOP))
    assert looped.lock == ("test/user.js", "test/user.jsx", "test/user/emails.js")
    assert "test/user/emails.js" not in strict.plan(task, "", run_script=b"npx mocha test/user.js\n").lock
    assert strict.trusted_test_files(task, "", {"test/user.js", "test/user/emails.js"}) == [
        "/app/test/user.js",
        "/app/test/user/emails.js",
    ]  # what the lock made root's (no test/user.jsx there)
    edited = (
        "diff --git a/test/user/emails.js b/test/user/emails.js\n--- a/test/user/emails.js\n"
        "+++ b/test/user/emails.js\n@@ -1 +1 @@\n-a\n+b\n"
    )
    assert strict.trusted_test_files(task, edited, {"test/user.js", "test/user/emails.js"}) == ["/app/test/user.js"]


NODEBB_REMOVALS = (
    b"  rm -r test/activitypub* 2>/dev/null || true\n  rm test/file.js 2>/dev/null || true\n"
    b"  rm -f test/activitypub* test/file.js 2>/dev/null || true\n"
)


def test_the_run_scripts_plain_rm_lines_are_read_and_matched_as_bashs_globs():
    found = edits.removals(b"#!/bin/bash\n" + NODEBB_REMOVALS + b'rm -rf /tmp/x\nrm ../up\nrm "$x"\nrm a; rm b\n')
    assert found == [
        edits.Removal(("test/activitypub*",), True, 1),
        edits.Removal(("test/file.js",), False, 2),
        edits.Removal(("test/activitypub*", "test/file.js"), False, 3),
    ]
    recursive, plain = found[0], found[2]
    assert edits.removed([recursive], "test/activitypub/feps.js") and edits.removed([recursive], "test/activitypub.js")
    assert not edits.removed([plain], "test/activitypub/feps.js")  # rm -f of a directory removes nothing
    assert edits.removed([plain], "test/activitypub.js") and edits.removed([plain], "test/file.js")
    assert not edits.removed(found, "test/user.js") and not edits.removed(found, "test/.activitypub.js")
    assert not edits.removed(found, "other/test/file.js") and not edits.removed(found, "test")


def test_a_hidden_test_file_the_script_removes_is_left_unlocked_only_where_a_runners_results_confirm():
    """Locked, a selected file NodeBB's script removes before mocha runs outlives the rm and its
    helpers (mocha then fails loading it); unlocked it goes as officially, and is not trusted, so
    nothing in it answers for a listed test. Where the parser alone judges it stays locked."""
    task = SimpleNamespace(
        workdir="/app",
        before_repo_set_cmd="git checkout s -- test/user.js test/activitypub/feps.js",
        selected_test_files_to_run=["test/user.js", "test/activitypub/feps.js"],
        fail_to_pass=["test/user.js | User works"],
        pass_to_pass=[],
    )
    mocha = b"#!/bin/bash\nset -e\n" + NODEBB_REMOVALS + b"npx mocha --reporter=json test/user.js\n"
    planned = strict.plan(task, "", run_script=mocha)
    assert "test/activitypub/feps.js" not in planned.lock and "test/user.js" in planned.lock
    assert planned.unlocked == ("test/activitypub/feps.js",)
    trusted = strict.trusted_test_files(task, "", set(planned.lock))
    assert "/app/test/user.js" in trusted and "/app/test/activitypub/feps.js" not in trusted
    parser_only = strict.plan(task, "", run_script=mocha.replace(b"npx mocha --reporter=json", b"node run.js"))
    assert "test/activitypub/feps.js" in parser_only.lock and parser_only.unlocked == ()
    assert strict.plan(task, "").unlocked == ()
    cleanup = strict.plan(
        task, "", run_script=b"#!/bin/bash\nnpx mocha --reporter=json test/user.js\n" + NODEBB_REMOVALS
    )
    assert cleanup.unlocked == ()  # removed after the runner ran: it ran officially
    assert jsresults.last_runner_line(b"npx mocha a\n# mocha\nnpx jest b\necho\n") == 2
    assert jsresults.last_runner_line(b"echo\n") == -1
    assert jsresults.last_runner_line(b"echo '\r\r\r'\nnpx mocha t\n") == 1  # lines end at a newline only, as bash's


def test_the_tests_home_gets_roots_npm_cache_only_where_the_script_runs_npm_install():
    """Offline, npm falls back to the cache the image's build left in root's HOME (the official
    run is root's); the tests' fresh HOME has none, so NodeBB's test-time `npm install lodash
    underscore async` failed under strict (EAI_AGAIN). 11 of the 1000 scripts run it."""
    nodebb = b"prepare() {\n  cp install/package.json .\n  npm install --production=false\n  npm install lodash underscore async\n}\n"
    assert strict.home_from_root(nodebb) == [".npm", ".npmrc"]
    assert strict.home_from_root(b"npm ci\n") == strict.home_from_root(b"cd x && npm i -D y\n") == [".npm", ".npmrc"]
    assert strict.home_from_root(b"npm --prefix web install\n") == [".npm", ".npmrc"]
    for other in (
        b"# npm install\n",
        b"npm test -- --ci\n",
        b"npm run install-deps\n",
        b"npx mocha\n",
        b"yarn install\n",
        b"pnpm install\n",
        b"echo npm-install\n",
    ):
        assert strict.home_from_root(other) == [], other
