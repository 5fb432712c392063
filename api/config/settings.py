"""HTTP-side settings: what the API enforces and derives, separate from the engine's config."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class ApiSettings:
    """Limits of the HTTP surface; every field is valid once constructed.

    A request's token budget is derived from its text so that a short input cannot run for
    minutes: `(min_audio_seconds + characters * audio_seconds_per_char) * outputs_per_second`, the
    rate the engine reports for its model (EngineLimits).
    Conversational English runs near 0.07 s per character; 0.25 leaves room for slow voices.

    A speech's first engine request is its first sentence (at most `first_segment_max_words`
    words of it); later ones pack whole sentences, up to as many characters as came before them
    and at most `max_segment_chars` (api/speech/text_split.py). `prompt_workers` threads prepare prompts
    (api/speech/prompt_pool.py).
    """

    # Every key the server accepts (none: no auth); each owns its voices (api/http/auth.py).
    api_keys: tuple[str, ...] = ()
    max_body_bytes: int = 64 * 1024
    # The voice library (api/voices/): where voices are stored (None: no library), the largest
    # upload (a 30 s clip as 48 kHz stereo WAV is 11 MB; compressed formats far less), and the
    # most voices one key (or, without keys, the server) may hold.
    voices_dir: str | None = None
    max_voice_upload_bytes: int = 16 * 1024 * 1024
    max_voices_per_owner: int = 100
    # An upload is decoded in a process of its own (api/voices/clip_decoder.py): at most this
    # many at once, each with this much address space, CPU time and wall-clock time for its
    # upload (docs/operations.md "Voice uploads" has what decoding takes).
    clip_decoders: int = 2
    clip_decoder_memory_mb: int = 512
    clip_decoder_cpu_seconds: float = 2.0
    clip_decoder_timeout_seconds: float = 5.0
    # Uploads in progress (api/http/upload_slots.py): each holds its body in memory, so they are
    # bounded in all and per API key; one more is a 429 before its body is read.
    max_uploads_in_progress: int = 4
    max_uploads_per_key: int = 2
    # Whether requests to a model that reads raw text (Orpheus, Qwen3-TTS) have their text
    # normalized ("$3.50" → "three dollars and fifty cents") unless they say otherwise.
    normalize_text: bool = False
    # A pronunciation lexicon file (model/text/lexicon.py: word → phonemes or a respelling) applied
    # to every request, under each request's own `pronunciations`; None: none.
    lexicon: str | None = None
    # A request body must arrive within this long (64 KiB in 30 s: 2 KiB/s), or it is a 408.
    body_timeout_seconds: float = 30.0
    default_sample_rate: int = 24000
    audio_seconds_per_char: float = 0.25
    min_audio_seconds: float = 2.0
    # Seconds a client is told to wait (Retry-After) when the engine's queue is full.
    retry_after_seconds: int = 1
    first_segment_max_words: int = 30
    # About 15 sentences, a minute of speech: well inside joe's context; Orpheus' text budget
    # (0.25 s a character) cuts its segments further after preparation.
    max_segment_chars: int = 1000
    # NOTE: 2 on the 2-core machine: docs/operations.md "Prompt workers" has the measurement.
    prompt_workers: int = 2
    # Prompts of short texts said again are kept (api/speech/prompt_cache.py) within this many
    # MiB; 0: none kept.
    prompt_cache_mb: float = 32.0
    # Backpressure (api/speech/backpressure.py): an engine request pauses while more than this much of
    # its audio waits for a client that does not read, and a client that then takes nothing for
    # `stalled_client_seconds` is disconnected.
    client_backlog_seconds: float = 10.0
    stalled_client_seconds: float = 30.0
    # FastAPI's /docs and /redoc pages (their JavaScript comes from a CDN).
    enable_docs: bool = False
    # Bounded cost per request, on every route (docs/operations.md, "Limits"). A segment is cut
    # to at most `max_segment_words` words (and `max_segment_chars` characters) before it is
    # prepared, and its prompt to at most `max_prompt_tokens` tokens: the front end counts them
    # before its costly part and refuses a longer one, and the text is cut again. Prose runs at
    # about 2.1 of joe's phoneme ids a character, so a segment of 1,000 characters fits; digits
    # read aloud at ten, which is why characters alone bound nothing. A run of more than
    # `max_word_chars` characters without whitespace cannot be cut sensibly and is refused.
    max_segment_words: int = 200
    max_prompt_tokens: int = 2560
    # What one speech (or one speak-socket turn) may say, counted after SSML, pronunciations and
    # normalization (api/speech/spoken_budget.py): twice the input limit's characters, ~10 min of
    # English; the seconds bound also counts SSML pauses, slow speeds and ideographs.
    max_spoken_chars: int = 8192
    max_speech_seconds: float = 900.0
    # A first segment's prompt is bounded lower: its first audio waits on its preparation, and
    # so does every speech's that arrives after it (first segments go in arrival order). A first
    # sentence of 30 words of prose (~350 of joe's ids) fits; ~0.15 s of joe's preparation.
    first_segment_max_tokens: int = 384
    max_word_chars: int = 256
    # The speak socket (api/deepgram/socket.py): the most text one Speak message may carry
    # (Deepgram's 2,000 characters) and one turn (the text between two Flushes: the REST
    # routes' 4,096), the most bytes of one message, how long a connection may sit with no
    # message and nothing to send, and how long one send may wait on a client that reads nothing.
    socket_max_speak_chars: int = 2000
    socket_max_turn_chars: int = 4096
    socket_max_message_bytes: int = 64 * 1024
    socket_idle_seconds: float = 300.0
    socket_send_timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if not all(isinstance(key, str) and key.strip() == key and key for key in self.api_keys):
            raise ValueError("api_keys must be non-empty strings without surrounding whitespace")
        if self.max_voice_upload_bytes < self.max_body_bytes or self.max_voices_per_owner < 1:
            raise ValueError("max_voice_upload_bytes must be >= max_body_bytes and max_voices_per_owner >= 1")
        if self.clip_decoders < 1 or self.clip_decoder_memory_mb < 1:
            raise ValueError("clip_decoders and clip_decoder_memory_mb must be >= 1")
        if not self.clip_decoder_cpu_seconds > 0 or not self.clip_decoder_timeout_seconds > 0:
            raise ValueError("clip_decoder_cpu_seconds and clip_decoder_timeout_seconds must be > 0")
        if self.max_uploads_in_progress < 1 or self.max_uploads_per_key < 1:
            raise ValueError("max_uploads_in_progress and max_uploads_per_key must be >= 1")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if not self.client_backlog_seconds > 0 or not self.stalled_client_seconds > 0:
            raise ValueError("client_backlog_seconds and stalled_client_seconds must be > 0")
        if not self.body_timeout_seconds > 0:
            raise ValueError(f"body_timeout_seconds must be > 0, got {self.body_timeout_seconds}")
        if not 8000 <= self.default_sample_rate <= 48000:
            raise ValueError(f"default_sample_rate must be in [8000, 48000], got {self.default_sample_rate}")
        if not self.audio_seconds_per_char > 0 or not self.min_audio_seconds >= 0:
            raise ValueError("audio_seconds_per_char must be > 0 and min_audio_seconds >= 0")
        if self.retry_after_seconds < 1:
            raise ValueError(f"retry_after_seconds must be >= 1, got {self.retry_after_seconds}")
        if self.first_segment_max_words < 1 or self.max_segment_chars < 1 or self.prompt_workers < 1:
            raise ValueError("first_segment_max_words, max_segment_chars and prompt_workers must be >= 1")
        counts = {name: getattr(self, name) for name in (
            "max_segment_words", "max_prompt_tokens", "first_segment_max_tokens", "max_word_chars", "max_spoken_chars",
            "socket_max_speak_chars",
            "socket_max_turn_chars", "socket_max_message_bytes")}
        if (small := [name for name, value in counts.items() if value < 1]):
            raise ValueError(f"{', '.join(small)} must be >= 1")
        if not self.socket_idle_seconds > 0 or not self.socket_send_timeout_seconds > 0:
            raise ValueError("socket_idle_seconds and socket_send_timeout_seconds must be > 0")
        if not self.max_speech_seconds > 0:
            raise ValueError(f"max_speech_seconds must be > 0, got {self.max_speech_seconds}")

    def max_tokens_for(self, text: str, outputs_per_second: float) -> int:
        return self.max_tokens_for_chars(len(text), outputs_per_second)

    def max_tokens_for_chars(self, chars: int, outputs_per_second: float) -> int:
        seconds = self.min_audio_seconds + chars * self.audio_seconds_per_char
        return max(1, math.ceil(seconds * outputs_per_second))
