"""Content-addressed image builds, proven from the Docker daemon's side.

Builds are kept tiny: each recipe is a RUN step or two on top of the offline base image,
and every image a test builds is removed when its module ends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path

import docker
import pytest
from docker.utils.build import tar as sdk_tar

from engine.build.images import CA_FILE, ContentAddressedBuilder, sent_files
from engine.errors import BuildError

PROJECT = Path(__file__).resolve().parents[2]
TINY = "ARG BASE\nFROM ${BASE}\nCOPY . /ctx\nRUN echo built > /built\n"


@pytest.fixture(scope="module")
def built_tags(docker_client):
    """Tags the module's tests built; removed at the end (their containers run with remove=True)."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        try:
            docker_client.api.remove_image(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


@pytest.fixture(scope="module")
def builder(docker_client):
    return ContentAddressedBuilder(docker_client, ca_bundle=None)


def make_context(root: Path, dockerfile: str = TINY, **files: str) -> tuple[Path, Path]:
    """A context dir with a unique nonce (so each test session builds a new tag).

    ``files`` maps names to text; ``__`` in a name stands for ``/`` (``sub__f.py``).
    """
    context = root / f"ctx-{uuid.uuid4().hex[:8]}"
    context.mkdir()
    (context / "nonce").write_text(uuid.uuid4().hex)
    for name, text in files.items():
        path = context / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (context / "Dockerfile").write_text(dockerfile)
    return context / "Dockerfile", context


def build_events(client, since: float, until: float, tag: str, lineage: set[str]) -> list[dict]:
    """Daemon events in [since, until] that belong to building ``tag``.

    The daemon is shared with other test sessions, so keep only container events whose
    image is a layer of ours and image events that name our tag or one of its layers.
    """
    out = []
    for event in client.events(since=f"{since:.9f}", until=f"{until:.9f}", decode=True):
        attrs = event.get("Actor", {}).get("Attributes", {})
        if (
            event.get("Type") == "container"
            and attrs.get("image") in lineage
            or event.get("Type") == "image"
            and (attrs.get("name") == tag or event["Actor"].get("ID") in lineage)
        ):
            out.append(event)
    return out


def lineage_of(client, tag: str, base: str) -> set[str]:
    layers = {layer["Id"] for layer in client.api.history(tag) if layer["Id"] != "<missing>"}
    return layers | {base, client.api.inspect_image(base)["Id"]}


def test_sent_files_are_exactly_what_the_sdk_sends(tmp_path):
    dockerfile, context = make_context(
        tmp_path, **{"keep.txt": "k", "logs__a.log": "x", "sub__deep__f.py": "1", ".dockerignore": "logs\n*.tmp\n# c\n"}
    )
    (context / "junk.tmp").write_text("j")
    with sdk_tar(str(context), exclude=["logs", "*.tmp"], dockerfile=("Dockerfile", None)) as archive:
        archive.seek(0)
        with tarfile.open(fileobj=archive) as sent:
            sdk_names = sorted(sent.getnames())
    assert sent_files(context, dockerfile) == sdk_names
    assert "junk.tmp" not in sdk_names and "logs/a.log" not in sdk_names


@pytest.mark.docker
def test_tag_follows_content_build_args_and_not_ignored_files(builder, base_image, tmp_path):
    dockerfile, context = make_context(tmp_path, **{"app.py": "print(1)\n", ".dockerignore": "scratch\n"})
    (context / "scratch").write_text("ignored")
    args = {"BASE": base_image}
    ref = builder.plan(dockerfile, context, args, "test")
    assert ref.tag == f"crucible/test:{ref.input_hash[:24]}"
    assert builder.plan(dockerfile, context, args, "test").tag == ref.tag

    (context / "scratch").write_text("ignored, changed")
    assert builder.plan(dockerfile, context, args, "test").tag == ref.tag

    (context / "app.py").write_text("print(2)\n")  # one byte
    changed = builder.plan(dockerfile, context, args, "test")
    assert changed.tag != ref.tag

    os.chmod(context / "app.py", 0o755)
    assert builder.plan(dockerfile, context, args, "test").tag != changed.tag

    assert builder.plan(dockerfile, context, {**args, "EXTRA": "1"}, "test").tag != changed.tag


@pytest.mark.docker
def test_ca_bundle_is_an_input_and_lands_in_the_context(docker_client, base_image, tmp_path):
    dockerfile, context = make_context(tmp_path)
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nnot-a-real-cert\n-----END CERTIFICATE-----\n")
    without = ContentAddressedBuilder(docker_client, ca_bundle=None).plan(
        dockerfile, context, {"BASE": base_image}, "test"
    )
    assert (context / CA_FILE).read_bytes() == b""
    with_ca = ContentAddressedBuilder(docker_client, ca_bundle=str(pem)).plan(
        dockerfile, context, {"BASE": base_image}, "test"
    )
    assert (context / CA_FILE).read_text() == pem.read_text()
    assert with_ca.tag != without.tag


@pytest.mark.docker
def test_missing_base_image_is_a_one_line_build_error(builder, tmp_path):
    dockerfile, context = make_context(tmp_path)
    with pytest.raises(BuildError, match="base image crucible-nonexistent:nope is not present"):
        builder.plan(dockerfile, context, {"BASE": "crucible-nonexistent:nope"}, "test")


@pytest.mark.docker
@pytest.mark.slow
def test_second_ensure_sends_nothing_to_the_daemon(docker_client, builder, base_image, built_tags, tmp_path):
    from engine.store.duckdb import DuckDBStore

    store = DuckDBStore()
    dockerfile, context = make_context(tmp_path, **{"app.py": "print(1)\n"})
    ref = builder.plan(dockerfile, context, {"BASE": base_image}, "test")
    built_tags.append(ref.tag)
    assert builder.status(ref) == "missing"

    t0 = time.time()
    cold = builder.ensure(ref, store)
    t1 = time.time()
    time.sleep(0.05)  # keep the two windows apart on the daemon's clock
    t2 = time.time()
    warm = builder.ensure(ref)
    t3 = time.time()

    lineage = lineage_of(docker_client, ref.tag, base_image)
    # The filter sees a real build (so an empty result below means something) ...
    cold_events = build_events(docker_client, t0, t1, ref.tag, lineage)
    assert any(e["Type"] == "container" and e["Action"] == "create" for e in cold_events)
    assert any(e["Type"] == "image" and e["Action"] == "tag" for e in cold_events)
    # ... and the cache hit produced none: no build container, no tag.
    assert build_events(docker_client, t2, t3, ref.tag, lineage) == []
    assert (cold.cache_hit, warm.cache_hit) == (False, True)
    assert builder.status(ref) == "cached"
    labels = docker_client.api.inspect_image(ref.tag)["Config"]["Labels"]
    assert labels["crucible.input_hash"] == ref.input_hash and labels["crucible.purpose"] == "test"
    assert "Step 1/" in Path(cold.log_path).read_text()

    builder.ensure(ref, store)
    _, rows = store.query(
        f"select cache_hit, size_bytes > 0 from builds where input_hash = '{ref.input_hash}' order by started_at"
    )
    assert rows == [(False, True), (True, True)]


_ENSURE_IN_CHILD = """
import json, sys, time
from pathlib import Path
import docker
from engine.build.images import ContentAddressedBuilder
builder = ContentAddressedBuilder(docker.from_env(timeout=600), ca_bundle=None)
ref = builder.plan(Path(sys.argv[1]), Path(sys.argv[2]), {"BASE": sys.argv[3]}, "test")
print("ready", flush=True)
sys.stdin.readline()  # "go": both start together, however long each took to get here
record = builder.ensure(ref)
print(json.dumps({"tag": record.tag, "cache_hit": record.cache_hit, "seconds": record.seconds}))
"""


@pytest.mark.docker
@pytest.mark.slow
def test_concurrent_ensure_of_one_tag_builds_it_once(docker_client, builder, base_image, built_tags, tmp_path):
    slow = "ARG BASE\nFROM ${BASE}\nCOPY nonce /nonce\nRUN sleep 5 && echo built > /built\n"
    dockerfile, context = make_context(tmp_path, dockerfile=slow)
    ref = builder.plan(dockerfile, context, {"BASE": base_image}, "test")
    built_tags.append(ref.tag)
    argv = [sys.executable, "-c", _ENSURE_IN_CHILD, str(dockerfile), str(context), base_image]
    children = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=PROJECT)
        for _ in range(2)
    ]
    for child in children:  # each has imported docker and planned
        assert child.stdout is not None and child.stderr is not None
        line = child.stdout.readline()
        assert line == b"ready\n", (line, child.stderr.read().decode() if not line else "")
    start_at = time.time()
    for child in children:  # "go" to both before waiting for either
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err.decode()
        results.append(json.loads(out))
    t1 = time.time()

    assert sorted(r["cache_hit"] for r in results) == [False, True]
    assert {r["tag"] for r in results} == {ref.tag}
    waited = next(r for r in results if r["cache_hit"])
    assert waited["seconds"] > 1.0  # it overlapped the build and waited on the lock
    tags = [e for e in build_events(docker_client, start_at - 1, t1, ref.tag, set()) if e["Action"] == "tag"]
    assert len(tags) == 1


