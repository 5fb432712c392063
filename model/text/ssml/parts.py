"""What an SSML document says: its parts (SpeechPart), and the writer that cuts a document's text
into them as the parser reads it (PartWriter)."""
from __future__ import annotations

from dataclasses import dataclass, replace

# A <p> ends with a pause longer than a sentence's (which the model makes itself).
PARAGRAPH_PAUSE = 0.5
# Silence is cheap to ask for and costs a stream's time to play: a document may ask for this much.
MAX_TOTAL_PAUSE = 60.0
_TERMINALS = ".!?…"
# What may close a sentence after its terminal punctuation ('He said "no."').
_CLOSERS = "\"')]}”’»"
# What may end a clause but not a sentence: replaced by a period when a sentence ends there.
_CLAUSE_ENDS = ",;:-–—"


class SsmlError(ValueError):
    """An SSML document that cannot be spoken: malformed, unsafe, or asking for what Chorus does
    not support. The message names the element, attribute or value, and the line and column
    where the parser was when it knows them."""


@dataclass(frozen=True, slots=True)
class SpeechPart:
    """Text said in one go at one rate, then silence. Invariant: `text` has no whitespace but
    single spaces between words and none at its edges; `rate` (a multiplier on the request's
    speed) is in the range prosody.py allows; `pause_after` >= 0 seconds, and a part with no
    text has a pause (it is silence alone)."""

    text: str
    rate: float = 1.0
    pause_after: float = 0.0


class PartWriter:
    """The parts of a document, written as its text and pauses arrive in document order.

    Invariant: `parts` are closed; `_pending` is the text said at `_rate` since the last part
    closed (`_spoken`: whether any of it is more than whitespace); `said` counts the pieces of
    text said so far, whitespace aside (an element compares it to know if it said something). A
    part closes at a pause, at a sentence end, and when text at another rate arrives; text and
    the inline elements between it join the pending part, so a <sub> mid-sentence does not cut
    the sentence. The pauses written so far sum to at most MAX_TOTAL_PAUSE."""

    def __init__(self) -> None:
        self.parts: list[SpeechPart] = []
        self._pending: list[str] = []
        self._spoken = False
        self._rate = 1.0
        self._paused = 0.0
        self.said = 0

    def say(self, text: str, rate: float) -> None:
        """`text` said at `rate` after what came before (whitespace included as written)."""
        if not text or text.isspace():
            # Whitespace joins words whatever the rate: it never starts a part of its own.
            self._pending.append(text)
            return
        if rate != self._rate:
            if self._spoken:
                self._close(0.0)
            self._rate = rate
        self._pending.append(text)
        self._spoken = True
        self.said += 1

    def pause(self, seconds: float) -> None:
        """Silence after what was said so far; two pauses with nothing said between add up. A
        pause of 0 (<break strength="none">) is no break at all: the sentence goes on."""
        if seconds <= 0:
            return
        self._paused += seconds
        if self._paused > MAX_TOTAL_PAUSE:
            raise SsmlError(f"the document's breaks add up to over {MAX_TOTAL_PAUSE:g} seconds")
        if self._spoken:
            self._close(seconds)
        elif self.parts:
            last = self.parts[-1]
            self.parts[-1] = replace(last, pause_after=last.pause_after + seconds)
            self._pending.clear()
        else:
            self.parts.append(SpeechPart("", self._rate, seconds))
            self._pending.clear()

    def end_sentence(self, pause: float = 0.0) -> None:
        """The text so far ends a sentence (punctuated as one: the model hears where it ends),
        then `pause` seconds of silence."""
        if self._spoken:
            self._close(0.0, sentence=True)
        elif self.parts and self.parts[-1].text:
            # Nothing was said since the last part closed, so the sentence ends with it.
            last = self.parts[-1]
            if _as_sentence(last.text) != last.text:
                self.parts[-1] = replace(last, text=_as_sentence(last.text))
        self.pause(pause)

    def finish(self) -> list[SpeechPart]:
        if self._spoken:
            self._close(0.0)
        if not self.parts:
            raise SsmlError("nothing to speak: the document has no text and no breaks")
        return self.parts

    def _close(self, pause: float, sentence: bool = False) -> None:
        text = " ".join("".join(self._pending).split())
        if sentence:
            text = _as_sentence(text)
        self.parts.append(SpeechPart(text, self._rate, pause))
        self._pending.clear()
        self._spoken = False


def _as_sentence(text: str) -> str:
    ending = text.rstrip(_CLOSERS)[-1:]
    if ending and ending in _TERMINALS:
        return text
    return text.rstrip(_CLAUSE_ENDS).rstrip() + "."
