"""The synthetic SWE-bench Pro instances asked for by ``swe_synth.generate``'s flags (tests/swe_synth.py
describes each): ``tally`` and ``ledger`` run by pytest, the Go ones, and the JavaScript ones run
by jest, mocha and a project's own runner, each with its repository's files, run script and parser."""

from __future__ import annotations

import json
import textwrap

from swe_synth_assets import (
    GO_LISTED_RUN_SCRIPT,
    GO_PARSER,
    GO_PIPED_RUN_SCRIPT,
    GO_RUN_SCRIPT,
    JEST_OWN_PARSER,
    JEST_OWN_RUN_SCRIPT,
    JEST_PARSER,
    JEST_RUN_SCRIPT,
    MOCHA_PARSER,
    MOCHA_RUN_SCRIPT,
    PYTEST_PARSER,
    PYTEST_RUN_SCRIPT,
    Instance,
)

TALLY = "instance_synth__tally-3333333333333333333333333333333333333333-vnan"


def pytest_instance() -> Instance:
    """A Python instance whose run script runs pytest (a class with a parametrized test, a module-level one)."""
    base = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    fix = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    test_base = "from tally import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
    test_fix = textwrap.dedent("""\
        import pytest

        from tally import add, mul


        class TestTally:
            @pytest.mark.parametrize("a, b, want", [(2, 3, 5), (0, 4, 4)])
            def test_add(self, a, b, want):
                assert add(a, b) == want


        def test_mul():
            assert mul(3, 4) == 12
        """)
    return Instance(
        TALLY,
        "python",
        "synth/tally",
        {"tally.py": base, "tests/test_tally.py": test_base},
        {"tally.py": fix},
        {"tests/test_tally.py": test_fix},
        PYTEST_RUN_SCRIPT,
        PYTEST_PARSER,
        ["ENV LANG=C.UTF-8"],
        ["ENV PYTEST_ADDOPTS=--tb=short"],
        ["tests/test_tally.py::TestTally::test_add[2-3-5]", "tests/test_tally.py::TestTally::test_add[0-4-4]"],
        ["tests/test_tally.py::test_mul"],
        "tally.add subtracts instead of adding.",
    )


LEDGER = "instance_synth__ledger-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-vnan"

UNITS_RUNNER = r"""#!/usr/bin/env python3
# Our own runner, in the shape of ansible-test's `units` command as SWE-bench Pro's ansible
# instances run it: pytest as `python -m pytest` in an environment rebuilt from HOME and PATH
# alone (PYTEST_ADDOPTS, PYTEST_PLUGINS and the caller's PYTHONPATH do not get through), with
# its own --junit-xml in the tree.
import os
import subprocess
import sys

if sys.argv[1:2] != ["units"]:
    sys.exit("usage: ansible-test units FILE...")
env = {key: os.environ[key] for key in ("HOME", "PATH") if key in os.environ}
env["PYTHONPATH"] = os.getcwd()
os.makedirs("test-results", exist_ok=True)
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                          "--junit-xml", "test-results/units.xml", *sys.argv[2:]], env=env))
"""

UNITS_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: each selected file through bin/ansible-test units, one pytest session each
set -e
cd /app
IFS=',' read -r -a files <<< "$1"
for f in "${files[@]}"; do
  echo "Running unit test (pytest, through ansible-test): $f"
  python3 bin/ansible-test units "$f" || true
