"""Setup layers (``engine/plan/setup_layer.py``): a flavor's setup of its spec alone, run once into
an image over the agent's, where every run's workspace then starts set up.

What must hold: the layer is named by its spec's setup alone (another seed, the same layer;
another integrity mode, another), a workspace started from it is what the run's own setup would
have made (the repo, its history or lack of one, its ownership, the vault's mode, git's system
config), a golden run from it still passes, and a layer that cannot be built costs nothing but
the time: its runs set themselves up, and a setup that fails is still each run's own error,
recorded with its phase. Real plans of ``sample/last_page``, real builds and runs on Docker.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "sample/last_page"

FINGERPRINT = r"""
set -u
cd /app
git() { command git -c safe.directory='*' "$@"; }  # the tree is uid 1000's under the uid wall
git rev-parse HEAD
git log --format='%H %an %ad %s' --date=raw
git status --porcelain --untracked-files=all
git for-each-ref --format='%(refname) %(objectname)'
git config --system --get-all safe.directory || true
find /app -path /app/.git/index -prune -o -printf '%U:%G %m %y %p\n' | LC_ALL=C sort
stat -c '%U:%G %a %n' /var/lib/crucible /var/lib/crucible/vault
"""
"""What the agent finds: the repo, its history, its refs, its ownership and modes, the vault's."""


def _session_and_plan(*overrides: str):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config([f"task={TASK}", *overrides]))
    session = session_for(typed)
    return session, plan(typed, builder=session.builder)


def _provisions(session, monkeypatch) -> list[tuple[str, str]]:
    """Each workspace the session's runtime provisions from now on: (its purpose, its image's tag)."""
    provisioned: list[tuple[str, str]] = []
    original = session.runtime.provision

    def recording(image, **kwargs):
        provisioned.append((kwargs["purpose"], image.tag))
        return original(image, **kwargs)

    monkeypatch.setattr(session.runtime, "provision", recording)
    return provisioned


def test_the_layer_is_named_by_the_setup_of_the_spec_alone(base_image):
    _, strict_1 = _session_and_plan("agent=noop", "seed=1")
    _, strict_2 = _session_and_plan("agent=integration_test", "seed=2")
    _, none = _session_and_plan("agent=noop", "integrity=none")
    assert strict_1.setup_image is not None and strict_1.setup_image.purpose == "setup"
    assert strict_1.setup_image.tag.startswith("crucible/setup:")
    # Another seed, another agent (neither enters the setup): the same layer, over the task image.
    assert strict_2.setup_image == strict_1.setup_image
    assert dict(strict_1.setup_image.build_args)["BASE"] == strict_1.image.tag
    # Another integrity mode sets the repo up otherwise (its history kept): another layer.
    assert none.setup_image is not None and none.setup_image.tag != strict_1.setup_image.tag
    # The spec does not name it: it is derived from what the spec pins.
    assert "setup_image" not in json.dumps(strict_1.spec.to_dict())


def test_a_builder_with_templates_of_its_own_gets_no_layer(base_image):
    from engine.plan.spec import _setup_layer
    from envs.coding.flavor import CodingFlavor

    session, planned = _session_and_plan("agent=noop")
    templates = SimpleNamespace(default_base="host")  # runtime=local's builder: nothing layers over its templates
    assert _setup_layer(CodingFlavor(), planned.spec, templates, planned.image) is None  # type: ignore[arg-type]
    assert _setup_layer(object(), planned.spec, session.builder, planned.image) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["strict", "none"])
