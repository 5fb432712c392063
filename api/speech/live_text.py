"""A turn's text fed word by word into one running engine request, for a model that reads text
while it speaks (Qwen3-TTS's streaming text track; `PromptFrontend.takes_live_text`).

The request starts with the turn's first whole words (`prepare(live=True)`), not at a sentence's
end; every later word reaches it while it speaks (`EngineClient.extend_text`), and the turn's
end (a Flush) is its last piece. The engine keeps such a stream going between words that come
slower than it reads them (engine/request_table.py's fillers). Text goes in whole words only, so
it tokenizes as the whole text would: up to the last whitespace, or an open word that nothing
has continued for OPEN_WORD_SECONDS (a client that sends "Hello" and then " world").

What cannot go into one running request goes after it, sentence by sentence as for other
families (`rest`, a live SpeechSegments): SSML (its breaks are silence between requests), and
text beyond what the request has room to read.
"""
from __future__ import annotations

import asyncio
import re
import uuid
from typing import Callable

from api.speech.planning import NothingToSpeak, PlannedText, SegmentPlanner, SpeechSegments
from api.speech.synthesis import Segment
from api.speech.voice_choice import VoiceChoice
from engine.client import EngineClient
from model.sampling import SamplingParams
from model.text import normalize as normalize_text

# How long an open word (no whitespace after it yet) waits for more of it before it is read as
# whole: an LLM's tokens come tens of milliseconds apart, a person's words hundreds.
OPEN_WORD_SECONDS = 0.2
# Frames a live request keeps per text token it reads: it reads one token a frame but speaks
# about 3 frames a token, and the request's outputs bound its frames, so its text is capped at
# its output budget over this.
FRAMES_PER_TEXT_TOKEN = 4

_LAST_SPACE = re.compile(r"\s+\S*\Z")  # the whitespace before the open word, and the open word


