"""The web page's voice library in headless Chromium (Selenium + chromedriver), against a live
server of the tiny random Qwen3-TTS Base checkpoint: upload a clip, speak in it (Play and live
mode), a refusal's message, delete; a voice recorded from Chromium's fake microphone; the section
hidden for a model that cannot clone."""
from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

from api.app import create_app
from api.config.settings import ApiSettings
from tests.api.conftest import API_KEY, LiveServer
from tests.api.live import test_web_page
from tests.api.live.test_web_page import chromium, value
from tests.api.voice_clips import BASE, GOLDEN, TWO_FRAMES, wav_bytes
from tests.engine.conftest import engine_config

pytestmark = test_web_page.pytestmark  # the same skips: no Chromium, no chromedriver

# A fake microphone that grants itself and plays a tone.
FAKE_MICROPHONE = ("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream")
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def base_server(tmp_path_factory, chorus_cache):
    config = engine_config(BASE, num_blocks=128)
    config.num_threads = 1
    settings = ApiSettings(api_keys=(API_KEY,), voices_dir=str(tmp_path_factory.mktemp("voices")), **TWO_FRAMES)
    with LiveServer(create_app(config, settings)) as live:
        yield live


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module (each test loads the page afresh)."""
    with chromium(*FAKE_MICROPHONE) as driver:
        yield driver


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("clips") / "ann.wav"
    with np.load(GOLDEN) as golden:
        path.write_bytes(wav_bytes(np.tile(golden["base_clip"], 2)))  # 3 s of the synthetic voice
    return path


def open_page(browser, server, key: str | None = API_KEY):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server.url + "/")
    wait = WebDriverWait(browser, 60)
    if key:
        field = browser.find_element(By.ID, "key")
        field.send_keys(key)
        browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", field)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#language option")) > 0)
    return wait


def stored(browser) -> dict[str, str]:
    """The listed voices: name → id (read in one script: the list is re-rendered as it changes)."""
    return browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#stored-voices li')]"
        ".map((li) => [li.firstChild.textContent.split(' (')[0], li.dataset.id]))")


def picker(browser) -> dict[str, str]:
    """The voice picker's options: label → value."""
    return browser.execute_script("return Object.fromEntries([...document.getElementById('voice').options]"
                                  ".map((o) => [o.text, o.value]))")


def save_voice(browser, wait, name: str, clip=None) -> str:
    """Fills in the form (a clip file, or the recording already made) and saves; the status."""
    from selenium.webdriver.common.by import By

    browser.find_element(By.ID, "voice-name").send_keys(name)
    if clip is not None:
        browser.find_element(By.ID, "voice-file").send_keys(str(clip))
    browser.find_element(By.ID, "save-voice").click()
    wait.until(lambda d: value(d, "voice-status").startswith(("saved", "refused", "error")))
    return value(browser, "voice-status")


def test_an_uploaded_voice_is_listed_spoken_in_and_deleted(base_server, browser, clip_file):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    wait = open_page(browser, base_server)
    assert browser.find_element(By.ID, "library").is_displayed() and stored(browser) == {}
    status = save_voice(browser, wait, "Ann", clip_file)
    assert status.startswith("saved Ann (x_vector, "), status
    voice_id = stored(browser)["Ann"]
    assert voice_id.startswith("voice_") and picker(browser) == {"Ann": voice_id}
    Select(browser.find_element(By.ID, "voice")).select_by_visible_text("Ann")
    browser.find_element(By.ID, "play").click()
    wait.until(lambda d: value(d, "status") == "done" or "error" in value(d, "status"))
    assert value(browser, "status") == "done"
    assert int(value(browser, "chunks")) >= 1 and float(value(browser, "seconds")) > 0
    ttfa = value(browser, "ttfa")
    assert ttfa.endswith(" s") and 0 < float(ttfa[:-2]) < 60
    # Live mode speaks in it too: the socket's `model` is the voice's id.
    browser.find_element(By.ID, "replay").click()
    wait.until(lambda d: value(d, "live-status") == "flushed" or "error" in value(d, "live-status"))
    assert value(browser, "live-status") == "flushed" and float(value(browser, "live-seconds")) > 0
    # Deleted: gone from the list and the picker.
    browser.find_element(By.CSS_SELECTOR, f'#stored-voices li[data-id="{voice_id}"] button').click()
    wait.until(lambda d: stored(d) == {})
    assert value(browser, "voice-status") == "deleted Ann" and picker(browser) == {}
    assert httpx.get(f"{base_server.url}/v1/audio/voices/{voice_id}", headers=AUTH).status_code == 404


def test_a_refused_upload_shows_the_servers_message(base_server, browser, tmp_path):
    not_audio = tmp_path / "notes.txt"
    not_audio.write_text("these are not the sounds you are looking for")
    answer = httpx.post(f"{base_server.url}/v1/audio/voices", headers=AUTH,
                        data={"name": "Direct"}, files={"audio": (not_audio.name, not_audio.read_bytes())})
    assert answer.status_code == 400
    wait = open_page(browser, base_server)
    assert save_voice(browser, wait, "Notes", not_audio) == "refused: " + answer.json()["error"]["message"]
    assert stored(browser) == {} and picker(browser) == {}


def test_a_voice_recorded_from_the_microphone(base_server, browser):
    from selenium.webdriver.common.by import By

    wait = open_page(browser, base_server)
    record = browser.find_element(By.ID, "record")
    record.click()
    wait.until(lambda d: value(d, "recorded").startswith("recording"))
    time.sleep(2.5)
    record.click()
    wait.until(lambda d: value(d, "recorded").startswith("recorded"))
    assert 2.5 <= float(value(browser, "recorded").split()[1]) < 10 and record.text == "Record"
    status = save_voice(browser, wait, "Mic")
    assert status.startswith("saved Mic (x_vector, "), status
    voice_id = stored(browser)["Mic"]
    assert picker(browser)["Mic"] == voice_id
    browser.find_element(By.CSS_SELECTOR, f'#stored-voices li[data-id="{voice_id}"] button').click()
    wait.until(lambda d: stored(d) == {})


def test_the_library_is_hidden_for_a_model_that_cannot_clone(server, browser):
    from selenium.webdriver.common.by import By

    open_page(browser, server)
    assert not browser.find_element(By.ID, "library").is_displayed()