def test_a_workspace_from_the_layer_is_what_the_runs_own_setup_makes(base_image, mode):
    from engine.interfaces import ROOT_UID
    from envs.coding.repo import setup_repo

    session, planned = _session_and_plan("agent=noop", f"integrity={mode}")
    for image in (*planned.images, planned.setup_image):
        session.builder.ensure(image, session.store)

    async def fingerprints() -> tuple[str, str]:
        runtime = session.runtime
        layered = runtime.provision(planned.setup_image, run_id="test-setup-layer", network=False, purpose="agent")
        plain = runtime.provision(planned.image, run_id="test-setup-layer", network=False, purpose="agent")
        async with layered as from_layer, plain as set_up_here:
            await setup_repo(set_up_here, planned.spec.task, planned.spec.integrity)
            seen = []
            for ws in (from_layer, set_up_here):
                result = await ws.exec(["bash", "-c", FINGERPRINT], user=ROOT_UID, timeout=60)
                assert result.ok, result.text()
                seen.append(result.stdout.decode())
            return seen[0], seen[1]

    from_layer, set_up_here = asyncio.run(fingerprints())
    assert from_layer == set_up_here
    assert "/app/.git" in from_layer and "crucible/app" not in from_layer
    if mode == "strict":  # a fresh one-commit repo, uid 1000's, the vault root's alone
        assert from_layer.splitlines()[1].endswith("baseline") and "1000:1000" in from_layer
        assert "root:root 700 /var/lib/crucible\n" in from_layer


def test_a_golden_run_starts_from_the_layer_and_passes(base_image, monkeypatch):
    from engine.run.batch import run_one

    session, planned = _session_and_plan("agent=integration_test", "seed=7301")
    provisioned = _provisions(session, monkeypatch)
    record = asyncio.run(run_one(planned, session))
    assert (record.status, record.reward) == ("completed", 1.0), (record.error, record.raw_grade)
    assert ("agent", planned.setup_image.tag) in provisioned
    assert ("grade", planned.image.tag) in provisioned  # grading never starts from it


def test_a_layer_that_cannot_be_built_leaves_each_run_to_fail_in_its_own_setup(base_image, monkeypatch, caplog):
    import envs.coding.repo as repo
    from engine.models import SetupScript
    from engine.run.batch import run_one

    broken = SetupScript(
        argv=("bash", "-c", "echo 'crucible: the vault is not what this task expects' >&2; exit 3"),
        env=(("LANG", "C"),),
    )
    monkeypatch.setattr(repo, "setup_command", lambda task, integrity: broken)
    session, planned = _session_and_plan("agent=noop", "seed=7302")
    assert planned.setup_image is not None
    record = asyncio.run(run_one(planned, session))
    assert (record.status, record.error_phase) == ("error", "setup")
    assert "repo setup failed in /app" in record.error and "not what this task expects" in record.error
    assert any("set up in each run's workspace" in m for m in caplog.messages)
    _, rows = session.store.query(
        f"SELECT error FROM builds WHERE tag = '{planned.setup_image.tag}' ORDER BY started_at DESC LIMIT 1"
    )
    assert rows and "not what this task expects" in rows[0][0]  # the failed build is on record too


def test_the_layers_command_runs_as_written_in_its_directory_over_the_images_environment(base_image, docker_client):

    from engine.config.compose import compose_config, to_typed
    from engine.models import SetupScript
    from engine.plan.setup_layer import PURPOSE, setup_layer_inputs
    from engine.run.session import session_for

    session = session_for(to_typed(compose_config([f"task={TASK}", "agent=noop"])))
    words = ["two words", "it's", '"quoted"', "$HOME", "back\\slash", "line\nbreak", "ünïcode", "a=b", ""]
    script = SetupScript(
        argv=(
            "bash",
            "-c",
            'pwd > /setup.out; printf "[%s]\\n" "$@" >> /setup.out; echo "$HOME $CRUCIBLE_X" >> /setup.out',
            "x",
            *words,
        ),
        env=(("CRUCIBLE_X", "set=here"), ("HOME", "/nonexistent-home")),
        cwd="/tmp",
    )
    inputs = setup_layer_inputs(script, base_image)
    image = session.builder.plan(Path(inputs.dockerfile), Path(inputs.context_dir), inputs.build_args, PURPOSE)
    session.builder.ensure(image, session.store)
    out = docker_client.containers.run(image.tag, ["cat", "/setup.out"], remove=True).decode()
    assert out == "/tmp\n" + "".join(f"[{w}]\n" for w in words) + "/nonexistent-home set=here\n"