class LiveTextSegments:
    """One speak-socket turn on a model that reads live text, as a SegmentSource.

    Invariants: its first segment is one engine request (`request_id`, known before the request
    is sent) whose prompt holds the first whole words; every later character the turn takes
    (`add_text`, while `live`) reaches that request once, in order, in whole words, and never
    before the client has registered the request; the request's text ends (its last piece
    final) exactly once, at `close_live`, `extend`, `finish`, or when more text would take it
    over its cap; after that, text goes to `rest` (segments after the live one, in order), and
    `add_text` takes none."""

    def __init__(self, client: EngineClient, planner: SegmentPlanner, voice: VoiceChoice, speed: float,
                 params: SamplingParams, pronounce: Callable[[str], str] = lambda text: text) -> None:
        self._client = client
        self._planner = planner
        self._voice = voice
        self._speed = speed
        self._params = params
        self._pronounce = pronounce
        self.rest: SpeechSegments = planner.plan_live(voice, speed, params)
        self.live = True  # it takes text; False once its text has ended
        self.request_id: str | None = None  # set when its segment is handed out
        self._buffer = ""  # text taken but not sent: before the prompt, or the open word
        self._unsent: list[int] = []  # ids of whole words taken before the request was registered
        self._registered = False
        self._final = False  # its last piece is decided (sent once registered)
        self._job: asyncio.Future | None = None  # the first words' prompt
        self._first_text = ""
        self._chars = 0  # the text the request reads, all of it: its budget once it ends
        self._first_words = asyncio.Event()  # a prompt is on its way, or the text has ended
        self._handed_out = False
        self._tokens_left = 0  # text ids the request may still take (set once its prompt is known)
        self._open_word_timer: asyncio.TimerHandle | None = None

    # ---- text in -------------------------------------------------------------------------------

    @property
    def open_word(self) -> str:
        """The word the text taken so far ends in, if more of it may come (for the run limit)."""
        return "" if not self._buffer or self._buffer[-1].isspace() else self._buffer.split()[-1]

    def add_text(self, text: str) -> str:
        """Takes `text` into the running request; returns what it did not take (all of it once
        not `live`: the caller cuts that into sentences and `extend`s)."""
        if not self.live:
            return text
        self._buffer += text
        self._cancel_timer()
        whole, self._buffer = _split_open_word(self._buffer)
        overflow = self._take(whole) if whole else ""
        if overflow:
            return overflow + self._buffer_taken_back()
        if self._buffer.strip():
            self._open_word_timer = asyncio.get_running_loop().call_later(OPEN_WORD_SECONDS, self._take_open_word)
        return ""

    def extend(self, texts: list[str | PlannedText]) -> None:
        """Segments after the live request (SSML's, or sentences cut by the caller): its text ends."""
        self.close_live()
        self.rest.extend(texts)

    def close_live(self) -> None:
        """Ends the running request's text with what is buffered (the turn's end, or what must come after it)."""
        if not self.live:
            return
        self._cancel_timer()
        rest, self._buffer = self._buffer, ""
        if rest.strip():
            self._take_or_follow(rest)
        self.live = False
        self._final = True
        self._first_words.set()
        self._send()

    def finish(self) -> None:
        """The turn's end (Flush or Close)."""
        self.close_live()
        self.rest.finish()

    def _take(self, text: str) -> str:
        """Whole words to the request: the first ones start its prompt, later ones are sent;
        returns the text it had no room for (its text then ends)."""
        if self._job is None:
            self._start(text)
            return ""
        ids = self._client.frontend.live_text_ids(self._read(text))
        if self._handed_out and len(self._unsent) + len(ids) > self._tokens_left:
            self.live, self._final = False, True
            self._send()
            return text
        self._unsent += ids
        self._chars += len(text)
        self._send()
        return ""

    def _buffer_taken_back(self) -> str:
        back, self._buffer = self._buffer, ""
        return back

    def _take_open_word(self) -> None:
        self._open_word_timer = None
        if self.live and self._buffer.strip():
            word, self._buffer = self._buffer, ""
            self._take_or_follow(word)

    def _take_or_follow(self, text: str) -> None:
        """`_take`, and what the request has no room for is spoken after it."""
        overflow = self._take(text)
        if overflow:
            self.rest.extend([overflow])

    def _read(self, text: str) -> str:
        """What the model reads of a later piece: the pronunciations in force, then the
        normalizer when the voice asks for it (the first words go through the prompt pool's)."""
        text = self._pronounce(text)
        return normalize_text(text, "english").text if self._voice.normalize else text

    def _start(self, text: str) -> None:
        """The prompt of the first words (at most a first segment's worth: the rest is sent once
        the request is registered), prepared in the pool as a speech's first segment."""
        head, tail = _first_words(text, self._planner.settings.first_segment_max_words)
        if tail:
            self._unsent += self._client.frontend.live_text_ids(self._read(tail))
        self._chars += len(text)
        self._first_text = head
        self._job = self._planner.pool.submit(self._pronounce(head), self._voice, self._speed,
                                              arrival=self._planner.pool.next_arrival(), index=0, first=True,
                                              max_tokens=self._planner.token_limit(True), live=True)
        self._first_words.set()

    def _send(self) -> None:
        if not self._registered:  # (set only once `request_id` is)
            return
        if self._unsent or self._final:
            ids, self._unsent = self._unsent, []
            self._tokens_left -= len(ids)
            # Its budget grows with its text, as a segment's of that text would be (the engine
            # adds the fillers it reads): admission plans for what it has been given, and a
            # model that would not end stops as it would after a whole text.
            self._client.extend_text(self.request_id, ids, final=self._final, max_tokens=self._outputs_for(self._chars))
            if self._final:
                self._registered = False  # nothing more goes to it

    def _outputs_for(self, chars: int) -> int:
        """The output budget of `chars` characters of text, as a segment of them gets."""
        rate = self._planner.limits.outputs_per_second
        return min(self._params.max_tokens, self._planner.settings.max_tokens_for_chars(chars, rate))

    def _cancel_timer(self) -> None:
        if self._open_word_timer is not None:
            self._open_word_timer.cancel()
            self._open_word_timer = None

    # ---- SegmentSource -------------------------------------------------------------------------

    async def next(self) -> Segment | None:
        if not self._handed_out and self.request_id is None:
            await self._first_words.wait()
            if self._job is not None:
                prompt = await self._job
                context = self._planner.limits.context_tokens - len(prompt.token_ids)
                self._tokens_left = max(0, min(self._params.max_tokens, context) // FRAMES_PER_TEXT_TOKEN)
                params = self._params.replace(max_tokens=self._outputs_for(self._chars))
                self._handed_out = True
                self.request_id = uuid.uuid4().hex
                # NOTE: the synthesis sends the request once this returns, before it next yields
                # to the event loop; what was taken meanwhile follows it then.
                asyncio.get_running_loop().call_soon(self._registered_now)
                return Segment(self._first_text, params, prompt, request_id=self.request_id)
        try:
            return await self.rest.next()
        except NothingToSpeak:
            if self._handed_out:
                return None
            raise

    def _registered_now(self) -> None:
        self._registered = True
        self._send()

    def outputs_after(self) -> int:
        return self.rest.outputs_after()

    def close(self) -> None:
        self._cancel_timer()
        if self._job is not None:
            self._job.cancel()
        self.live = False
        self._registered = False
        self.rest.close()

    def take_trailing_pause(self) -> float:
        return self.rest.take_trailing_pause()


def _split_open_word(text: str) -> tuple[str, str]:
    """`text` as (whole words, open word): cut before the whitespace that precedes its last
    word, which may go on in the next piece ("Hello wor" → ("Hello", " wor")); text that ends in
    whitespace is all whole words but that whitespace, which the next word takes."""
    match = _LAST_SPACE.search(text)
    if match is None:
        return "", text
    return text[: match.start()], text[match.start():]


def _first_words(text: str, count: int) -> tuple[str, str]:
    """`text` cut before its `count + 1`-th word (the cut's whitespace goes with the tail, as a
    later piece's leading space does)."""
    words = re.finditer(r"\S+", text)
    for k, word in enumerate(words):
        if k == count:
            start = word.start()
            while start and text[start - 1].isspace():
                start -= 1
            return text[:start], text[start:]
    return text, ""
