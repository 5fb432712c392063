"""The released Qwen3-TTS-12Hz CustomVoice checkpoints' sizes, for random checkpoints at real size.

No checkpoint can be downloaded where Chorus is benchmarked (a GPU machine lent without internet,
this project's CI), yet speed depends on sizes, not on weight values. `random-qwen3-0.6b` and
`random-qwen3-1.7b` are random bfloat16 checkpoints (as the downloads are stored) at those sizes,
written on first use by tiny_random.py's writer, at the sizes the released config.json and
speech_tokenizer/config.json state (read from published copies of those files: the checkpoints
themselves were never on the machines that wrote this).

What differs from a download, and why it does not change the speed of a step: the text vocabulary
is the tiny tokenizer's (a lookup costs the same in a table of 320 rows as of 151,936, which would
add 1.2 GB of memory and nothing to a step), the speakers and languages are the tiny layout's
(ids, not sizes), and the codec has no encoder (CustomVoice never encodes). The sampling defaults
are the released generation_config.json's but for the length: random weights never finish saying
the text (end of speech comes about once in 2,000 frames), so `max_new_tokens` cuts each utterance
at 256 frames (20.5 s, a paragraph's length) where the release allows 8,192.
"""
from __future__ import annotations

import torch

from model.families.qwen3_tts.tiny_random import Qwen3Shape, layer_sizes

# The released sampling defaults (the talker and the code predictor sample alike, without top-p),
# with utterances cut at 256 frames (the module's docstring says why).
GENERATION = dict(do_sample=True, top_k=50, top_p=1.0, temperature=0.9, repetition_penalty=1.05,
                  subtalker_dosample=True, subtalker_top_k=50, subtalker_top_p=1.0,
                  subtalker_temperature=0.9, max_new_tokens=256)
# Both sizes: a 5-layer code predictor 1,024 wide (a projection from a wider talker), codebooks of 2,048.
CODE_PREDICTOR = layer_sizes(1024, 3072, 5, 16, 8, 128, 65536, 1_000_000)
# The 12 Hz decoder: an 8-layer transformer 512 wide over 1,024-dim latents, then 1,536-channel
# convolutions upsampling 2 x 2 x 8 x 5 x 4 x 3 = 1,920 samples a frame at 24 kHz.
DECODER = dict(codebook_dim=512, latent_dim=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=8,
               num_attention_heads=16, num_key_value_heads=16, head_dim=64, sliding_window=72,
               upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], decoder_dim=1536)


def _released(name: str, size_tag: str, talker_width: int, talker_mlp: int) -> Qwen3Shape:
    talker = layer_sizes(talker_width, talker_mlp, 28, 16, 8, 128, 32768, 1_000_000, text_hidden_size=2048,
                    mrope_section=[24, 20, 20])
    return Qwen3Shape(name=name, size_tag=size_tag, codebook=2048, talker=talker, predictor=CODE_PREDICTOR,
                      decoder=DECODER, generation=GENERATION, dtype=torch.bfloat16, has_base=False)


RELEASE_SHAPES = {shape.name: shape for shape in (
    _released("random-qwen3-0.6b", "0b6", 1024, 3072),
    _released("random-qwen3-1.7b", "1b7", 2048, 6144),
)}
