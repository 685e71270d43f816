"""``crucible rerun`` and ``crucible gc`` through the CLI: real images, containers, store.

gc here only ever sees names this module made: every call passes ``--match`` with a
per-session marker, and reads a store of its own (a private ``CRUCIBLE_HOME``), so the
images other tests in the session (or other sessions on the machine) use are never
candidates. Before the real collection, the dry run must list exactly this module's
unreferenced throwaways, or the test stops there.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

import docker
import pytest

from engine.cli import main as cli
from engine.models import RunRecord, spec_hash_of
from engine.run.records import new_run_id
from engine.store.duckdb import DuckDBStore
from engine.util.codehash import engine_version

ROOT = Path(__file__).resolve().parents[2]
TASK = "sample/last_page"

pytestmark = pytest.mark.docker


def crucible(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def run_count() -> int:
    return DuckDBStore().query("SELECT count(*) FROM runs")[1][0][0]


# ---------------------------------------------------------------- rerun
@pytest.fixture(scope="module")
def golden(docker_client, base_image) -> RunRecord:
    proc = crucible("run", f"task={TASK}", "agent=integration_test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_id = re.search(r"\brun (\S+)  \(", proc.stdout).group(1)
    return DuckDBStore().get_run(run_id)


def rerun_ids(stdout: str) -> tuple[str, str]:
    row = next(line.split() for line in stdout.splitlines() if line.startswith("run "))
    return row[1], row[2]


@pytest.fixture(scope="module")
def first_rerun(golden, docker_client):
    image_id = docker_client.images.get(golden.image_tag).id
    original = DuckDBStore().get_run(golden.run_id).to_dict()
    began = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
    proc = crucible("rerun", golden.run_id)
    return proc, image_id, original, began


@pytest.mark.slow
def test_rerun_reproduces_a_golden_run_as_a_new_run_without_building(golden, first_rerun, docker_client):
    proc, image_id, original, began = first_rerun
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("reproduced: agent integration_test scored 1.0 again")
    old_id, new_id = rerun_ids(proc.stdout)
    assert old_id == golden.run_id and new_id != golden.run_id
    store = DuckDBStore()
    new = store.get_run(new_id)
    assert (new.status, new.reward, new.spec_hash) == ("completed", 1.0, golden.spec_hash)
    assert new.from_cache and new.image_tag == golden.image_tag
    assert Path(new.run_dir).parent == Path(os.environ["CRUCIBLE_HOME"]) / "runs" / "rerun"
    assert json.loads((Path(new.run_dir) / "record.json").read_text())["run_id"] == new_id
    assert store.get_run(golden.run_id).to_dict() == original, "the original run was changed"
    # Nothing was built: the image is the very same one, and every build record since is a cache hit.
    assert docker_client.images.get(golden.image_tag).id == image_id
    _, hits = store.query(
        f"SELECT cache_hit FROM builds WHERE tag = '{golden.image_tag}' AND started_at >= TIMESTAMP '{began}'"
    )
    assert hits and all(hit for (hit,) in hits)


@pytest.mark.slow
def test_a_rerun_can_itself_be_rerun_into_a_chosen_directory(first_rerun, tmp_path):
    _, new_id = rerun_ids(first_rerun[0].stdout)
    into = tmp_path / "again"
    proc = crucible("rerun", new_id, "--into", str(into))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, newest = rerun_ids(proc.stdout)
    assert DuckDBStore().get_run(newest).run_dir == str(into)
    assert json.loads((into / "rerun.json").read_text())["rerun_of"] == new_id


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_rerun_of_an_unknown_run_is_one_line_and_exit_2(docker_client):
    proc = crucible("rerun", "no-such-run-4711")
    assert proc.returncode == 2
    assert one_line(proc.stderr) == "crucible rerun: no run 'no-such-run-4711' in the store"


def stored_copy(
    golden: RunRecord, tmp_path: Path, *, engine: str | None = None, golden_pin: str | None = None
) -> RunRecord:
    """The golden run as if stored by another engine, or with edited pins: a copy with its own
    id and run directory (the original's stay untouched)."""
    copy_dir = tmp_path / "copy"
    shutil.copytree(golden.run_dir, copy_dir)
    spec = dict(golden.spec)
    if engine:
        spec["engine_version"] = engine
    if golden_pin:
        pins = json.loads((copy_dir / "pins.json").read_text())
        (copy_dir / "pins.json").write_text(json.dumps({**pins, "golden": golden_pin}))
    record = dataclasses.replace(
        golden, run_id=new_run_id(), spec=spec, spec_hash=spec_hash_of(spec), run_dir=str(copy_dir)
    )
    DuckDBStore().record_run(record)
    return record


def rerun_in_process(capsys, run_id: str) -> tuple[int, str, str]:
    """``crucible rerun`` through the CLI's ``main``, in this process (so the engine version
    it plans with is the one this test computes, whatever is edited meanwhile)."""
    code = cli.main(["rerun", run_id])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "change, says",
    [
        ("engine", "the engine changed (engine version 00000000c0ffee00 -> {now})"),
        ("pins", "a pinned ref differs (task.pins.golden)"),
    ],
)
def test_rerun_refuses_in_one_line_when_the_run_would_plan_differently(golden, tmp_path, capsys, change, says):
    if change == "engine":
        copy = stored_copy(golden, tmp_path, engine="00000000c0ffee00")
    else:
        copy = stored_copy(golden, tmp_path, golden_pin=golden.spec["task"]["pins"]["baseline"])
    before = run_count()
    code, out, err = rerun_in_process(capsys, copy.run_id)
    assert code == 4, out + err
    line = one_line(err)
    assert says.format(now=engine_version()) in line and line.endswith("nothing was run"), line
    assert run_count() == before and out == ""


