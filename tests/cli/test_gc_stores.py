"""Two stores on one Docker engine: ``crucible gc`` of one removes only the images its own builds
made, and lists the other's as not touched, naming the store that built them."""

from __future__ import annotations

import uuid
from pathlib import Path

import docker
import pytest

from engine.build.images import STORE_LABEL, ContentAddressedBuilder
from engine.cli import main as cli
from engine.store.duckdb import DuckDBStore

MARK = uuid.uuid4().hex[:12]


def build_in(home: Path, monkeypatch, client, base: str, name: str) -> tuple[str, str]:
    """An image built by the real builder for the store of ``home``: (its tag, that store's path)."""
    monkeypatch.setenv("CRUCIBLE_HOME", str(home))
    context = home.parent / f"ctx-{name}"
    context.mkdir(parents=True)
    (context / "Dockerfile").write_text(f"FROM {base}\nRUN echo {MARK}-{name} > /gc-mark\n")
    builder = ContentAddressedBuilder(client, ca_bundle=None, network_mode="none")
    store = DuckDBStore()
    ref = builder.plan(context / "Dockerfile", context, {}, "task")
    builder.ensure(ref, store)
    return ref.tag, str(store.path)


def gc(capsys, *args: str) -> list[str]:
    assert cli.main(["gc", "--min-age", "0", *args]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.docker
@pytest.mark.slow
def test_gc_removes_its_own_unreferenced_images_and_leaves_another_stores_alone(
    tmp_path, monkeypatch, capsys, docker_client, base_image
):
    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    home_a, home_b = tmp_path / "a" / "home", tmp_path / "b" / "home"
    tag_b, store_b = build_in(home_b, monkeypatch, docker_client, base_image, "b")
    tag_a, store_a = build_in(home_a, monkeypatch, docker_client, base_image, "a")  # CRUCIBLE_HOME is A's now
    try:
        assert docker_client.images.get(tag_b).labels[STORE_LABEL] == store_b != store_a

        theirs = gc(capsys, "--match", tag_b)
        assert [line.split()[:2] for line in theirs[:-1]] == [["kept", tag_b]], theirs
        assert f"not touched: built by another store ({store_b})" in theirs[0], theirs
        assert "1 image tag(s) built by another store are not touched" in theirs[-1], theirs
        assert docker_client.images.get(tag_b)

        ours = gc(capsys, "--match", tag_a)
        assert [line.split()[:2] for line in ours[:-1]] == [["removed", tag_a]], ours
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(tag_a)

        monkeypatch.setenv("CRUCIBLE_HOME", str(home_b))  # B's own gc does collect it
        assert [line.split()[:2] for line in gc(capsys, "--match", tag_b)[:-1]] == [["removed", tag_b]]
    finally:
        for tag in (tag_a, tag_b):
            try:
                docker_client.api.remove_image(tag)
            except docker.errors.ImageNotFound:
                pass


@pytest.mark.docker
@pytest.mark.slow
def test_a_setup_layer_goes_with_the_image_under_it_and_before_it(
    tmp_path, monkeypatch, capsys, docker_client, base_image
):
    """A setup layer (engine/plan/setup_layer.py) is named by no run, and remade in a second: it goes
    whether or not the image under it is kept, and before that image (it is its child)."""
    from store_records import make_run

    from engine.models import SetupScript
    from engine.plan.setup_layer import PURPOSE, setup_layer_inputs

    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    home = tmp_path / "home"
    task_tag, _ = build_in(home, monkeypatch, docker_client, base_image, "under-a-layer")
    builder = ContentAddressedBuilder(docker_client, ca_bundle=None, network_mode="none")
    store = DuckDBStore()
    inputs = setup_layer_inputs(SetupScript(argv=("touch", f"/set-up-{MARK}")), task_tag)
    layer = builder.plan(Path(inputs.dockerfile), Path(inputs.context_dir), inputs.build_args, PURPOSE)
    builder.ensure(layer, store)
    try:
        store.record_run(make_run("uses-the-image-under-it", image_tag=task_tag))
        kept = [line.split()[:2] for line in gc(capsys, "--match", "crucible/*:*")[:-1]]
        assert ["removed", layer.tag] in kept and not any(task_tag in line for line in kept), kept
        assert docker_client.images.get(task_tag)
        builder.ensure(layer, store)

        store.record_run(make_run("uses-the-image-under-it", image_tag="crucible/task:another"))
        both = [line.split()[:2] for line in gc(capsys, "--match", "crucible/*:*")[:-1]]
        assert ["removed", layer.tag] in both and ["removed", task_tag] in both, both
        assert both.index(["removed", layer.tag]) < both.index(["removed", task_tag])
        for tag in (layer.tag, task_tag):
            with pytest.raises(docker.errors.ImageNotFound):
                docker_client.images.get(tag)
    finally:
        for tag in (layer.tag, task_tag):
            try:
                docker_client.images.remove(tag, force=True)
            except docker.errors.ImageNotFound:
                pass
