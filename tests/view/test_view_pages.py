"""``crucible view`` over a store of synthesised runs (written through the store's real spool and
ingest): every page over HTTP (Starlette's TestClient), bad input, the 5 MB output, the bundle,
and the command itself. No Docker: tests/view/test_view_browser.py reads a real sweep's store."""

from __future__ import annotations

import dataclasses
import re
import signal
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from view_records import fill, record

from engine.models import BuildRecord, TerminalRecord
from engine.report.compute import build_report
from engine.report.query import Filters
from engine.store.duckdb import DuckDBStore
from engine.util.paths import PROJECT_ROOT
from engine.view.app import create_app
from engine.view.bundle import write_bundle
from engine.view.queries import SHOWN_CHARS

RUNS = 120
BIG = 7  # run index with a 5 MB tool output
FIVE_MB = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> DuckDBStore:
    root = tmp_path_factory.mktemp("view")
    store = DuckDBStore(root / "view.duckdb")
    fill(store, RUNS, big={BIG: FIVE_MB})
    run_dir = root / "run-dir"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "logs" / "agent.log").write_text("agent log line\n")
    with_dir = record(RUNS + 1, RUNS + 2)  # an integration_test run
    with_dir.run_id, with_dir.run_dir, with_dir.sweep_id = "synth-with-dir", str(run_dir), None
    store.write_run_record(with_dir, run_dir)
    terminal = TerminalRecord(
        "term-1",
        with_dir.run_id,
        "claude_code",
        "crucible-t1",
        "main",
        "running",
        "2026-01-10T09:00:00+00:00",
        width=80,
        height=24,
    )
    store.record_terminal_event(with_dir.run_id, {"event": "start", "terminal": dataclasses.asdict(terminal)})
    store.record_terminal_event(
        with_dir.run_id,
        {
            "event": "end",
            "terminal_id": "term-1",
            "run_id": with_dir.run_id,
            "state": "closing",
            "end_reason": "done",
            "ended_at": "2026-01-10T09:01:00+00:00",
            "closes_at": "2099-01-01T00:00:00+00:00",
            "snapshot": {"taken_at": "2026-01-10T09:01:00+00:00", "final": True, "text": "> all done, 3 files edited"},
        },
    )
    store.record_build(
        BuildRecord(
            "b1",
            "crucible/task:abc",
            "abc" * 8,
            "task",
            False,
            9.5,
            271_000_000,
            {"dockerfile": "FROM base"},
            None,
            "2026-01-10T08:00:00+00:00",
        )
    )
    store.record_build(
        BuildRecord(
            "b2",
            "crucible/task:abc",
            "abc" * 8,
            "task",
            True,
            0.01,
            271_000_000,
            {"dockerfile": "FROM base"},
            None,
            "2026-01-10T08:05:00+00:00",
        )
    )
    return store


@pytest.fixture(scope="module")
def client(store) -> TestClient:
    return TestClient(create_app(store.path))


def run_ids(html: str) -> list[str]:
    return re.findall(r'class="run-link">([^<]+)<', html)


def one_line(response) -> str:
    return unescape(re.search(r'id="error-line">([^<]*)<', response.text).group(1))


def test_runs_page_shows_the_newest_fifty_and_pages_through_the_rest(client):
    first = client.get("/runs")
    assert first.status_code == 200 and f"{RUNS + 1} runs" in first.text
    assert run_ids(first.text)[:2] == ["synth-with-dir", f"synth-{RUNS - 1:05d}"] and len(run_ids(first.text)) == 50
    last = client.get("/runs?page=3")
    assert run_ids(last.text)[-1] == "synth-00000" and len(run_ids(last.text)) == RUNS + 1 - 100


