"""What a model family must provide so the engine can serve it without special cases.

A family answers four questions for the engine: how a request's positions become input
embeddings (`embed`), what a step emits at a sequence's last position (`head`, then `emit`: a
sampled token, or a continuous frame), how an emitted output turns into audio frames and when the stream ends
(`accept`), and which codec turns frames into PCM. Prompt preparation (text → `SpeechPrompt`)
lives in a separate `PromptFrontend` so the API process can run it without the weights.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, Sequence

import torch

from model.backbone import Backbone
from model.codecs.base import FrameCodec
from model.families.cloning import ClonedVoice, CloneRefused, VoiceCloner
from model.sampling import SamplingParams

# The language a request names when it names none: the model's own choice (Qwen3-TTS detects it
# from the text) or its only language.
AUTO_LANGUAGE = "auto"


@dataclass(frozen=True, slots=True)
class SpokenWord:
    """One word of a prompt's text as written, and where the model will speak it: seconds
    [start, end) of the prompt's audio (the model's own time, before any time-stretch), with
    0 <= start <= end."""

    word: str
    start: float
    end: float


@dataclass(slots=True)
class SpeechPrompt:
    """A prepared prompt: the token ids the backbone prefills into the KV cache, plus optional
    family conditioning (e.g. a time-aligned prior of shape [frames, channels]) and the number of
    frames when the family knows it after prompt processing."""

    token_ids: list[int]
    conditioning: torch.Tensor | None = None
    num_frames: int | None = None
    # Separates prefix-cache entries of prompts whose token ids match but whose meaning does not.
    cache_salt: str = ""
    num_text_tokens: int = 0
    # Every spoken word's place in the audio, in order, when prompt processing fixes it (the
    # family's front end says so by `word_timestamps`); empty otherwise.
    words: tuple[SpokenWord, ...] = ()
    # False for live text (`PromptFrontend.prepare(live=True)`): more of it comes while the
    # stream speaks (`SpeechFamily.extend_text`), the last piece marked final.
    text_complete: bool = True
    # Frames [n, *frame_shape] the codec decodes before the stream's own and whose audio is not
    # the stream's (an in-context clone's reference clip, which its model continues): the stream's
    # codec starts from the state they leave (engine/audio/primers.py). None: from silence.
    codec_prefix: torch.Tensor | None = None

    # NOTE: a prompt crosses to the engine core through a multiprocessing pipe, whose pickler
    # would move a tensor into a /dev/shm segment held open by both processes until both copies
    # die (the API process kept ~100 such files after an abort storm); as an array it is plain
    # bytes in the message.
    # A family's prompt may subclass this one with more fields; every tensor field crosses as an array.
    def __getstate__(self) -> dict:
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        tensors = [name for name, value in state.items() if isinstance(value, torch.Tensor)]
        for name in tensors:
            state[name] = state[name].detach().cpu().numpy()
        return {"fields": state, "tensors": tensors}

    def __setstate__(self, state: dict) -> None:
        for name, value in state["fields"].items():
            object.__setattr__(self, name, torch.from_numpy(value) if name in state["tensors"] else value)


@dataclass(slots=True)
class FrameUpdate:
    """What one accepted output contributed: zero or more complete frames, and whether the
    stream has ended by itself (stop token, or all frames known in advance produced). The audio
    stage holds `frames` as they are until it decodes them: nothing writes to them afterwards."""

    frames: torch.Tensor | None = None
    finished: bool = False


class StreamState:
    """Per-request state a family keeps between steps. Invariant: after n accepted outputs,
    positions [0, prompt_len + n) have defined inputs. The engine's scheduler counts the outputs;
    a family keeps what it needs of the outputs themselves."""

    def __init__(self, prompt: SpeechPrompt, params: SamplingParams) -> None:
        self.prompt = prompt
        self.params = params
        self.num_frames = 0

    @property
    def prompt_len(self) -> int:
        return len(self.prompt.token_ids)

    @property
    def num_invalid_outputs(self) -> int:
        """Outputs accepted but dropped as unusable (e.g. a code invalid at its frame position)."""
        return 0

    @property
    def max_outputs(self) -> int:
        """The most outputs this stream may produce (sampling's max_tokens, or a known length)."""
        return self.params.max_tokens


class GraphEmitter(Protocol):
    """`head` and `emit` of a decode step as fixed-shape tensor work over persistent buffers, so a
    CUDA graph can capture them after the backbone (engine/runner/decode_graphs.py)."""

    def prepare(self, streams: Sequence[StreamState], emits: Sequence[bool], padded: int) -> None:
        """Host side, before a replay: fills the buffers of rows [0, len(streams)) from the streams
        (`emits[i]`: row i's output is real) and marks rows up to `padded` as padding."""

    def emit(self, hidden: torch.Tensor) -> torch.Tensor:
        """Captured: one output row per row of hidden [P, hidden_size], in a persistent buffer."""

    def outputs(self, emitted: torch.Tensor) -> list[Any]:
        """Host side, after a replay: `emit`'s first B rows as the outputs `accept` takes."""


class SpeechFamily(ABC):
    """A loaded model family: backbone (which the engine uses only as a `Backbone`), codec and the
    per-position input/output rules."""

    name: str
    codec: FrameCodec
    backbone: Backbone

    @property
    @abstractmethod
    def max_model_len(self) -> int: ...

    @property
    def outputs_per_second(self) -> float:
        """Outputs per second of audio: by default each output is one codec frame."""
        return self.codec.sample_rate / self.codec.samples_per_frame

    @abstractmethod
    def new_stream(self, prompt: SpeechPrompt, params: SamplingParams) -> StreamState: ...

    @abstractmethod
    def embed(self, spans: Sequence[tuple[StreamState, int, int]]) -> torch.Tensor:
        """Input embeddings [sum(end - start), hidden] for positions start..end-1 of each stream."""

    @abstractmethod
    def head(self, hidden: torch.Tensor) -> Any:
        """The model's output layer on the hidden states [B, hidden] of the streams that emit this
        step: logits for a token family; a continuous family returns its frames here; a family
        with a depth stage returns what that stage needs too (e.g. the hidden states). Counted as
        model forward time, unlike `emit`."""

    @abstractmethod
    def emit(self, head_out: Any, streams: Sequence[StreamState]) -> list[Any]:
        """One output per stream from `head`'s result: a sampled token, or a frame (a depth
        stage, such as Qwen3-TTS's code predictor, runs here, batched across the streams)."""

    def reserve(self, max_rows: int) -> None:
        """Allocates the per-step workspaces `emit` needs for up to `max_rows` streams (before the
        KV pool is sized from what memory is left, so they are counted)."""

    @abstractmethod
    def accept(self, stream: StreamState, output: Any) -> FrameUpdate:
        """Appends `output` to the stream (it becomes the input of the next position)."""

    def graph_emitter(self, max_rows: int) -> GraphEmitter | None:
        """An emitter a decode graph of up to `max_rows` rows captures, or None: then `head` and
        `emit` run eagerly after each replay."""
        return None

    def release(self, stream: StreamState) -> None:
        """The stream has ended (finished, aborted or failed): drop what the family holds for it."""

    def extend_text(self, stream: StreamState, text_ids: Sequence[int], final: bool) -> None:
        """More of a live prompt's text (`PromptFrontend.live_text_ids`), read while the stream
        speaks; `final`: the text ends with it. ValueError for a family, or a stream, that took
        its whole text in the prompt."""
        raise ValueError(f"{self.name} takes its whole text in the prompt: it cannot read text while it speaks")

    def needs_input(self, stream: StreamState) -> bool:
        """Whether the stream's next position waits for text not received yet (a live prompt that
        has read all it was given): it keeps its blocks and takes no step until `extend_text`."""
        return False

    def can_fill_input(self, stream: StreamState) -> bool:
        """Whether a stream that `needs_input` may read a filler instead of the text it waits
        for (`fill_input`), so that it goes on speaking what it has read while its listener is
        about to run dry. False for a family without one, and for a stream that has read as many
        fillers in a row as it may (its model has said all it read by then: a gap beats babble)."""
        return False

    def fill_input(self, stream: StreamState) -> None:
        """Puts a filler where the text the stream waits for would go (`can_fill_input` first)."""
        raise ValueError(f"{self.name} has no filler for text that has not arrived")


class PromptFrontend(ABC):
    """Text → SpeechPrompt for one model; cheap to load (tokenizer or phonemizer, no weights).
    Invariant: `prepare` accepts exactly the `voices` and the `languages` (in any case; None is
    AUTO_LANGUAGE) it publishes, and reads `instructions` only when `reads_instructions` (without
    it they are ignored, or refused with BadInstructions by a checkpoint that cannot take them)."""

    model_name: str
    sample_rate: int
    voices: tuple[str, ...]
    # The languages `prepare(language=...)` takes, lower-case names, AUTO_LANGUAGE (the model's
    # own choice, or its only language) first.
    languages: tuple[str, ...]
    # Whether `prepare(instructions=...)` reads them (style, emotion, a designed voice).
    reads_instructions: bool = False
    # The speeds the model itself can speak at (`prepare(speed=...)`, through its durations);
    # (1, 1) for a model without rate control. The API asks the model for the nearest speed in
    # range and time-stretches the rest.
    speed_range: tuple[float, float] = (1.0, 1.0)
    # Whether `prepare` fills `SpeechPrompt.words` (a model whose prompt processing aligns text
    # to frames, e.g. through a duration model); models that find their timing while
    # generating cannot say where a word falls before its audio exists.
    word_timestamps: bool = False
    # Whether its prompt is built from normalized text whatever a request asks ("$3.50" said as
    # "three dollars and fifty cents": model/text), as a phoneme front end's is (joe). For the
    # others (they read raw text) the API normalizes a request's text when it asks (`normalize`).
    always_normalizes: bool = False
    # Whether the model speaks in voices cloned from a clip (model/families/cloning.py): then
    # `voice_cloner()` loads its encoders and `prepare(clone=...)` speaks in what they made.
    clones: bool = False
    # Whether `prepare` reads phonemes written inline in the text, Piper's way: `[[ h ə l oʊ ]]`
    # is said as those phonemes (whitespace inside separates words). Such a front end refuses a
    # run with a symbol it has no id for (PhonemesRefused); the others read `[[` as text.
    reads_phonemes: bool = False

    def check_phonemes(self, phonemes: str) -> None:
        """Raises PhonemesRefused unless every symbol of `phonemes` (IPA, as inside `[[ ]]`) is
        one the model speaks; a model that does not `reads_phonemes` refuses any."""
        raise PhonemesRefused(f"the model {self.model_name} reads text, not phonemes")

    def takes_live_text(self, clone: ClonedVoice | None = None) -> bool:
        """Whether the model reads text while it speaks, in this voice: then `prepare(live=True)`
        makes a prompt of the text so far, and `live_text_ids` the ids of each later piece
        (SpeechFamily.extend_text). Models that need whole sentences: False."""
        return False

    def live_text_ids(self, text: str) -> list[int]:
        """The ids of a later piece of a live prompt's text, as `extend_text` takes them."""
        raise ValueError(f"the model {self.model_name} cannot read text while it speaks")

    def voice_cloner(self) -> VoiceCloner:
        """The model's encoders (loaded on the first call; weights, unlike the front end itself).
        Raises CloneRefused (param `voice`) for a model that cannot clone."""
        raise CloneRefused(f"the model {self.model_name} cannot clone voices", param="voice")

    def model_speed(self, speed: float) -> float:
        low, high = self.speed_range
        return min(max(speed, low), high)

    @abstractmethod
    def prepare(self, text: str, voice: str, speed: float = 1.0, max_tokens: int | None = None, *,
                language: str | None = None, instructions: str | None = None) -> SpeechPrompt:
        """The prompt of `text` in `voice`, read as `language` (None: AUTO_LANGUAGE), with
        `instructions` if the model reads them. With `max_tokens`, a prompt that would be longer
        raises PromptTooLong before the costly part of preparation runs (a tokenizer's or
        phonemizer's count first, then any model): the caller cuts the text and asks again, so
        what one call may cost is bounded by `max_tokens` whatever text it is given. An unknown
        voice raises VoiceNotFoundError, a language not in `languages` LanguageNotSupported,
        instructions the checkpoint cannot take (or needs and lacks) BadInstructions. A front end
        that `clones` also takes `clone=` (a ClonedVoice its own cloner made; `voice` is then
        its id), and refuses another model's with CloneRefused; one that `takes_live_text` takes
        `live=True`: `text` is what has arrived so far, the prompt's `text_complete` is False."""

    def check_language(self, language: str | None) -> None:
        """Raises LanguageNotSupported unless `language` (None: AUTO_LANGUAGE) is one of `languages`."""
        if (language or AUTO_LANGUAGE).lower() not in self.languages:
            raise LanguageNotSupported(language or AUTO_LANGUAGE, self.languages)

    def expected_outputs(self, prompt: SpeechPrompt) -> int | None:
        """How many outputs `prompt` will produce, when prompt processing already knows it."""
        return None

    @abstractmethod
    def default_sampling(self) -> SamplingParams: ...


class PromptTooLong(ValueError):
    """`prepare` refused a text whose prompt would have `tokens` tokens, over its `limit`."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"the prompt would have {tokens} tokens; at most {limit}")
        self.tokens, self.limit = tokens, limit


class OptionRefused(ValueError):
    """`prepare` cannot honour one of a request's options for this model; `param` names it."""

    param: str


class PhonemesRefused(OptionRefused):
    """Phonemes given inline (`[[ ]]`), in SSML's `phoneme` or in a pronunciation that the model
    cannot say: a symbol it has no id for, or a model that reads no phonemes at all."""

    param = "input"


class LanguageNotSupported(OptionRefused):
    """A request named `language`, which is not one of the model's `available` languages."""

    param = "language"

    def __init__(self, language: str, available: tuple[str, ...]) -> None:
        super().__init__(f"unsupported language {language!r}; available: {', '.join(available)}")
        self.language, self.available = language, available


class BadInstructions(OptionRefused):
    """A request's `instructions` do not suit the checkpoint: missing where they describe the
    voice (e.g. Qwen3-TTS VoiceDesign), given where the checkpoint cannot read them."""

    param = "instructions"


@dataclass(slots=True)
class VoiceNotFoundError(ValueError):
    voice: str
    available: tuple[str, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        return f"unknown voice {self.voice!r}; available: {', '.join(self.available)}"
