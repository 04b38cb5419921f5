"""The app in a real browser: `streamlit run serve.py` (the app with its warm start, as
scripts/app.sh serves it) on a test database, pages opened in headless Chromium. Checks each page renders without an error box and shows its
expected text; screenshots go to tests/artifacts/ (git-ignored)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from benchmarks.local_server import free_port, streamlit_server
from tests.support.app import HTML_PROMPT, build_app_db
from tests.support.paths import REPO

ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason=f"browser test needs Chromium and chromedriver (looked for {CHROMIUM} and {CHROMEDRIVER}); "
    "`.ci/run` installs them",
)

PAGES = [
    # (screenshot name, URL path and query, texts that must appear)
    ("overview", "/?page=overview", ["Overview", "SIMULATED", "Gain over random"]),
    ("explorer", "/explorer?page=explorer&outcome=flip", ["Prompt explorer", "pools match", "Open pool p003"]),
    ("detail", "/detail?page=detail&prompt=p000&raw=1", ["Pool detail", HTML_PROMPT, "Order 2", "Every gate"]),
    ("judges", "/judges?page=judges", ["Judge comparison"]),
    ("gates", "/gates?page=gates", ["Gate lab"]),
    ("findings", "/findings?page=findings", ["Findings", "Judge audit findings: tiny", "Gates: kept vs rejected"]),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(URL, log file) of a server of serve.py on the test database, once it answers its health check."""
    tmp = tmp_path_factory.mktemp("browser")
    db = build_app_db(tmp / "app.duckdb", tmp / "images")
    options = ["--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    log = tmp / "server.log"
    with streamlit_server("serve.py", free_port(), options, {**os.environ, "JUDGE_AUDIT_DB": str(db)}, log) as (url, _):
        yield url, log


@pytest.fixture(scope="module")
def server(served):
    return served[0]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
                 "--window-size=1500,2400", f"--user-data-dir={tmp_path_factory.mktemp('chrome')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _wait_rendered(driver, texts: list[str], timeout: float = 60) -> str:
    """Wait until every text is on the page and the script has stopped running."""
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    body = ""
    while time.time() < deadline:
        body = driver.find_element(By.TAG_NAME, "body").text
        running = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
        images_done = driver.execute_script("return Array.from(document.images).every(i => i.complete)")
        if all(t in body for t in texts) and not running and images_done:
            time.sleep(1.0)  # let images and charts paint before the screenshot
            return driver.find_element(By.TAG_NAME, "body").text
        time.sleep(0.5)
    missing = [t for t in texts if t not in body]
    raise AssertionError(f"page never showed {missing}; it shows:\n{body[:3000]}")


@pytest.mark.parametrize(("name", "path", "texts"), PAGES, ids=[p[0] for p in PAGES])
def test_page_renders_in_chromium(server, browser, name, path, texts):
    from selenium.webdriver.common.by import By

    browser.get(server + path)
    _wait_rendered(browser, texts)
    errors = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))
    assert not errors, f"{name}: error box shown: {errors[0].text[:2000]}"
    # Data-born HTML is shown as text, never executed or rendered as markup.
    assert not browser.find_elements(By.XPATH, "//b[text()='Bold']")


def test_the_overview_paints_its_cards_then_draws_its_figures_by_itself(server, browser):
    """A fresh session's overview shows its cards first; once Chromium has painted them, the page's
    marker (`app_ui.painted`) reruns it and the figures follow without any click, with the view the
    link named (its slice) kept through the first pass."""
    from selenium.webdriver.common.by import By

    browser.get(server + "/?page=overview&slice=category")
    _wait_rendered(browser, ["Gain over random", "Export the findings"])
    assert "Drawing the figures" not in browser.find_element(By.TAG_NAME, "body").text
    titles = browser.execute_script("""return Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'))
      .filter(c => c.querySelector('.main-svg')).map(c => c.querySelector('.gtitle')?.textContent)""")
    assert len(titles) >= 3 and "Regret by category" in titles, titles
    assert "slice=category" in browser.current_url


def test_clicking_a_pool_opens_its_detail_with_the_filter_in_the_url(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(server + "/explorer?page=explorer&outcome=flip")
    _wait_rendered(browser, ["Open pool p003"])
    browser.find_element(By.PARTIAL_LINK_TEXT, "Open pool p003").click()
    text = _wait_rendered(browser, ["Pool detail", "Order 0", "Next pool"])
    assert "prompt=p003" in browser.current_url and "outcome=flip" in browser.current_url
    assert "in the explorer's current filter" in text
    browser.save_screenshot(str(ARTIFACTS / "detail_after_click.png"))


def test_a_link_naming_a_gate_that_does_not_exist_warns_and_shows_the_default(server, browser):
    from urllib.parse import quote

    from selenium.webdriver.common.by import By

    browser.get(server + "/gates?page=gates&gate=" + quote("no<b>such</b> gate"))
    text = _wait_rendered(browser, ["Gate lab", "does not exist here", "Kept (the gate acts)"])
    alerts = [a.text for a in browser.find_elements(By.CSS_SELECTOR, '[data-testid="stAlert"]')]
    assert any("gate" in a and "no<b>such</b> gate" in a and "alpha agree>=2/3" in a for a in alerts), alerts
    assert not browser.find_elements(By.XPATH, "//b[text()='such']")  # shown as text, not markup
    assert "gate=" not in browser.current_url  # the default gate leaves the link clean
    assert "alpha agree>=2/3" in text
    browser.save_screenshot(str(ARTIFACTS / "gate_that_does_not_exist.png"))


def test_the_server_loads_the_default_view_before_it_answers(served):
    """By the time the health check answers, the warm start has imported the pages' modules and
    loaded the overview's audit (`app_ui.warm`); its one line is in the server's output."""
    (line,) = [x for x in served[1].read_text(errors="replace").splitlines() if x.startswith("warm start:")]
    assert "selection audit of dataset 'tiny' (10,000 resamples) ready" in line
