"""``crucible view`` in a real browser (headless Debian Chromium, driven by Selenium) over a store
filled by two real sweeps: filter, search, a run's diff, failing tests and tool calls, the
comparison of the two sweeps, and the static bundle opened from ``file://``.

The store: sweep A is the golden replay and the baseline over two sample tasks; sweep B runs
sample/last_page again with the replay swapped for one bash call that leaves a probe comment in
the code and prints ``PROBE``, so B's integration_test run has tool calls, a diff and failing tests,
PROBE is in no other run's output, and sample/last_page flips (solved in A, lost in B).
Screenshots go to ``$CRUCIBLE_TEST_ARTIFACTS/view`` (else the test's tmp folder; the path is printed).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from real_sweep import crucible

from engine.util.paths import PROJECT_ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROBE = "viewer-probe-7f3a"
PROBE_CALL = (
    f"+task.validation=[{{name: bash, arguments: {{command: "
    f"'echo \"# viewer probe\" >> stockroom/report.py && echo {PROBE}'}}}}]"
)
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def sweep(store: Path, *args: str) -> str:
    proc = crucible("run", "-m", "integrity=vault", "agent=noop,integration_test", *args, store=store)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return re.search(r"^sweep (\S+): \d+ run\(s\) stored", proc.stdout, re.M).group(1)


@pytest.fixture(scope="module")
def sweeps(docker_client, base_image, tmp_path_factory) -> tuple[Path, str, str]:
    store = tmp_path_factory.mktemp("view-real") / "store.duckdb"
    first = sweep(store, "task=sample/last_page,sample/query_ops")
    second = sweep(store, "task=sample/last_page", PROBE_CALL)
    return store, first, second


@pytest.fixture(scope="module")
def server(sweeps):
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "view", "--port", "0", "--store", str(sweeps[0])],
        cwd=PROJECT_ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    line = proc.stdout.readline()
    found = re.search(r"at (http://127\.0\.0\.1:\d+)/", line)
    assert found, line + proc.stderr.read()
    yield found.group(1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err


@pytest.fixture(scope="module")
def browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    try:
        from selenium import webdriver
    except ImportError:
        missing.append("selenium (pip install selenium)")
    if missing:
        why = f"no browser for the viewer test: {', '.join(missing)} (apt-get install -y chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    base = os.environ.get("CRUCIBLE_TEST_ARTIFACTS")
    folder = Path(base) / "view" if base else tmp_path_factory.mktemp("view-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"viewer screenshots in {folder}")
    return folder


def wait(driver, condition, timeout: float = 30):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def shown_run_ids(driver) -> list[str]:
    return [a.text for a in css(driver, "a.run-link")]


def check_probe_run(driver) -> None:
    """The probe run's page: its diff coloured, its failing tests first, its tool call and output."""
    added = [span.text for span in css(driver, "#diff span.add")]
    assert "+# viewer probe" in added, added
    rows = css(driver, "#tests tbody tr")
    assert rows and rows[0].get_attribute("class") == "test failed", [r.text for r in rows]
    assert "failing of" in css(driver, "h3")[0].text
    steps = css(driver, "li.step")
    assert len(steps) == 1 and "bash" in steps[0].find_element("css selector", "code.tool").text
    assert PROBE in steps[0].find_element("css selector", "pre.result").text


def test_filter_search_open_a_run_and_compare_sweeps_in_a_browser(server, browser, sweeps, shots):
    from selenium.webdriver.support.ui import Select

    _, first, second = sweeps
    browser.get(server + "/runs")
    assert css(browser, "#count")[0].text == "6 runs"
    browser.save_screenshot(str(shots / "1-runs.png"))

    Select(css(browser, "#filter-agent")[0]).select_by_visible_text("noop")
    css(browser, "#apply")[0].click()
    wait(browser, lambda d: "agent=noop" in d.current_url)
    assert {cell.text for cell in css(browser, "#runs td.agent")} == {"noop"} and len(shown_run_ids(browser)) == 3
    browser.save_screenshot(str(shots / "2-runs-noop.png"))

    browser.get(server + "/runs")
    css(browser, "#filter-q")[0].send_keys(PROBE)
    css(browser, "#apply")[0].click()
    wait(browser, lambda d: "q=" in d.current_url)
    assert css(browser, "#count")[0].text == "1 run matches"
    probe_run = shown_run_ids(browser)[0]
    css(browser, "a.run-link")[0].click()
    wait(browser, lambda d: css(d, "#run-id") and css(d, "#run-id")[0].text == probe_run)
    check_probe_run(browser)
    browser.save_screenshot(str(shots / "3-run.png"))

    browser.get(server + "/sweeps")
    assert Select(css(browser, "#compare-a")[0]).first_selected_option.text == first
    assert Select(css(browser, "#compare-b")[0]).first_selected_option.text == second
    css(browser, "#compare")[0].click()
    wait(browser, lambda d: css(d, "#flips"))
    flips = [row.text for row in css(browser, "#flips tbody tr")]
    assert flips == ["sample/last_page integration_test – lost 1/1 0/1"], flips
    browser.save_screenshot(str(shots / "4-compare.png"))

    browser.get(server + f"/sweeps/{second}")
    assert len(css(browser, "figure.plot svg")) == 2
    browser.save_screenshot(str(shots / "5-sweep.png"))


def test_the_static_bundle_shows_the_same_run_from_the_file_system(sweeps, browser, shots, tmp_path):
    store = sweeps[0]
    proc = crucible("view", "--bundle", str(tmp_path / "site"), "--store", str(store))
    assert proc.returncode == 0, proc.stderr
    browser.get((tmp_path / "site" / "index.html").as_uri())
    assert css(browser, "#count")[0].text == "6 runs"
    probe_runs = [
        a
        for a in css(browser, "a.run-link")
        if a.text
        in crucible(
            "query", f"SELECT run_id FROM steps WHERE result LIKE '%{PROBE}%'", "--csv", "--store", str(store)
        ).stdout
    ]
    assert len(probe_runs) == 1
    probe_runs[0].click()
    wait(browser, lambda d: d.current_url.startswith("file://") and css(d, "#run-id"))
    check_probe_run(browser)
    browser.save_screenshot(str(shots / "6-bundle-run.png"))