def test_filters_select_exactly_the_runs_that_match(client):
    noop = run_ids(client.get("/runs?agent=noop").text)
    assert noop and all(int(r[-5:]) % 4 == 0 for r in noop)
    both = client.get("/runs?agent=noop&sweep=synth-sweep-00&model=-&flavor=coding&status=completed&integrity=strict")
    assert run_ids(both.text) == [f"synth-{i:05d}" for i in range(8, -1, -4)]  # sweep 00 holds runs 0..11
    dated = client.get("/runs?since=2026-01-10&until=2026-01-10&task=synth/task_03")
    assert sorted(run_ids(dated.text)) == [f"synth-{i:05d}" for i in range(3, RUNS, 20)]


def test_search_finds_the_one_run_whose_tool_output_holds_the_text(client):
    assert run_ids(client.get("/runs?q=MARKER-00042").text) == ["synth-00042"]
    assert run_ids(client.get("/runs?q=request 57.").text) == ["synth-00057"]  # in the prompt
    assert run_ids(client.get("/runs?q=%23 run 99").text) == ["synth-00099"]  # in a tool call's arguments


def test_run_page_shows_steps_failing_tests_first_the_coloured_diff_and_the_waterfall(client):
    page = client.get("/runs/synth-00001").text
    assert page.index("FAILED") < page.index("PASSED") and "(2 failing of 4, failing first)" in page
    assert "str_replace_based_edit_tool" in page and "marker-00001" in page
    assert '<span class="add">+    return -(-total // per_page)</span>' in unescape(page)
    assert '<span class="del">-    return total // per_page</span>' in unescape(page)
    assert page.index('wf-label">provision') < page.index('wf-label">agent') < page.index('wf-label">grade')
    assert "Fix the pager, request 1." in page and "a" * 40 in page  # prompt and pins


def test_a_5mb_tool_output_is_cut_on_the_page_and_whole_behind_its_link(client):
    page = client.get(f"/runs/synth-{BIG:05d}")
    assert page.status_code == 200 and len(page.content) < SHOWN_CHARS * 3
    link = re.search(r'class="whole" href="([^"]+)"', page.text).group(1)
    whole = client.get(link)
    assert whole.status_code == 200 and len(whole.content) == FIVE_MB


def test_unknown_ids_and_bad_filter_values_get_one_line_and_their_status(client):
    cases = [
        ("/runs/nosuch", 404, "no run 'nosuch' in the store"),
        ("/runs?status=finished", 400, "status='finished': not a run status"),
        ("/runs?since=yesterday", 400, "since='yesterday': give a date as YYYY-MM-DD"),
        ("/runs?page=0", 400, "page='0': pages start at 1"),
        ("/builds?page=two", 400, "page='two': give a page number"),
        ("/sweeps/nosuch", 404, "no sweep 'nosuch' in the store"),
        ("/compare?a=synth-sweep-00", 400, "compare: give two sweeps"),
        ("/compare?a=synth-sweep-00&b=nosuch", 404, "sweep nosuch: no such sweep in the store"),
        ("/runs/synth-00001/steps/99/result", 404, "no step 99 in run 'synth-00001'"),
        ("/nowhere", 404, "/nowhere: Not Found"),
    ]
    for path, status, line in cases:
        response = client.get(path)
        assert response.status_code == status, path
        assert one_line(response).startswith(line), (path, one_line(response))


def test_run_page_shows_terminal_snapshots_and_serves_run_files_from_its_directory_only(client):
    page = client.get("/runs/synth-with-dir").text
    assert "term-1" in page and "final snapshot" in page and "&gt; all done, 3 files edited" in page
    assert 'href="/runs/synth-with-dir/files/logs/agent.log"' in page
    assert client.get("/runs/synth-with-dir/files/logs/agent.log").text == "agent log line\n"
    for escape in ("../view.duckdb", "logs/../../view.duckdb", "%2e%2e/view.duckdb"):
        assert client.get(f"/runs/synth-with-dir/files/{escape}").status_code == 404


def test_sweep_page_shows_the_reports_own_numbers_and_its_plots(client, store):
    page = unescape(client.get("/sweeps/synth-sweep-02").text)
    report = build_report(store, Filters(sweeps=("synth-sweep-02",)))
    for group in report.groups:
        interval = f"[{group.interval.low:.3f}, {group.interval.high:.3f}]"
        assert f"<td>{group.mean_reward:.3f}</td><td>{interval}" in page
    assert page.count("<svg") == 2 and "pass@1" in page
    assert f"<td>{report.matrix.tasks[0]}</td>" in page