@pytest.mark.docker
@pytest.mark.slow
def test_failing_run_step_raises_build_error_naming_the_log(builder, base_image, built_tags, tmp_path):
    # The failing step comes first, so no intermediate image is left behind.
    marker = uuid.uuid4().hex
    failing = f"ARG BASE\nFROM ${{BASE}}\nRUN echo about-to-fail {marker} && exit 7\n"
    dockerfile, context = make_context(tmp_path, dockerfile=failing)
    ref = builder.plan(dockerfile, context, {"BASE": base_image}, "test")
    built_tags.append(ref.tag)
    from engine.store.duckdb import DuckDBStore

    store = DuckDBStore()
    with pytest.raises(BuildError) as caught:
        builder.ensure(ref, store)
    _, rows = store.query(f"select cache_hit, error from builds where input_hash = '{ref.input_hash}'")
    assert rows == [(False, str(caught.value))]  # the failure is recorded, not lost
    head, *tail = str(caught.value).splitlines()
    log_path = Path(head.split("(log: ")[1].split(")")[0])
    assert log_path.is_file() and "about-to-fail" in log_path.read_text()
    # The step and its exit code on one line, then what the step printed (not Docker's line,
    # which repeats the step's shell text).
    assert re.fullmatch(
        rf"build step \d+/\d+ of {re.escape(ref.tag)} failed with exit code 7 "
        rf"\(log: {re.escape(str(log_path))}\); its last lines:",
        head,
    ), head
    assert tail == [f"    about-to-fail {marker}"]
    assert builder.status(ref) == "missing"