done
"""


def units_instance() -> Instance:
    """``ledger.credit`` subtracts; the hidden test file adds ``test_credit_adds``, and a second
    selected file holds the pass_to_pass test: each runs in its own pytest session, started by a
    runner that rebuilds the environment (``UNITS_RUNNER``)."""
    base = "def credit(balance, amount):\n    return balance - amount\n\n\ndef debit(balance, amount):\n    return balance - amount\n"
    fix = base.replace(
        "def credit(balance, amount):\n    return balance - amount",
        "def credit(balance, amount):\n    return balance + amount",
    )
    credit_base = "from ledger import credit\n\n\ndef test_credit_zero():\n    assert credit(5, 0) == 5\n"
    credit_fix = credit_base + "\n\ndef test_credit_adds():\n    assert credit(5, 2) == 7\n"
    debit = "from ledger import debit\n\n\ndef test_debit_subtracts():\n    assert debit(5, 2) == 3\n"
    return Instance(
        LEDGER,
        "python",
        "synth/ledger",
        {
            "ledger.py": base,
            "bin/ansible-test": UNITS_RUNNER,
            "tests/units/test_credit.py": credit_base,
            "tests/units/test_debit.py": debit,
        },
        {"ledger.py": fix},
        {"tests/units/test_credit.py": credit_fix, "tests/units/test_debit.py": debit},
        UNITS_RUN_SCRIPT,
        PYTEST_PARSER,
        ["ENV LANG=C.UTF-8"],
        ["ENV PYTEST_ADDOPTS=--tb=short"],
        ["tests/units/test_credit.py::test_credit_adds"],
        ["tests/units/test_credit.py::test_credit_zero", "tests/units/test_debit.py::test_debit_subtracts"],
        "ledger.credit subtracts the amount instead of adding it.",
    )


GO_SUM = "instance_synth__gosum-4444444444444444444444444444444444444444-vnan"
GO_PIPED = "instance_synth__gopiped-5555555555555555555555555555555555555555-vnan"
GO_LISTED = "instance_synth__golisted-6666666666666666666666666666666666666666-vnan"
GO_OLD = "instance_synth__goold-6767676767676767676767676767676767676767-vnan"


def go_instance(piped: bool = False, listed: bool = False, old: bool = False) -> Instance:
    """A Go module without dependencies: ``Add`` subtracts; the hidden test adds ``TestAdd``.
    ``piped``: the same module whose run script filters go test's output through awk;
    ``listed``: whose run script tests the packages `go list` names; ``old``: run by Go 1.19."""
    source = (
        "package gosum\n\n// Add returns a plus b.\nfunc Add(a, b int) int {{\n\treturn a {op} b\n}}\n\n"
        "// Mul returns a times b.\nfunc Mul(a, b int) int {{\n\treturn a * b\n}}\n"
    )
    test_mul = "func TestMul(t *testing.T) {\n\tif Mul(3, 4) != 12 {\n\t\tt.Fatal(Mul(3, 4))\n\t}\n}\n"
    test_add = "func TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(Add(2, 3))\n\t}\n}\n\n"
    header = 'package gosum\n\nimport "testing"\n\n'
    instance_id, run_script = (
        (GO_PIPED, GO_PIPED_RUN_SCRIPT)
        if piped
        else (GO_LISTED, GO_LISTED_RUN_SCRIPT)
        if listed
        else (GO_OLD, GO_RUN_SCRIPT)
        if old
        else (GO_SUM, GO_RUN_SCRIPT)
    )
    return Instance(
        instance_id,
        "go",
        "synth/gosum",
        {
            "go.mod": f"module synth/gosum\n\ngo {'1.19' if old else '1.21'}\n",
            "sum.go": source.format(op="-"),
            "sum_test.go": header + test_mul,
        },
        {"sum.go": source.format(op="+")},
        {"sum_test.go": header + test_add + test_mul},
        run_script,
        GO_PARSER,
        ["ENV LANG=C.UTF-8"],
        ["ENV SUM_MODE=strict"],
        ["TestAdd"],
        ["TestMul"],
        "gosum.Add subtracts instead of adding.",
        toolchain="go-1.19" if old else "go",
    )


JEST_SHOUT = "instance_synth__jestshout-7777777777777777777777777777777777777777-vnan"
JEST_OWN = "instance_synth__jestown-8888888888888888888888888888888888888888-vnan"

JEST_LIB_BASE = (
    "function shout(s) { return s + '!'; }\n"
    "function whisper(s) { return s.toLowerCase(); }\nmodule.exports = { shout, whisper };\n"
)
JEST_LIB_FIX = JEST_LIB_BASE.replace("return s + '!';", "return `${s.toUpperCase()}!`;")
_JEST_WHISPER = (
    "describe('whisper', () => {\n  test('lowercases', () => {\n    expect(whisper('HeY')).toBe('hey');\n  });\n});\n"
)
_JEST_SHOUT = (
    "describe('shout', () => {\n  describe('case', () => {\n    test('uppercases', () => {\n"
    "      expect(shout('hey')).toBe('HEY!');\n      expect(shout('hey')).toMatchSnapshot();\n"
    "    });\n  });\n});\n\n"
)
JEST_SNAPSHOT = (
    "// Jest Snapshot v1, https://goo.gl/fbAQLP\n\n"
    'exports[`shout case retired 1`] = `"HEY"`;\n\n'
    'exports[`shout case uppercases 1`] = `"HEY!"`;\n'
)
"""The hidden test's snapshot file as jest 29 writes it, with an obsolete entry: jest saves such a
file at the end of the test file in CI mode too, the same bytes (a hidden file, locked under
strict: the results hook skips that write)."""


def jest_instance(own_json: bool = False) -> Instance:
    """``lib.js`` whose shout() keeps the case; the hidden test adds ``shout > case > uppercases``.
    ``own_json``: the run script passes ``--json`` itself and its parser reads that (absolute names)."""
    head = "const { shout, whisper } = require('../lib');\n\n"
    package = (
        json.dumps(
            {"name": "shout", "private": True, "scripts": {"test": "jest"}, "jest": {"testEnvironment": "node"}},
            indent=2,
        )
        + "\n"
    )
    prefix = "/app/" if own_json else ""
    return Instance(
        JEST_OWN if own_json else JEST_SHOUT,
        "js",
        "synth/jestshout",
        {"package.json": package, "lib.js": JEST_LIB_BASE, "test/lib.test.js": head + _JEST_WHISPER},
        {"lib.js": JEST_LIB_FIX},
        {"test/lib.test.js": head + _JEST_SHOUT + _JEST_WHISPER, "test/__snapshots__/lib.test.js.snap": JEST_SNAPSHOT},
        JEST_OWN_RUN_SCRIPT if own_json else JEST_RUN_SCRIPT,
        JEST_OWN_PARSER if own_json else JEST_PARSER,
        ["ENV LANG=C.UTF-8"],
        ["ENV SHOUT_MODE=strict"],
        [f"{prefix}test/lib.test.js | shout | case | uppercases"],
        [f"{prefix}test/lib.test.js | whisper | lowercases"],
        "shout('hey') should give 'HEY!' but keeps the case.",
        toolchain="js",
    )


MOCHA_SHOUT = "instance_synth__mochashout-9999999999999999999999999999999999999999-vnan"


def mocha_instance() -> Instance:
    """The same ``lib.js`` under mocha: the hidden test adds ``shout case uppercases``."""
    head = "const assert = require('assert');\nconst { shout, whisper } = require('../lib');\n\n"
    whisper = (
        "describe('whisper', () => {\n  it('lowercases', () => {\n"
        "    assert.strictEqual(whisper('HeY'), 'hey');\n  });\n});\n"
    )
    shout = (
        "describe('shout', () => {\n  describe('case', () => {\n    it('uppercases', () => {\n"
        "      assert.strictEqual(shout('hey'), 'HEY!');\n    });\n  });\n});\n\n"
    )
    return Instance(
        MOCHA_SHOUT,
        "js",
        "synth/mochashout",
        {"lib.js": JEST_LIB_BASE, "test/lib.test.js": head + whisper},
        {"lib.js": JEST_LIB_FIX},
        {"test/lib.test.js": head + shout + whisper},
        MOCHA_RUN_SCRIPT,
        MOCHA_PARSER,
        ["ENV LANG=C.UTF-8"],
        ["ENV SHOUT_MODE=strict"],
        ["test/lib.test.js | shout case uppercases"],
        ["test/lib.test.js | whisper lowercases"],
        "shout('hey') should give 'HEY!' but keeps the case.",
        toolchain="js",
    )


OSPEC = "instance_synth__ospec-9191919191919191919191919191919191919191-vnan"

OSPEC_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script in the shape of tutanota's: under `set -e`, the package's own test script
### (npm test: a runner of the project's own that prints one summary for the whole suite)
set -e
: "${SHOUT_MODE:?SHOUT_MODE comes from the ENV line of the instance Dockerfile}"
echo "================= TEST EXECUTION START ================="
npm test
echo "================= TEST EXECUTION END ================="
"""

