"""The Annotate page in real browsers (issue 25's tests): two annotators in two headless Chromium sessions
rate one campaign at once, with double clicks and a refresh, and every vote is stored exactly once; the
page's HTML holds no judge, generator, country, raw output or candidate id; a server killed with -9
mid-campaign keeps every vote it acknowledged. Servers listen on 127.0.0.1 only; every loop is bounded."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from audit_core import campaigns as cp
from audit_core import store
from benchmarks.local_server import ROOT, free_port, streamlit_server
from tests.support.app import build_app_db

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
JUDGES = ("JUDGEMARKqx", "JUDGEMARKzv")
SERVER = ["--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]

pytestmark = pytest.mark.skipif(not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
                                reason="browser test needs Chromium and chromedriver; `.ci/run` installs them")


def campaign_store(root: Path) -> Path:
    """The app's test dataset, generators, countries and raw outputs made markers, with an alignment
    campaign `align` (2 prompts, both of ann and bob rate each) and a rubric campaign `rub` (6 images, ann)."""
    db = build_app_db(root / "annotate.duckdb", root / "images", judges=JUDGES)
    con = store.connect(db)
    try:
        with store.transaction(con):
            con.execute("UPDATE candidates SET source_model = 'GENMARK' || canonical_index")
            con.execute("UPDATE prompts SET country = 'COUNTRYMARK'")
            con.execute("UPDATE calls SET raw_output = 'RAWMARK', parse_note = NULL")
        cp.create_campaign(con, "tiny", "align", "alignment", "crowd", "uniform", 2, 2, annotators=("ann", "bob"),
                           new_pool=True)
        cp.create_campaign(con, "tiny", "rub", "rubric", "crowd", "uniform", 6, 1, annotators=("ann",), new_pool=True)
    finally:
        con.close()
    return db


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return campaign_store(tmp_path_factory.mktemp("annotate_browser"))


def chrome(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--disable-component-update", "--disable-sync", "--window-size=1400,2000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def browsers(tmp_path_factory):
    drivers = [chrome(tmp_path_factory.mktemp(f"chrome{k}")) for k in range(2)]
    yield drivers
    for driver in drivers:
        driver.quit()


def settle(driver, timeout: float = 90) -> str:
    """The page's text once it shows the annotator's progress and its script has stopped running (two
    quiet looks in a row); at most `timeout` seconds, ample for a fresh server's first page on two busy
    cores (a quiet page returns at once)."""
    from selenium.webdriver.common.by import By

    deadline, quiet = time.time() + timeout, 0
    while time.time() < deadline and quiet < 2:
        running = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
        shown = "items done" in driver.find_element(By.TAG_NAME, "body").text
        quiet = quiet + 1 if shown and not running else 0
        time.sleep(0.15)
    return driver.find_element(By.TAG_NAME, "body").text


def button(driver, label: str):
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.XPATH, f"//button[.//p[normalize-space()='{label}']]")
    return found[0] if found else None


def done(text: str) -> int:
    """The items done, as the progress bar says ("3 of 4 items done")."""
    found = re.search(r"(\d+) of \d+ items done", text)
    assert found, f"the page shows no progress: {text[-1500:]!r}"
    return int(found[1])


def press(driver, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def rate_all(driver, url: str, key: str, *, refresh_at: int | None = None, stop_at: int | None = None,
             steps: int = 60) -> int:
    """Rate the items the page offers by the scale key `key` (alignment: each image in turn, then Submit
    clicked twice at once; rubric: the key is the answer) until none is left, or `stop_at` are done;
    refresh the page once `refresh_at` are done. Returns the items done, as the page last said."""
    driver.get(url)
    for _ in range(steps):
        text = settle(driver)
        if "Every item for you" in text or done(text) == stop_at:
            return done(text)
        if done(text) == refresh_at:
            driver.refresh()  # a new session on the same link: it resumes at the next open item
            refresh_at = None
            continue
        submit = button(driver, "Submit")
        if submit is not None and submit.is_enabled():
            driver.execute_script("arguments[0].click(); arguments[0].click();", submit)  # a double click
        else:
            press(driver, key)
    raise AssertionError(f"{url}: not done after {steps} steps")


def stored_votes(db: Path, outcome: str) -> list[tuple]:
    con = store.connect(db, read_only=True)
    try:
        return con.execute("SELECT annotator, candidate_id, value FROM votes WHERE pool = 'crowd' AND outcome = ?",
                           [outcome]).fetchall()
    finally:
        con.close()


def assignments(db: Path, name: str) -> dict[str, int]:
    """annotator → candidates they must rate in campaign `name` (each item's candidates)."""
    con = store.connect(db, read_only=True)
    try:
        campaign = cp.load_campaign(con, "tiny", name)
        items = {i.item_id: len(i.candidate_ids) for i in cp.load_items(con, campaign)}
        rows = con.execute("SELECT annotator, item_id FROM campaign_assignments WHERE campaign = ?", [name]).fetchall()
    finally:
        con.close()
    out: dict[str, int] = {}
    for annotator, item in rows:
        out[annotator] = out.get(annotator, 0) + items[item]
    return out


def test_two_annotators_at_once_store_every_vote_exactly_once_and_the_page_is_blind(db, browsers, tmp_path):
    env = {**os.environ, "JUDGE_AUDIT_DB": str(db)}
    with streamlit_server("app.py", free_port(), SERVER, env, tmp_path / "server.log") as (url, _):
        results: dict[str, int] = {}
        errors: list[BaseException] = []

        def annotate(driver, name: str, refresh_at: int | None) -> None:
            try:
                results[name] = rate_all(driver, f"{url}/annotate?campaign=align&annotator={name}", "y",
                                         refresh_at=refresh_at)
            except BaseException as err:  # reported by the main thread
                errors.append(err)

        browsers[0].get(f"{url}/annotate?campaign=align&annotator=ann")
        settle(browsers[0])
        html = browsers[0].page_source
        leaks = [m for m in ("JUDGEMARK", "GENMARK", "COUNTRYMARK", "RAWMARK", "_SD35", "_flux", "_gpt-image") if m in html]
        assert "Image A" in html and not leaks, leaks
        threads = [threading.Thread(target=annotate, args=(browsers[0], "ann", 1)),
                   threading.Thread(target=annotate, args=(browsers[1], "bob", None))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
    votes = stored_votes(db, "alignment")
    keys = [(a, c) for a, c, _ in votes]
    assert len(keys) == len(set(keys)), "a vote was stored twice"
    per_annotator = {a: sum(1 for b, _ in keys if b == a) for a in ("ann", "bob")}
    assert per_annotator == assignments(db, "align") and {v for *_, v in votes} == {1.0}
    assert results == {"ann": 2, "bob": 2}


def _server(db: Path, port: int, log: Path) -> subprocess.Popen:
    """`streamlit run app.py` on 127.0.0.1:`port` (its own process, so the test can kill it), once healthy."""
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true",
           *SERVER]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "JUDGE_AUDIT_DB": str(db)}, stdout=out,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1).read() == b"ok":
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the server did not start: {log.read_text(errors='replace')[-2000:]}")


def test_a_server_killed_mid_campaign_keeps_every_acknowledged_vote(db, browsers, tmp_path):
    port = free_port()
    proc = _server(db, port, tmp_path / "server.log")
    try:
        acknowledged = rate_all(browsers[0], f"http://127.0.0.1:{port}/annotate?campaign=rub&annotator=ann", "3",
                                stop_at=3)
        os.kill(proc.pid, signal.SIGKILL)  # no shutdown, no checkpoint: what was committed must be on disk
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    votes = stored_votes(db, "rubric")
    assert acknowledged == 3 and len(votes) == 3 and {v for *_, v in votes} == {3.0}  # no click was pending
    assert len({c for _, c, _ in votes}) == len(votes)