def test_comparison_lists_the_tasks_that_flipped_as_the_report_does(client, store):
    page = unescape(client.get("/compare?a=synth-sweep-00&b=synth-sweep-01").text)
    flips = build_report(store, Filters(), compare=("synth-sweep-00", "synth-sweep-01")).comparison.flips
    assert flips, "the synthesised sweeps should differ"
    for flip in flips:
        assert f"<td>{flip.task_id}</td><td>{flip.agent}</td><td>{flip.model or '–'}</td><td>{flip.change}</td>" in page


def test_builds_page_shows_tag_seconds_size_and_cache_hits(client):
    page = client.get("/builds").text
    assert "2 builds, 1 cache hit" in page and "crucible/task:abc" in page and "258.4 MB" in page


def test_a_run_stored_after_the_app_started_appears_on_the_next_request(client, store):
    late = record(RUNS + 5, RUNS + 6)
    late.run_id = "synth-late"
    store.write_run_record(late, None)
    store.ingest_pending()
    assert run_ids(client.get("/runs?q=marker-00125").text) == ["synth-late"]


HOLDER = """
import sys
from pathlib import Path
from engine.store.lock import open_store
with open_store(Path(sys.argv[1]), read_only=False, timeout=60):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_page_says_busy_when_another_process_holds_the_store_past_its_timeout(store):
    impatient = TestClient(create_app(store.path, read_timeout=0.3))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.path)],
        cwd=PROJECT_ROOT,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        busy = impatient.get("/runs")
        assert busy.status_code == 503 and "the store is busy" in one_line(busy)
    finally:
        holder.communicate("", timeout=60)
    assert impatient.get("/runs").status_code == 200


@pytest.mark.slow
def test_bundle_writes_every_page_with_links_that_resolve_on_disk(store, tmp_path):
    out = tmp_path / "site"
    count = write_bundle(store.path, out)
    runs = store.query("SELECT count(*) FROM runs")[1][0][0]
    assert (out / "index.html").is_file() and (out / "runs" / "synth-00001.html").is_file()
    assert count == -(-runs // 50) + runs + 1 + 10 + 9 + 1  # runs pages, runs, sweeps list, sweeps, pairs, builds
    assert (out / "runs" / f"synth-{BIG:05d}" / "step-2-result.txt").stat().st_size == FIVE_MB
    for page in out.rglob("*.html"):
        for link in re.findall(r'\shref="([^"#]+)"', page.read_text()):  # not the plots' xlink:href="#id"
            if link.startswith("file://"):
                assert Path(link[len("file://") :]).exists(), (page, link)
            else:
                assert not link.startswith("/") and (page.parent / link).resolve().exists(), (page, link)


def view_cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "view", *args],
        cwd=PROJECT_ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


@pytest.mark.slow
def test_view_command_serves_on_a_free_local_port_and_ctrl_c_ends_it_cleanly(store):
    import httpx

    proc = view_cli("--port", "0", "--store", str(store.path))
    try:
        line = proc.stdout.readline()
        url = re.search(r"at (http://127\.0\.0\.1:\d+/)", line).group(1)
        assert httpx.get(url + "runs?agent=noop", timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err, err


@pytest.mark.parametrize(
    "args, line",
    [
        (["--store", "/nonexistent/store.duckdb"], "crucible view: store /nonexistent/store.duckdb: its directory"),
        (["--port", "70000"], "crucible view: --port 70000: give a port from 1 to 65535, or 0 for a free one"),
        (["--bundle", "pyproject.toml"], "crucible view: --bundle pyproject.toml: is a file, not a directory"),
    ],
)
def test_view_command_refuses_a_bad_store_port_or_bundle_folder_in_one_line(args, line):
    proc = view_cli(*args)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and err.startswith(line) and len(err.strip().splitlines()) == 1, err
