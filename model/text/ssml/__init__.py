"""SSML, the W3C's Speech Synthesis Markup Language (1.1), as far as Chorus's models can honour
it: a `<speak>` document read into the parts it says.

Vocabulary: a *part* (SpeechPart) is text said in one go at one rate; its *pause* is the silence
after it. A document's parts end at its breaks, its sentence and paragraph ends and where its
rate changes; everything else it marks up (say-as, phoneme, sub) becomes text inside a part.
parser.py says what is read and what is refused.
"""
from model.text.ssml.parser import is_ssml, parse_ssml
from model.text.ssml.parts import SpeechPart, SsmlError

__all__ = ["SpeechPart", "SsmlError", "is_ssml", "parse_ssml"]
