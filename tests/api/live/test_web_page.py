"""The web page in headless Chromium (Selenium + chromedriver): type, play, audio arrives."""
from __future__ import annotations

import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.api.conftest import API_KEY
from tests.api.live.test_disconnect import metric, scrape

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium chromium-driver)"),
    pytest.mark.skipif(shutil.which("chromedriver") is None, reason="needs chromedriver (apt-get install chromium-driver)"),
]


# Headless Chromium as the project runs it (the guide's flags), autoplay allowed for the page.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--autoplay-policy=no-user-gesture-required")


@contextmanager
def chromium(*extra_flags: str) -> Iterator:
    """A Chromium driver with FLAGS, `extra_flags` and a fresh profile, quit (and the profile
    removed) on exit."""
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="chorus-chromium-")
    for flag in (*FLAGS, *extra_flags, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser():
    with chromium() as driver:
        yield driver


def audio_seconds_generated(server, auth) -> float:
    return metric(scrape(server, auth), "chorus_audio_seconds_generated_total")


def test_page_plays_streamed_audio_and_reports_time_to_first_audio(server, auth, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    before = audio_seconds_generated(server, auth)
    browser.get(server.url + "/")
    # The page sends no seed, and the random test model may end a speech at its first frames
    # (CI, 2026-12-04: "done" with 0 chunks): the page's own request gets one, the page unchanged.
    browser.execute_script("""
        const original = window.fetch;
        window.fetch = (url, init) => {
            if (url === "/v1/audio/speech" && init && init.body) {
                init = { ...init, body: JSON.stringify({ ...JSON.parse(init.body), seed: 7 }) };
            }
            return original(url, init);
        };
    """)
    key = browser.find_element(By.ID, "key")
    key.send_keys(API_KEY)
    browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", key)
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#voice option")) > 0)
    text = browser.find_element(By.ID, "text")
    text.clear()
    text.send_keys("Hello from the browser.")
    browser.find_element(By.ID, "play").click()
    wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("value") in ("done",) or "error" in d.find_element(By.ID, "status").get_attribute("value"))
    assert browser.find_element(By.ID, "status").get_attribute("value") == "done"
    assert int(browser.find_element(By.ID, "chunks").get_attribute("value")) > 1
    ttfa = browser.find_element(By.ID, "ttfa").get_attribute("value")
    assert ttfa.endswith(" s") and 0 < float(ttfa[:-2]) < 60
    # Every second the engine made reached the page (the random test model may end its speech
    # at any frame, so the length itself is not fixed). The engine reports its count a moment later.
    heard = float(browser.find_element(By.ID, "seconds").get_attribute("value"))
    deadline = time.monotonic() + 10
    while abs((made := audio_seconds_generated(server, auth) - before) - heard) > 0.01 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert heard > 0 and heard == pytest.approx(made, abs=0.01)


def value(browser, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, element_id).get_attribute("value")


def test_live_mode_speaks_a_replayed_reply_and_lights_each_word(joe_server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(joe_server.url + "/")
    wait = WebDriverWait(browser, 120)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#voice option")) > 0)
    text = "Good morning. Your order ships on Monday, and it arrives by Friday."
    area = browser.find_element(By.ID, "text")
    area.clear()
    area.send_keys(text)
    browser.find_element(By.ID, "replay").click()
    wait.until(lambda d: value(d, "live-status") == "flushed" or "error" in value(d, "live-status"))
    assert value(browser, "live-status") == "flushed"
    assert int(value(browser, "live-words")) == len(text.split())
    latency = value(browser, "live-latency")
    assert latency.endswith(" s") and 0 < float(latency[:-2]) < 30
    # Every word lights up while its audio plays, and is marked spoken once it has.
    wait.until(lambda d: int(value(d, "live-spoken")) == len(text.split()))
    spoken = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#words span.spoken")]
    assert spoken == text.split()


def test_live_mode_stop_clears_the_speech_and_no_audio_follows(joe_server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(joe_server.url + "/")
    wait = WebDriverWait(browser, 120)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#voice option")) > 0)
    area = browser.find_element(By.ID, "text")
    area.clear()
    area.send_keys(" ".join(["This sentence is one of many that will never all be heard."] * 8))
    browser.find_element(By.ID, "replay").click()
    wait.until(lambda d: float(value(d, "live-seconds")) > 0)
    browser.find_element(By.ID, "stop").click()
    wait.until(lambda d: value(d, "live-status") == "cleared")
    heard = float(value(browser, "live-seconds"))
    time.sleep(1.5)
    assert value(browser, "live-late") == "0" and float(value(browser, "live-seconds")) == heard
    deadline = time.monotonic() + 10
    while joe_server.engine.stats.kv_blocks_used and time.monotonic() < deadline:
        time.sleep(0.1)
    assert joe_server.engine.stats.kv_blocks_used == 0
    # Typed text (Enter flushes) speaks on the same connection after the Stop.
    live = browser.find_element(By.ID, "live-text")
    live.send_keys("Hello again.")
    live.send_keys("\n")
    wait.until(lambda d: value(d, "live-status") == "flushed")
    assert float(value(browser, "live-seconds")) > heard and value(browser, "live-late") == "0"
