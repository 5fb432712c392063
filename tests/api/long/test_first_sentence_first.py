"""First sentence first with the built-in voice: segments cut by text carry the whole text's
phonemes (about 5 s: the teacher's front end runs over the 30 benchmark sentences twice). The
speech endpoint speaking them all, end to end, is tests/api/live/test_first_sentence_first.py's."""
from __future__ import annotations

import pytest

from tests.voice_packages import require_voice_packages

require_voice_packages()

from api.config.settings import ApiSettings  # noqa: E402
from api.speech.text_split import plan_texts  # noqa: E402
from evaluation import eval_sentences  # noqa: E402
from model.families.joe.prompt import JoePromptFrontend  # noqa: E402
from model.families.joe.student import SHIPPED_WEIGHTS, read_config  # noqa: E402

SENTENCES = eval_sentences()
TEXT = " ".join(SENTENCES)  # 1,820 characters


@pytest.fixture(scope="module")
def frontend() -> JoePromptFrontend:
    return JoePromptFrontend(read_config(SHIPPED_WEIGHTS))


def planned_texts() -> list[str]:
    settings = ApiSettings()
    return plan_texts(TEXT, settings.first_segment_max_words, settings.max_segment_chars)


def test_segments_carry_the_whole_texts_phonemes(frontend):
    texts = planned_texts()
    assert texts[0] == SENTENCES[0] and len(texts) > 2
    # joe phonemizes and runs its duration model sentence by sentence (frontend.py), so segments
    # cut at sentence ends hold the whole text's phonemes and frames, in order. Each prompt ends
    # with the student's step slot.
    pieces = [frontend.prepare(text, "joe") for text in texts]
    whole = frontend.prepare(TEXT, "joe")
    assert [i for piece in pieces for i in piece.token_ids[:-1]] == whole.token_ids[:-1]
    assert sum(piece.num_frames for piece in pieces) == whole.num_frames
