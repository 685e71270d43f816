"""How fast are ``crucible view``'s pages in a browser, at 10 runs and at 10,000?

In a throwaway CRUCIBLE_HOME: two stores of synthesised runs (tests/view/view_records.py),
written through the store's real spool and ingest path, one of 10 runs and one of 10,000 (10
sweeps; run 5000 has a 5 MB tool output). Each is served by the real command (``crucible view
--port 0``), and headless Chromium (Selenium, Debian's chromium + chromium-driver) loads each
page N times: the runs page, the runs page filtered by agent with a full-text search, a run
page, the run page with the 5 MB output, and a sweep page. Per page: the median of the browser's
own load time (navigation start to the load event, Navigation Timing) and of the HTTP response
alone (httpx, the server's side). Exits non-zero when the page with the 5 MB output takes 2 s or
more to load in the browser (the target), or a page is not 200.

    .venv/bin/python bench/bench_viewer.py [N]
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "view"))

from engine.util.tables import format_table  # noqa: E402

LIMIT_S = 2.0
BIG_RUN, BIG_BYTES = 5000, 5 * 1024 * 1024


def make_store(home: Path, runs: int) -> Path:
    """A store of ``runs`` synthesised runs, filled in a child process with its own CRUCIBLE_HOME."""
    store = home / f"store-{runs}.duckdb"
    code = (
        "import sys; from engine.store.duckdb import DuckDBStore; from view_records import fill; "
        f"fill(DuckDBStore({str(store)!r}), {runs}, big={{{BIG_RUN}: {BIG_BYTES}}} if {runs} > {BIG_RUN} else None)"
    )
    env = {**os.environ, "CRUCIBLE_HOME": str(home), "PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'view'}"}
    env.pop("CRUCIBLE_STORE", None)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    print(f"store of {runs} runs filled in {time.perf_counter() - started:.1f} s", flush=True)
    return store


def serve(home: Path, store: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "CRUCIBLE_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "view", "--port", "0", "--store", str(store)],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
    )
    found = re.search(r"at (http://127\.0\.0\.1:\d+)/", proc.stdout.readline())
    if not found:
        proc.kill()
        raise SystemExit("crucible view did not start")
    return proc, found.group(1)


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))


def browser_load_s(driver, url: str) -> float:
    """The browser's load time of ``url``: navigation start to the end of the load event."""
    driver.get(url)
    timing = driver.execute_script(
        "const t = performance.getEntriesByType('navigation')[0];"
        "return [t.startTime, t.loadEventEnd, t.responseStatus || 200];"
    )
    if timing[2] != 200:
        raise SystemExit(f"{url}: HTTP {timing[2]}")
    return (timing[1] - timing[0]) / 1000


def http_s(url: str) -> float:
    import httpx

    started = time.perf_counter()
    response = httpx.get(url, timeout=60)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}")
    return elapsed


def pages(runs: int) -> dict[str, str]:
    from view_records import agent_of, sweep_of

    probe = runs // 2 + 1
    shown = {
        "runs page (first 50)": "/runs",
        "runs page, agent + search": f"/runs?agent={agent_of(probe)}&q=marker-{probe:05d}",
        "runs page, last page": f"/runs?page={-(-runs // 50)}",
        "a run page": f"/runs/synth-{probe:05d}",
        "a sweep page (report + plots)": f"/sweeps/{sweep_of(0, runs)}",
    }
    if runs > BIG_RUN:
        shown["the run with a 5 MB tool output"] = f"/runs/synth-{BIG_RUN:05d}"
    return shown


def measure(driver, base: str, runs: int, trials: int) -> list[tuple]:
    rows = []
    for name, path in pages(runs).items():
        browser_load_s(driver, base + path)  # warm: the first load pays DuckDB's and Jinja's first use
        loads = [browser_load_s(driver, base + path) for _ in range(trials)]
        https = [http_s(base + path) for _ in range(trials)]
        rows.append((runs, name, statistics.median(loads), max(loads), statistics.median(https)))
    return rows


def main() -> int:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory(prefix="bench-viewer-") as tmp:
        home = Path(tmp)
        driver = browser()
        try:
            for runs in (10, 10_000):
                store = make_store(home, runs)
                proc, base = serve(home, store)
                try:
                    rows += measure(driver, base, runs, trials)
                finally:
                    proc.terminate()
                    proc.wait(timeout=60)
        finally:
            driver.quit()
    print(
        format_table(
            ["runs in store", "page", "browser load median s", "max s", "HTTP median s"],
            [(r, n, f"{m:.3f}", f"{x:.3f}", f"{h:.3f}") for r, n, m, x, h in rows],
        )
    )
    big = [r for r in rows if r[1].startswith("the run with a 5 MB")]
    worst = max(r[3] for r in big)
    print(f"\n5 MB tool output page: slowest browser load {worst:.3f} s (target < {LIMIT_S:.0f} s)")
    return 0 if worst < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