# ------------------------------------------------------------------ Dockerfile.hud

_PROBE = r"""
echo "workdir=$(pwd)"
echo "files=$(find /app -type f ! -name .install-saw-ca | sort | tr '\n' ,)"
echo "git_in_app=$(test -e /app/.git && echo yes || echo no)"
echo "not_agent_owned=$(find /app ! -uid 1000 -o ! -gid 1000 | wc -l)"
echo "crucible_dir=$(stat -c %a:%U:%G /var/lib/crucible)"
echo "vault_head=$(git --git-dir=/var/lib/crucible/vault/repo.git rev-parse HEAD)"
echo "agent_reads_vault=$(setpriv --reuid 1000 --regid 1000 --clear-groups ls /var/lib/crucible >/dev/null 2>&1 && echo yes || echo no)"
echo "bundle_left=$(test -e /var/lib/crucible/repo.bundle && echo yes || echo no)"
echo "agent=$(id -u agent):$(id -g agent)"
echo "tree=$(command -v tree)"
echo "install_saw=$(cat /app/.install-saw-ca)"
echo "ca_in_store=$(grep -c -F "$CA_LINE" /etc/ssl/certs/ca-certificates.crt)"
"""


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture(scope="module")
def hud_facts(docker_client, base_image, built_tags, tmp_path_factory):
    """What a probe sees in Dockerfile.hud built from the base with a one-branch bundle and a custom CA."""
    root = tmp_path_factory.mktemp("hud")
    repo, context = root / "repo", root / "context"
    repo.mkdir()
    context.mkdir()
    _git(repo, "init", "-q", "-b", "demo_baseline")
    (repo / "calc.py").write_text(f"# {uuid.uuid4().hex}\ndef add(a, b):\n    return a + b\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text("from calc import add\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "baseline")
    _git(repo, "bundle", "create", str(context / "repo.bundle"), "demo_baseline")
    ca = root / "ca.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=crucible-test-ca",
            "-keyout",
            str(root / "ca.key"),
            "-out",
            str(ca),
        ],
        check=True,
        capture_output=True,
    )
    builder = ContentAddressedBuilder(docker_client, ca_bundle=str(ca))
    args = {
        "BASE": base_image,
        "BASELINE_REF": "demo_baseline",
        "SYSTEM_PACKAGES": "tree",
        "INSTALL_CMD": 'echo "$SSL_CERT_FILE" > .install-saw-ca',
    }
    ref = builder.plan(PROJECT / "Dockerfile.hud", context, args, "test")
    built_tags.append(ref.tag)
    builder.ensure(ref)
    ca_line = ca.read_text().splitlines()[1]
    out = docker_client.containers.run(ref.tag, ["sh", "-c", _PROBE], environment={"CA_LINE": ca_line}, remove=True)
    facts = dict(line.split("=", 1) for line in out.decode().splitlines())
    return facts, _git(repo, "rev-parse", "HEAD").strip(), ref.tag