def test_with_setup_layers_off_each_run_sets_its_workspace_up_itself(base_image, monkeypatch):
    from engine.run.batch import run_one

    session, planned = _session_and_plan("agent=integration_test", "seed=7303", "build.setup_layers=false")
    assert planned.setup_image is None
    provisioned = _provisions(session, monkeypatch)
    record = asyncio.run(run_one(planned, session))
    assert (record.status, record.reward) == ("completed", 1.0), (record.error, record.raw_grade)
    assert sorted(provisioned) == [("agent", planned.image.tag), ("grade", planned.image.tag)]
    # The same spec either way: how the workspace got set up is no part of what the run is.
    _, layered = _session_and_plan("agent=integration_test", "seed=7303")
    assert layered.spec.spec_hash == planned.spec.spec_hash


def test_crucible_build_builds_the_layer_and_a_failing_one_stops_nothing_else(base_image, monkeypatch):
    import envs.coding.repo as repo
    from engine.cli.build import run_build
    from engine.errors import BuildError
    from engine.models import SetupScript

    shown: list[str] = []
    assert run_build([f"task={TASK}", "agent=noop"], dry_run=False, echo=shown.append) == 0
    assert "crucible/setup:" in shown[0] and "crucible/task:" in shown[0]

    broken = SetupScript(argv=("sh", "-c", "echo 'no vault here' >&2; exit 3"), env=(("X", "7304"),))
    monkeypatch.setattr(repo, "setup_command", lambda task, integrity: broken)
    shown.clear()
    with pytest.raises(BuildError, match="sample/last_page"):
        run_build([f"task={TASK}", "agent=noop"], dry_run=False, echo=shown.append)
    rows = {line.split()[0]: line for line in shown[0].splitlines() if line.startswith("crucible/")}
    assert "failed (runs set up in their workspaces)" in next(v for k, v in rows.items() if "setup:" in k)
    assert "cached" in next(v for k, v in rows.items() if "task:" in k)


def test_a_layer_over_an_image_rebuilt_with_other_bytes_is_built_again(base_image, docker_client, tmp_path):
    """An image crucible builds is named by its inputs; one rebuilt under the same tag with other
    bytes (an unpinned install fetching something newer) must not keep a layer over its old self."""
    import uuid

    from engine.build.images import ContentAddressedBuilder
    from engine.models import SetupScript
    from engine.plan.setup_layer import PURPOSE, setup_layer_inputs
    from engine.store.duckdb import DuckDBStore

    mark = uuid.uuid4().hex[:12]
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo {mark} > /task-mark\n")
    builder = ContentAddressedBuilder(docker_client, ca_bundle=None, network_mode="none")
    store = DuckDBStore()
    task = builder.plan(tmp_path / "Dockerfile", tmp_path, {}, "task")
    builder.ensure(task, store)
    inputs = setup_layer_inputs(SetupScript(argv=("touch", f"/set-up-{mark}")), task.tag)
    layer = builder.plan(Path(inputs.dockerfile), Path(inputs.context_dir), inputs.build_args, PURPOSE)
    made: list[str] = []
    try:
        assert not builder.ensure(layer, store).cache_hit and builder.ensure(layer, store).cache_hit
        # The task image again under its tag, other bytes, its labels kept (as a rebuild leaves them).
        box = docker_client.containers.create(task.tag, ["sh", "-c", "echo newer > /task-mark"])
        box.start()
        assert box.wait()["StatusCode"] == 0
        made.append(box.commit(changes=["LABEL crucible.rebuilt=1"]).id)
        box.remove()
        docker_client.images.get(made[0]).tag(task.tag)
        again = builder.ensure(layer, store)
        assert not again.cache_hit, "a layer over the task image's earlier bytes was reused"
        now_under = docker_client.images.get(task.tag).attrs["RootFS"]["Layers"]
        assert docker_client.images.get(layer.tag).attrs["RootFS"]["Layers"][: len(now_under)] == now_under
        assert builder.ensure(layer, store).cache_hit
    finally:
        for image in (layer.tag, task.tag, *made):
            try:
                docker_client.images.remove(image, force=True)
            except Exception:  # noqa: BLE001 - gone already (the last tag took it)
                pass


