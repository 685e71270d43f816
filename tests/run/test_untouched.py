"""A baseline (``noop``) run's capture is that of an untouched workspace, kept once per image
(engine/run/untouched.py): the first such run of an image captures its own workspace and keeps
that; the next starts no agent workspace at all, and its verdict is the same. An agent given
anything to act through, another image, or a kept capture that cannot be read: a workspace.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from engine.models import CapturedSubmission
from engine.run.untouched import UntouchedCaptures, untouched_key, works_alone


def test_a_kept_capture_reads_back_whole(tmp_path):
    kept = UntouchedCaptures(tmp_path / "kept")
    assert kept.lookup("k") is None  # nothing kept yet, and no directory either
    submission = CapturedSubmission(diff="--- a/x\n+++ b/x\n", files_changed=["x"], violations=["tests/t.py"])
    kept.keep("k", submission)
    assert kept.lookup("k") == submission
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["k.json"]  # no temporary file left


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '{"diff": ""}',
        '{"data": {}, "diff": 3, "files_changed": [], "kind": "diff", "violations": []}',
    ],
)
def test_a_kept_capture_that_cannot_be_read_is_no_capture(tmp_path, text):
    kept = UntouchedCaptures(tmp_path)
    (tmp_path / "k.json").write_text(text)
    assert kept.lookup("k") is None
    kept.keep("k", CapturedSubmission(diff=""))  # and the run's own capture replaces it
    assert kept.lookup("k") == CapturedSubmission(diff="")


def test_a_capture_that_cannot_be_kept_costs_only_the_shortcut(tmp_path):
    kept = UntouchedCaptures(tmp_path)
    kept.keep("k", CapturedSubmission(diff="", data={"not json": object()}))
    kept.keep("k", CapturedSubmission(diff=""))  # a file in the way of the directory: the same
    assert kept.lookup("k") == CapturedSubmission(diff="")
    blocked = UntouchedCaptures(tmp_path / "k.json" / "under")
    blocked.keep("k", CapturedSubmission(diff=""))
    assert blocked.lookup("k") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.json"]  # no temporary file left


def test_only_an_agent_given_nothing_works_alone():
    from engine.agents.integration_test import IntegrationTestAgent
    from engine.agents.noop import NoopAgent

    class DeclaresTools:
        needs_workspace = False
        capabilities = ("mcp",)

    class SaysNothing:
        capabilities = ()

    assert works_alone(NoopAgent) and works_alone(NoopAgent())
    assert not works_alone(IntegrationTestAgent)
    assert not works_alone(DeclaresTools)  # it is served tools: it can act on the workspace
    assert not works_alone(SaysNothing)  # an agent that may use its workspace (a coding CLI)


@dataclasses.dataclass
class _Spec:
    """The parts of a planned ``RunSpec`` the coding key reads (a real plan needs the image built)."""

    task: Any
    integrity: Any
    engine_version: str


@pytest.fixture(scope="module")
def coding_spec():
    from engine.config.compose import compose_config, to_typed

    composed = to_typed(compose_config(["task=sample/last_page", "agent=noop"]))
    pins = {"baseline": "1" * 40, "test": "2" * 40, "golden": "3" * 40}  # as planning pins them
    return _Spec(dataclasses.replace(composed.task, pins=pins), composed.integrity, "code-1")


def test_the_coding_key_names_the_image_the_setup_the_mode_and_the_task(coding_spec):
    from envs.coding.flavor import CodingFlavor

    flavor = CodingFlavor()
    key = flavor.untouched_key(coding_spec, "sha256:a", True)
    assert key == flavor.untouched_key(coding_spec, "sha256:a", True)  # a pure function
    assert key != flavor.untouched_key(coding_spec, "sha256:b", True)  # another image
    assert key != flavor.untouched_key(coding_spec, "sha256:a", False)  # the setup run in the workspace
    none = dataclasses.replace(coding_spec, integrity=dataclasses.replace(coding_spec.integrity, uid_wall=False))
    assert key != flavor.untouched_key(none, "sha256:a", True)  # another index, another ownership
    pinned = dataclasses.replace(coding_spec.task, pins={**coding_spec.task.pins, "test": "4" * 40})
    assert key != flavor.untouched_key(dataclasses.replace(coding_spec, task=pinned), "sha256:a", True)
    changed = dataclasses.replace(coding_spec, engine_version="code-2")  # any file of the code
    assert key != flavor.untouched_key(changed, "sha256:a", True)


def test_a_flavor_that_sets_up_or_captures_its_own_way_has_no_key(coding_spec):
    from envs.coding.flavor import CodingFlavor

    class CapturesOtherwise(CodingFlavor):
        async def capture(self, ws, spec):
            raise AssertionError("never called here")

    class SetsUpOtherwise(CodingFlavor):
        async def setup(self, ws, spec, *, script_done=False):
            raise AssertionError("never called here")

    assert CodingFlavor().untouched_key(coding_spec, "sha256:a", True) is not None
    assert CapturesOtherwise().untouched_key(coding_spec, "sha256:a", True) is None
    assert SetsUpOtherwise().untouched_key(coding_spec, "sha256:a", True) is None


def test_no_key_without_an_image_id_or_for_a_flavor_capturing_elsewhere(coding_spec):
    from engine.agents.noop import NoopAgent
    from envs.coding.flavor import CodingFlavor
    from envs.sdlc.flavor import SdlcFlavor

    class Named:
        def image_id(self, tag: str) -> str | None:
            return "sha256:" + tag

    class Unnamed:  # a runtime that names no image by its content (the local one)
        pass

    flavor = CodingFlavor()
    assert untouched_key(flavor, NoopAgent, Named(), "t", coding_spec, True) is not None
    assert untouched_key(flavor, NoopAgent, Unnamed(), "t", coding_spec, True) is None
    assert untouched_key(SdlcFlavor(), NoopAgent, Named(), "t", coding_spec, True) is None  # its capture: the remote
    assert untouched_key(object(), NoopAgent, Named(), "t", coding_spec, True) is None


@pytest.mark.docker
@pytest.mark.slow
def test_the_second_baseline_run_of_an_image_starts_no_agent_workspace(base_image, tmp_path, monkeypatch):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.batch import BatchJob, run_batch
    from engine.run.session import session_for
    from engine.run.trial import Runner

    kept = UntouchedCaptures(tmp_path / "kept")
    monkeypatch.setattr(Runner, "__init__", _with_kept(Runner.__init__, kept))
    noop = to_typed(compose_config(["task=sample/last_page", "agent=noop"]))
    session = session_for(noop)
    purposes: dict[str, list[str]] = {}
    original = type(session.runtime).provision

    def provision(self, image, *, run_id, purpose, **kwargs):
        purposes.setdefault(run_id, []).append(purpose)
        return original(self, image, run_id=run_id, purpose=purpose, **kwargs)

    monkeypatch.setattr(type(session.runtime), "provision", provision)
    from engine.agents.noop import NoopAgent

    handed: list[object] = []
    noop_run = NoopAgent.run

    async def run_noop(self, ctx):
        handed.append((ctx.workspace, dict(ctx.capabilities), ctx.bridge_host))
        return await noop_run(self, ctx)

    monkeypatch.setattr(NoopAgent, "run", run_noop)

    def run(cfg) -> object:
        job = BatchJob(plan(cfg, builder=session.builder))
        asyncio.run(run_batch([job], session, root=tmp_path / "runs"))
        [record] = job.records
        assert record.status == "completed", record.error
        return record

    first = run(noop)
    assert purposes[first.run_id] == ["grade", "agent"]
    [kept_file] = (tmp_path / "kept").iterdir()
    second = run(noop)
    assert purposes[second.run_id] == ["grade"]  # the capture kept for this image: no agent workspace
    for record in (first, second):
        assert record.reward == 0.0 and record.diff == "" and record.violations == []
        assert record.integrity_obtained == "strict" and record.stop_reason == "done"
    assert [(t.name, t.status) for t in second.tests] == [(t.name, t.status) for t in first.tests]
    assert second.raw_grade.keys() == first.raw_grade.keys()
    assert "provision" in first.timings and "provision" not in second.timings
    # Handed nothing to act through, the first run (whose capture is kept) included.
    assert handed == [(None, {}, None)] * 2

    # The golden's agent acts through its tools: always a workspace, its capture never kept.
    golden = run(to_typed(compose_config(["task=sample/last_page", "agent=integration_test"])))
    assert purposes[golden.run_id] == ["grade", "agent"] and golden.reward == 1.0
    assert list((tmp_path / "kept").iterdir()) == [kept_file]

    # A kept capture that cannot be read: the run captures its workspace again, and keeps that.
    kept_file.write_text("{")
    third = run(noop)
    assert purposes[third.run_id] == ["grade", "agent"] and third.reward == 0.0
    assert kept.lookup(kept_file.stem) == CapturedSubmission(diff="")

    # Another image under the same tag (rebuilt): another key, so a workspace again.
    monkeypatch.setattr(type(session.runtime), "image_id", lambda self, tag: "sha256:rebuilt")
    fourth = run(noop)
    assert purposes[fourth.run_id] == ["grade", "agent"] and fourth.reward == 0.0
    assert len(list((tmp_path / "kept").iterdir())) == 2


def _with_kept(init, kept: UntouchedCaptures):
    def patched(self, **kwargs) -> None:
        init(self, **kwargs)
        self.untouched = kept

    return patched