OSPEC_PARSER = r'''"""Synthetic parser in the shape of tutanota's: the runner's one summary line (on STDOUT)
names the whole suite by its assertion count; no per-test name exists."""
import json
import re
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
text = open(stdout_path, encoding="utf-8", errors="replace").read()
tests = [{"name": f"test/tests/Suite.js | tests ({count} assertions)", "status": "PASSED"}
         for count in re.findall(r"All (\d+) assertions passed", text)]
json.dump({"tests": tests}, open(output_path, "w"))
'''

OSPEC_RUNNER = """\
// The project's own runner (ospec's shape): every file in test/tests/ adds its assertions;
// one summary for the suite, as tutanota's prints.
const fs = require('fs');
const path = require('path');
let passed = 0;
const failed = [];
global.o = (name, fn) => {
  fn((actual, expected) => {
    if (actual === expected) passed += 1;
    else failed.push(`${name}: ${JSON.stringify(actual)} !== ${JSON.stringify(expected)}`);
  });
};
const dir = path.join(__dirname, 'tests');
for (const file of fs.readdirSync(dir).sort()) require(path.join(dir, file));
const total = passed + failed.length;
if (failed.length) {
  console.log(failed.join('\\n'));
  console.log(`${failed.length} out of ${total} assertions failed`);
  process.exit(1);
}
console.log(`All ${total} assertions passed`);
"""


