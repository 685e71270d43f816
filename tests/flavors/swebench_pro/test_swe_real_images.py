"""SWE-bench Pro on images in the shapes the official ones have (tests/swe_synth.py,
``real_shape_instances``): an image whose entrypoint is ``/bin/bash`` (709 of the 731 official
base Dockerfiles end so), one whose entrypoint script runs its set-up and ``exec "$@"``, and one
whose Python is a venv first on PATH, tested through a runner that rebuilds the environment from
HOME and PATH as ``ansible-test units`` does (so neither PYTHONPATH nor, in a venv, the user
site-packages reaches pytest). The gold patch resolves and the empty one does not under ``none``
and ``strict``, through ``crucible check`` and ``crucible swe eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import swe_synth

pytestmark = [pytest.mark.docker, pytest.mark.slow]

IDS = (swe_synth.BASH_ENTRY, swe_synth.SCRIPT_ENTRY, swe_synth.VENV_LEDGER)
crucible = swe_synth.crucible


@pytest.fixture(scope="module")
def synth(tmp_path_factory, base_image):
    with swe_synth.pointed_at(
        swe_synth.generate(tmp_path_factory.mktemp("swe-real"), base_image, real_shapes=True)
    ) as generated:
        yield generated


def query(sql: str) -> list[dict]:
    proc = crucible("query", sql, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_synthetic_images_have_the_official_shapes(synth, docker_client):
    images = {i.instance_id: docker_client.images.get(i.image).attrs["Config"] for i in synth["instances"]}
    assert images[swe_synth.BASH_ENTRY]["Entrypoint"] == ["/bin/bash"]
    assert images[swe_synth.SCRIPT_ENTRY]["Entrypoint"] == ["/usr/local/bin/entrypoint.sh"]
    assert images[swe_synth.VENV_LEDGER]["Entrypoint"] == ["/bin/bash"]
    env = dict(item.split("=", 1) for item in images[swe_synth.VENV_LEDGER]["Env"])
    assert env["PATH"].startswith("/opt/venv/bin:")
    # the venv's python ignores the user site-packages, which is where the plugin went before
    venv = next(i for i in synth["instances"] if i.instance_id == swe_synth.VENV_LEDGER)
    out = docker_client.containers.run(
        venv.image,
        ["-c", "python3 -c 'import site, sys, pytest; print(sys.prefix, site.ENABLE_USER_SITE)'"],
        remove=True,
    ).decode()
    assert out.split() == ["/opt/venv", "False"]


@pytest.mark.parametrize("integrity", ["none", "strict"])
def test_gold_resolves_and_empty_does_not_through_check(synth, integrity):
    proc = crucible("check", "task=glob(swebench_pro/*)", f"integrity={integrity}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 3 task(s) ship: golden 1, baseline 0" in proc.stdout


@pytest.mark.parametrize("integrity", ["none", "strict"])
def test_gold_resolves_and_empty_does_not_through_swe_eval(synth, tmp_path, integrity):
    rows = {i.instance_id: i.row for i in synth["instances"]}
    for kind, patch in (("gold", lambda iid: rows[iid]["patch"]), ("empty", lambda iid: "")):
        path = tmp_path / f"{kind}.json"
        path.write_text(
            json.dumps([{"instance_id": iid, "patch": patch(iid), "prefix": f"{kind}-{integrity}"} for iid in IDS])
        )
        out = tmp_path / kind
        proc = crucible("swe", "eval", str(path), f"integrity={integrity}", "--output", str(out))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert json.loads((out / "eval_results.json").read_text()) == {iid: kind == "gold" for iid in IDS}


def test_the_plugin_is_put_in_the_venv_that_runs_the_tests_and_the_grade_says_where(synth, tmp_path):
    venv = next(i for i in synth["instances"] if i.instance_id == swe_synth.VENV_LEDGER)
    path = tmp_path / "gold.json"
    path.write_text(json.dumps([{"instance_id": venv.instance_id, "patch": venv.row["patch"], "prefix": "venv-gold"}]))
    proc = crucible("swe", "eval", str(path), "integrity=strict", "--output", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [record] = query("select reward, raw_grade from runs where agent = 'venv-gold' order by started_at desc limit 1")
    raw = record["raw_grade"] if isinstance(record["raw_grade"], dict) else json.loads(record["raw_grade"])
    assert record["reward"] == 1.0
    pythons = raw["junit"]["pythons"]
    assert any(
        p["python"] == "/opt/venv/bin/python3"
        and p["venv"] == "/opt/venv"
        and p["site"].startswith("/opt/venv/lib/python3.")
        for p in pythons
    ), pythons
    assert raw["junit"]["reports"] == 2  # one pytest session per selected file, each reported


def test_the_grade_names_the_interpreter_where_the_plugin_cannot_go(synth, tmp_path):
    """A run script that makes a venv of its own at run time, after crucible put the plugin where
    the image's interpreters look: no report, and the reason names what was found and where the
    plugin went, so the user sees which Python ran the tests without it."""
    venv = next(i for i in synth["instances"] if i.instance_id == swe_synth.VENV_LEDGER)
    assets = Path(synth["assets"]) / "run_scripts" / venv.instance_id / "run_script.sh"
    original = assets.read_text()
    own = original.replace(
        "cd /app\n",
        "cd /app\npython3 -m venv --without-pip --clear /tmp/own-venv\n"
        'echo /usr/lib/python3/dist-packages > "$(echo /tmp/own-venv/lib/python3.*/site-packages)/d.pth"\n'
        "export PATH=/tmp/own-venv/bin:$PATH\n",
        1,
    )
    assert own != original
    assets.write_text(own)
    try:
        path = tmp_path / "gold.json"
        path.write_text(
            json.dumps([{"instance_id": venv.instance_id, "patch": venv.row["patch"], "prefix": "own-venv"}])
        )
        proc = crucible("swe", "eval", str(path), "integrity=strict", "--output", str(tmp_path / "out"))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        assets.write_text(original)
    [record] = query("select reward, raw_grade from runs where agent = 'own-venv' order by started_at desc limit 1")
    raw = record["raw_grade"] if isinstance(record["raw_grade"], dict) else json.loads(record["raw_grade"])
    assert record["reward"] == 0.0
    assert "pytest wrote no JUnit report" in raw["reason"]
    assert "/opt/venv/bin/python3 (venv /opt/venv:" in raw["reason"], raw["reason"]


def test_an_instance_image_no_registry_gives_says_where_images_come_from(synth):
    """crucible pulls an instance's image from its registry where it is not here; where no
    registry gives it (none is reachable from this machine) the one line says so, and how to
    point crucible at images loaded here instead."""
    proc = crucible("check", f"task=swebench_pro/{swe_synth.BASH_ENTRY}", "task.base_image=127.0.0.1:1/sweap-images:x")
    assert proc.returncode != 0
    [line] = proc.stderr.strip().splitlines()
    assert "base image 127.0.0.1:1/sweap-images:x is not present and could not be pulled from its registry" in line
    assert "CRUCIBLE_SWEBENCH_PRO_BASE_IMAGES" in line and "Traceback" not in proc.stdout + proc.stderr
