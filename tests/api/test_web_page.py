"""The web page in headless Chromium (Selenium + chromedriver): type, play, audio arrives."""
from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import API_KEY

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium chromium-driver)"),
    pytest.mark.skipif(shutil.which("chromedriver") is None, reason="needs chromedriver (apt-get install chromium-driver)"),
]


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="chorus-chromium-")
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--autoplay-policy=no-user-gesture-required",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def audio_seconds_generated(server, auth) -> float:
    text = httpx.get(f"{server.url}/metrics", headers=auth).text
    return float(re.search(r"^chorus_audio_seconds_generated_total (\S+)$", text, re.M).group(1))


def test_page_plays_streamed_audio_and_reports_time_to_first_audio(server, auth, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    before = audio_seconds_generated(server, auth)
    browser.get(server.url + "/")
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
