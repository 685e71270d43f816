"""``crucible report --plot``: the pictures of a real sweep's report, read back as images.

The PNG is decoded and its pixels measured (a blank or tiny image fails); the SVG keeps its
text as text, so what a plot says (labels, solved counts, "no known cost") is read from it."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta

import pytest
from real_sweep import sweep_into

from engine.cli.main import main
from engine.models import RunRecord, Step
from engine.report.compute import build_report
from engine.report.plots import cost_plot, pass_rate_plot, stage_times_plot
from engine.report.query import Filters
from engine.store.duckdb import DuckDBStore

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """(store path, sweep id) of one real sweep: golden replays solve both tasks, baselines neither."""
    store = tmp_path_factory.mktemp("plots") / "store.duckdb"
    return store, sweep_into(store)


def decoded(path):
    import numpy
    from PIL import Image

    with Image.open(path) as image:
        return numpy.asarray(image.convert("RGB"), dtype=float)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pass_rate", "cost", "stages"])
def test_report_plot_writes_a_png_with_visible_content(swept, tmp_path, capsys, kind):
    store, sweep = swept
    target = tmp_path / f"{kind}.png"
    assert main(["report", "--store", str(store), "--sweep", sweep, "--plot", str(target), "--plot-kind", kind]) == 0
    assert "By agent and model" in capsys.readouterr().out  # the report is printed as ever
    pixels = decoded(target)
    height, width, _ = pixels.shape
    assert width >= 400 and height >= 250, pixels.shape
    assert pixels.std() > 20, "the image is (nearly) one colour"
    # more than the frame: a good share of the pixels are not background white
    assert (pixels.min(axis=2) < 200).mean() > 0.02


@pytest.mark.docker
@pytest.mark.slow
def test_pass_rate_plot_of_a_sweep_shows_each_agent_with_its_solved_count(swept):
    store, sweep = swept
    report = build_report(DuckDBStore(store), Filters(sweeps=(sweep,)))
    svg = pass_rate_plot(report).decode()
    assert "integration_test / -" in svg and "noop / -" in svg
    assert ">2/2<" in svg.replace("\n", "") and ">0/2<" in svg.replace("\n", "")


@pytest.mark.docker
@pytest.mark.slow
def test_svg_plots_are_byte_for_byte_stable_and_undated(swept, tmp_path):
    store, sweep = swept
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    for target in (first, second):
        assert main(["report", "--store", str(store), "--plot", str(target), "--plot-kind", "stages"]) == 0
    assert first.read_bytes() == second.read_bytes()
    text = first.read_text()
    assert "<svg" in text and "dc:date" not in text and "grade" in text and "agent" in text


def test_report_plot_with_another_extension_is_one_line_and_writes_nothing(tmp_path, capsys):
    target = tmp_path / "plot.gif"
    assert main(["report", "--store", str(tmp_path / "none.duckdb"), "--plot", str(target)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"crucible report: --plot {target}: name a .png or .svg file"]
    assert not target.exists() and not (tmp_path / "none.duckdb").exists()


def priced_run(run_id: str, model: str, reward: float, cost: float | None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        spec_hash=run_id,
        spec={},
        status="completed",
        task_id="t1",
        agent="tool_calling",
        model=model,
        flavor="coding",
        runtime="docker",
        integrity_requested="vault",
        integrity_obtained="vault",
        attempt=0,
        seed=0,
        sweep_id="S",
        started_at=T0.isoformat(),
        ended_at=(T0 + timedelta(seconds=5)).isoformat(),
        reward=reward,
        steps=[Step(idx=0, kind="model", tokens_in=10, tokens_out=5, cost_usd=cost)],
        owner_pid=os.getpid(),
        owner_host=socket.gethostname(),
    )


@pytest.mark.slow
def test_cost_plot_places_priced_models_and_names_the_unpriced(tmp_path):
    store = DuckDBStore(tmp_path / "store.duckdb")
    for record in (priced_run("a", "priced-model", 1.0, 0.25), priced_run("b", "free-model", 0.0, None)):
        store.write_run_record(record, None)
    svg = cost_plot(build_report(store, Filters())).decode()
    assert "tool_calling / priced-model" in svg
    assert "no known cost: tool_calling / free-model" in svg
    nothing = cost_plot(build_report(store, Filters(models=("free-model",)))).decode()
    assert "no cost is known for any agent and model" in nothing


def test_stage_times_stack_each_label_in_the_order_stages_come():
    svg = stage_times_plot([("a", "build", 1.0), ("a", "grade", 2.0), ("b", "agent", 3.0)]).decode()
    legend = [svg.index(f">{stage}<") for stage in ("build", "grade", "agent")]
    assert legend == sorted(legend)  # the legend lists the stages in the order they came
    assert svg == stage_times_plot([("a", "build", 1.0), ("a", "grade", 2.0), ("b", "agent", 3.0)]).decode()
    assert "no stage timings recorded" in stage_times_plot([]).decode()
    with pytest.raises(ValueError):
        stage_times_plot([], fmt="gif")