@pytest.mark.docker
@pytest.mark.slow
def test_hud_image_has_tree_without_git_owned_by_agent_and_a_root_only_vault(hud_facts):
    facts, baseline_sha, _ = hud_facts
    assert facts["workdir"] == "/app"
    assert facts["files"] == "/app/calc.py,/app/tests/test_calc.py,"
    assert facts["git_in_app"] == "no"
    assert facts["not_agent_owned"] == "0"
    assert facts["crucible_dir"] == "700:root:root"
    assert facts["vault_head"] == baseline_sha
    assert facts["agent_reads_vault"] == "no"
    assert facts["bundle_left"] == "no"
    assert facts["agent"] == "1000:1000"


@pytest.mark.docker
@pytest.mark.slow
def test_hud_build_installs_system_packages_and_forwards_the_ca(hud_facts):
    facts, _, _ = hud_facts
    assert facts["tree"] == "/usr/bin/tree"
    assert facts["ca_in_store"] == "1"  # the custom CA joined the image's trust store
    assert facts["install_saw"] == "/etc/crucible/ca.pem"  # INSTALL_CMD ran with SSL_CERT_FILE set


@pytest.mark.docker
@pytest.mark.slow
def test_hud_instance_build_keeps_the_instance_repo_and_needs_no_bundle(
    docker_client, builder, hud_facts, built_tags, tmp_path
):
    _, baseline_sha, instance_image = hud_facts  # stands in for an instance image carrying /app
    context = tmp_path / "instance-context"
    context.mkdir()
    args = {"BASE": instance_image, "INSTANCE_ID": "demo__repo-1", "INSTALL_CMD": "touch .instance-install"}
    ref = builder.plan(PROJECT / "Dockerfile.hud", context, args, "test")
    built_tags.append(ref.tag)
    builder.ensure(ref)
    script = "ls /app; test -e /app/.instance-install && echo installed; git --git-dir=/var/lib/crucible/vault/repo.git rev-parse HEAD"
    out = docker_client.containers.run(ref.tag, ["sh", "-c", script], remove=True).decode().split()
    assert out == ["calc.py", "tests", "installed", baseline_sha]