def test_batches_sharing_what_they_ensured_check_and_record_each_image_once(base_image):
    """A sweep runs each job as a batch of its own: those sharing ``EnsuredImages`` (one per
    session, as ``crucible run -m`` makes) inspect the task image and its setup layer and record
    their builds once between them, however many jobs of the task start at the same moment."""
    from engine.run.batch import BatchJob, EnsuredImages, RunSlots, run_batch

    session, noop = _session_and_plan("agent=noop", "seed=7303")
    _, golden = _session_and_plan("agent=integration_test", "seed=7303")
    tags = [noop.image.tag, noop.setup_image.tag]
    assert golden.image.tag == tags[0] and golden.setup_image.tag == tags[1]  # the same images

    def builds() -> dict[str, int]:
        _, rows = session.store.query(
            f"SELECT tag, count(*) FROM builds WHERE tag IN ('{tags[0]}', '{tags[1]}') GROUP BY tag"
        )
        return dict(rows)

    async def sweep(images: EnsuredImages | None) -> list[BatchJob]:
        slots = RunSlots(2)
        jobs = [BatchJob(noop), BatchJob(golden)]
        await asyncio.gather(*(run_batch([job], session, slots=slots, images=images) for job in jobs))
        return jobs

    before = builds()
    jobs = asyncio.run(sweep(EnsuredImages()))
    shared = builds()
    assert [(j.records[0].status, j.records[0].reward) for j in jobs] == [("completed", 0.0), ("completed", 1.0)]
    assert {tag: shared.get(tag, 0) - before.get(tag, 0) for tag in tags} == {tags[0]: 1, tags[1]: 1}
    asyncio.run(sweep(None))  # each batch its own: each checks and records them again
    assert {tag: builds()[tag] - shared[tag] for tag in tags} == {tags[0]: 2, tags[1]: 2}


def test_images_checked_ahead_are_ensured_once_and_a_missing_one_only_when_a_batch_asks(
    base_image, docker_client, tmp_path
):
    """A sweep checks each first job's images while it plans the next (``EnsuredImages.prefetch``),
    base first: one that exists on its bases is ensured then, in a thread, its build recorded once,
    and the batch that asks finds it done; one that is missing, and every image over it, is left to
    the batch (nothing is built ahead: a later job that cannot be planned ends the sweep first)."""
    import uuid

    from engine.run.batch import EnsuredImages

    session, noop = _session_and_plan("agent=noop", "seed=7304")
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo {uuid.uuid4().hex} > /task-mark\n")
    missing = session.builder.plan(tmp_path / "Dockerfile", tmp_path, {}, "task")
    present = [noop.image, noop.setup_image]
    for image in present:  # as a first sweep over the task leaves them
        session.builder.ensure(image, session.store)
    tags = [image.tag for image in (*present, missing)]

    def builds() -> list[int]:
        listed = ", ".join(f"'{tag}'" for tag in tags)
        _, rows = session.store.query(f"SELECT tag, count(*) FROM builds WHERE tag IN ({listed}) GROUP BY tag")
        return [dict(rows).get(tag, 0) for tag in tags]

    before = builds()
    # A job whose first image is missing: nothing over it is answered ahead (it may be built
    # anew, and what sits on it then with it), so nothing is recorded.
    over_missing = EnsuredImages()
    over_missing.prefetch([missing, *present], session)
    for checked in list(over_missing._early.values()):
        assert checked.result(timeout=120) == {}
    assert builds() == before
    images = EnsuredImages()
    images.prefetch([*present, missing], session)
    images.prefetch(present, session)  # a second job of the task: nothing more
    for checked in list(images._early.values()):
        checked.result(timeout=120)
    try:
        assert session.builder.status(missing) == "missing", "an image was built before a batch asked for it"
        assert [n - b for n, b in zip(builds(), before)] == [1, 1, 0]

        async def batches_ask() -> list[bool]:
            return [await images.ensure(image, session) for image in (*present, missing, *present)]

        assert asyncio.run(batches_ask()) == [True, True, False, True, True]
        assert [n - b for n, b in zip(builds(), before)] == [1, 1, 1], "ensured again, or the missing one never"
        assert session.builder.status(missing) == "cached"
    finally:
        try:
            docker_client.images.remove(missing.tag, force=True)
        except Exception:  # noqa: BLE001 - never built: the assertion above says why
            pass