def ospec_instance() -> Instance:
    """``lib.js`` under a runner of the project's own, run by ``npm test``, whose one summary line
    names the suite by its assertion count (tutanota's 74 instances): the hidden test adds the
    third assertion, ``shout('hey') === 'HEY!'``."""
    whisper = (
        "const { whisper } = require('../../lib');\n\n"
        "o('whisper', (eq) => {\n  eq(whisper('HeY'), 'hey');\n  eq(whisper('a'), 'a');\n});\n"
    )
    shout = "const { shout } = require('../../lib');\n\no('shout', (eq) => {\n  eq(shout('hey'), 'HEY!');\n});\n"
    package = (
        '{\n  "name": "ospec-shape",\n  "private": true,\n  "scripts": {\n    "test": "node test/run.js"\n  }\n}\n'
    )
    return Instance(
        OSPEC,
        "js",
        "synth/ospec",
        {
            "lib.js": JEST_LIB_BASE,
            "package.json": package,
            "test/run.js": OSPEC_RUNNER,
            "test/tests/WhisperTest.js": whisper,
        },
        {"lib.js": JEST_LIB_FIX},
        {"test/tests/ShoutTest.js": shout},
        OSPEC_RUN_SCRIPT,
        OSPEC_PARSER,
        ["ENV LANG=C.UTF-8"],
        ["ENV SHOUT_MODE=strict"],
        ["test/tests/Suite.js | tests (3 assertions)"],
        [],
        "shout('hey') should give 'HEY!' but keeps the case.",
        toolchain="js",
    )


MOCHA_FILE = "instance_synth__mochafile-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-vnan"

MOCHA_FILE_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script in the shape of NodeBB's: under `set -e`, every test file's describe titles
### get the file's path in front (sed in a find|while loop), restored at exit; a selected test
### file removed before mocha runs (rm, its helper with it); a package installed at test time from
### root's npm cache alone, as offline; mocha's JSON reporter
set -e
IFS=',' read -r -a files <<< "$1"
cp -r test/. /tmp/test
restore() {
  cp -r /tmp/test/. test
}
trap restore EXIT
find test/ -type f \
  -regextype posix-extended \
  -regex '.*\.(ts|js|tsx|jsx)$' \
  -print0 \