def test_rerun_of_a_run_whose_directory_is_gone_names_the_path(golden, tmp_path, capsys):
    copy = stored_copy(golden, tmp_path)
    shutil.rmtree(copy.run_dir)
    code, _, err = rerun_in_process(capsys, copy.run_id)
    assert code == 2
    assert one_line(err) == (
        f"crucible rerun: run {copy.run_id}: its run directory {copy.run_dir} is gone; it cannot be re-planned"
    )


@pytest.mark.parametrize(
    "deterministic, code, says",
    [
        (
            True,
            1,
            "not reproducible: agent integration_test is deterministic but its verdict changed: "
            "completed reward 1.0 -> completed reward 0.0",
        ),
        (False, 0, "agent integration_test is not deterministic: reward 1.0 then 0.0 (reported, not compared)"),
    ],
)
def test_a_changed_reward_fails_a_deterministic_rerun_and_is_only_reported_otherwise(deterministic, code, says):
    from engine.cli.rerun import Rerun, conclusion

    old = RunRecord(
        run_id="a",
        spec_hash="h" * 64,
        spec={},
        status="completed",
        task_id="t",
        agent="integration_test",
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested="vault",
        integrity_obtained="vault",
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at="",
        reward=1.0,
    )
    new = dataclasses.replace(old, run_id="b", reward=0.0)
    assert conclusion(Rerun(original=old, record=new, deterministic=deterministic)) == (says, code)


# ---------------------------------------------------------------- gc
MARK = uuid.uuid4().hex[:12]
"""In every name this module gives gc, and in its --match: gc sees nothing else."""


def throwaway_image(client: docker.DockerClient, base: str, tag: str, payload: bytes) -> str:
    """A ``crucible/task`` image FROM the base, with one layer of its own (a committed file)."""
    container = client.containers.create(base, ["true"])
    try:
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            info = tarfile.TarInfo(f"gc-{MARK}.bin")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
        container.put_archive("/", data.getvalue())
        repository, name = tag.split(":")
        # The base's labels are inherited unless overridden: a task image says it is one.
        container.commit(repository=repository, tag=name, conf={"Labels": {"crucible.purpose": "task"}})
    finally:
        container.remove(force=True)
    return tag


def template(home: Path, name: str) -> Path:
    """A local workspace template as ``runtime=local`` lays one out (a ready mark, a tree)."""
    path = home / "local" / "templates" / name
    (path / "app").mkdir(parents=True)
    (path / "app" / "main.py").write_bytes(os.urandom(4096))
    (path / ".ready").write_text("{}")
    return path


def store_run(image_tag: str) -> None:
    """A stored run that refers to ``image_tag`` (the store is the only thing gc asks)."""
    DuckDBStore().record_run(
        RunRecord(
            run_id=new_run_id(),
            spec_hash="0" * 64,
            spec={},
            status="completed",
            task_id="gc/test",
            agent="noop",
            model=None,
            flavor="coding",
            runtime="docker",
            integrity_requested="vault",
            integrity_obtained="vault",
            attempt=0,
            seed=0,
            sweep_id=None,
            started_at=datetime.now(UTC).isoformat(),
            ended_at=datetime.now(UTC).isoformat(),
            reward=0.0,
            image_tag=image_tag,
        )
    )


@pytest.fixture
def gc_world(docker_client, base_image, tmp_path, monkeypatch):
    """Throwaways: referenced image and template, unreferenced ones, one image a live container
    uses, and an extra ``crucible/task`` tag on the base image. All removed afterwards."""
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    names = {k: f"crucible/task:gctest-{MARK}-{k}" for k in ("kept", "unused", "in-use", "base")}
    for key in ("kept", "unused", "in-use"):
        throwaway_image(docker_client, base_image, names[key], os.urandom(64 * 1024))
    docker_client.api.tag(base_image, *names["base"].split(":"))
    live = docker_client.containers.run(names["in-use"], ["sleep", "300"], detach=True, init=True, network_mode="none")
    home = Path(os.environ["CRUCIBLE_HOME"])
    referenced_tpl, unused_tpl = (template(home, MARK + suffix) for suffix in ("0" * 20, "1" * 20))
    store_run(names["kept"])
    store_run(f"local/task:{referenced_tpl.name[:24]}")
    world = {
        **names,
        "tpl-kept": referenced_tpl,
        "tpl-unused": unused_tpl,
        "tpl-unused-name": f"local/task:{unused_tpl.name[:24]}",
    }
    yield world
    live.remove(force=True)
    for key in ("kept", "unused", "in-use", "base"):
        try:
            docker_client.api.remove_image(names[key])  # by tag: the base image only loses the extra tag
        except docker.errors.ImageNotFound:
            pass


def gc(capsys, *args: str) -> list[str]:
    assert cli.main(["gc", "--match", f"*{MARK}*", *args]) == 0
    return capsys.readouterr().out.splitlines()


def names_after(lines: list[str], verb: str) -> set[str]:
    return {line[len(verb) :].split()[0] for line in lines if line.startswith(verb) and "/task:" in line}


@pytest.mark.slow
def test_gc_removes_only_unreferenced_images_and_templates_and_is_idempotent(
    gc_world, capsys, docker_client, base_image
):
    w = gc_world
    # By default gc keeps what is younger than an hour (a run may be about to use it): all of it here.
    young = gc(capsys)
    assert names_after(young, "removed") == set(), young
    for name in (w["unused"], w["tpl-unused-name"]):  # each unused one is named, and kept for its age
        about = [line for line in young if name in line]
        assert about and all("younger than 3600 s" in line for line in about), (name, young)
    assert w["tpl-unused"].is_dir() and docker_client.images.get(w["unused"])

    dry = gc(capsys, "--dry-run", "--min-age", "0")
    to_go = {w["unused"], w["tpl-unused-name"]}
    assert names_after(dry, "would remove") == to_go, dry  # the safety gate before anything is removed
    assert names_after(dry, "kept") == {w["in-use"], w["base"]}, dry
    assert "nothing was removed (--dry-run)" in dry[-1]
    assert docker_client.images.get(w["unused"]) and w["tpl-unused"].is_dir()

    done = gc(capsys, "--min-age", "0")
    assert names_after(done, "removed") == to_go, done
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(w["unused"])
    assert not w["tpl-unused"].exists() and w["tpl-kept"].is_dir()
    assert docker_client.images.get(w["kept"]) and docker_client.images.get(w["in-use"])
    assert docker_client.images.get(w["base"]).id == docker_client.images.get(base_image).id
    assert any(w["in-use"] in line and "in use by container" in line for line in done), done
    assert any(w["base"] in line and "the base image" in line for line in done), done
    freed = int(re.search(r"freed (\d+) bytes", done[-1]).group(1))
    assert freed >= 64 * 1024 + 4096, done[-1]

    again = gc(capsys, "--min-age", "0")
    assert names_after(again, "removed") == set()
    assert "removed 0 image tag(s) and 0 local template(s), freed 0 bytes" in again[-1]