| while IFS= read -r -d '' file; do
    sed -i -E \
      "s#(describe[[:space:]]*\(\s*)(['\"\`])(.*?)\2#\1\2${file}::\3\2#g" \
      "$file"
  done
rm -r test/retired* 2>/dev/null || true
npm install --offline --no-audit --no-fund lodash@4.17.21 >&2
NODE_ENV=test mocha --reporter=json --timeout=10000 "${files[@]}" || true
"""

MOCHA_FILE_PARSER = (
    MOCHA_PARSER.replace(
        '-> "FILE | FULL TITLE" names."""',
        '-> "FILE | FULL TITLE", FILE the one a\ndescribe title starts with ("FILE::", taken out of the title), else the test\'s file."""',
    )
    .replace("import json\n", "import json\nimport re\n")
    .replace(
        """            tests.append({"name": f"{file} | {test['fullTitle']}", "status": status})""",
        """            title = test["fullTitle"]
            described = re.search(r"(\\S+)::", title)
            if described:
                file, title = described.group(1), title.replace(described.group(1) + "::", "")
            tests.append({"name": f"{file} | {title}", "status": status})""",
    )
)


def mocha_file_instance() -> Instance:
    """``lib.js`` under mocha, run as NodeBB's scripts run it (every describe title gets its file's
    path, by sed as the script's uid). The selected test file requires two helpers with describes of
    their own, named by the helper's path only if the script's edit was made: the hidden
    ``test/helpers/whisper.js`` and ``test/helpers/echo.js``, which the patch may change but a listed
    name names (both locked under strict); echo.js requires ``test/helpers/extra.js``, whose
    describe no listed name names (under strict the script's own sed, as the tests' uid, edits it). The
    selected ``test/retired/old.test.js`` (hidden) and its helper are removed by the script before
    mocha runs (as NodeBB's ``rm -r test/activitypub*`` removes a selected file), so its test
    never runs."""
    retired = (
        "const { works } = require('./helper');\n\ndescribe('retired', () => {\n  it('works', () => works());\n});\n"
    )
    head = "const assert = require('assert');\nconst { shout } = require('../lib');\n\n"
    helpers = "require('./helpers/echo');\n"
    shout = (
        "describe('shout', () => {\n  describe('case', () => {\n    it('uppercases', () => {\n"
        "      assert.strictEqual(shout('hey'), 'HEY!');\n    });\n  });\n});\n\n"
    )
    whisper = (
        "const assert = require('assert');\nconst { whisper } = require('../../lib');\n\n"
        "describe('whisper', () => {\n  it('lowercases', () => {\n"
        "    assert.strictEqual(whisper('HeY'), 'hey');\n  });\n});\n"
    )
    echo = (
        "const assert = require('assert');\n\nrequire('./extra');\n\ndescribe(\"echo\", () => {\n"
        "  it('repeats', () => {\n    assert.strictEqual('ab'.repeat(2), 'abab');\n  });\n});\n"
    )
    extra = "describe('extra', () => {\n  it('runs', () => {});\n});\n"
    return Instance(
        MOCHA_FILE,
        "js",
        "synth/mochafile",
        {
            "lib.js": JEST_LIB_BASE,
            "test/lib.test.js": head + helpers,
            "test/helpers/echo.js": echo,
            "test/helpers/extra.js": extra,
            "test/retired/helper.js": "module.exports = { works: () => true };\n",
        },
        {"lib.js": JEST_LIB_FIX},
        {
            "test/lib.test.js": head + shout + "require('./helpers/whisper');\n" + helpers,
            "test/helpers/whisper.js": whisper,
            "test/retired/old.test.js": retired,
        },
        MOCHA_FILE_RUN_SCRIPT,
        MOCHA_FILE_PARSER,
        ["ENV LANG=C.UTF-8"],
        ["ENV SHOUT_MODE=strict"],
        ["test/lib.test.js | shout case uppercases"],
        ["test/helpers/whisper.js | whisper lowercases", "test/helpers/echo.js | echo repeats"],
        "shout('hey') should give 'HEY!' but keeps the case.",
        toolchain="js",
        selected=["test/lib.test.js", "test/retired/old.test.js"],
    )
