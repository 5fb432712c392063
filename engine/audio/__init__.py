"""The streaming audio stage: each request's frames → PCM chunks, in order, exactly once.

config.py    StreamingConfig: how streams are cut into windows (None: the codec's own value)
chunking.py  the size of each stream's next chunk, by its listener's slack (capacity/listener.py)
decoder.py   StreamingDecoder: windows batched across streams, crossfaded, emitted in order; on
             the CPU, a codec with an incremental decoder is fed each stream's frames once
             instead, and the chunks are cut from its exact audio
runners.py   where a batch decodes: in the step, or on a CUDA side stream
graphs.py    the codec's window decodes replayed from CUDA graphs
primers.py   the codec states streams with a codec prefix start from, decoded once per prefix
stage.py     AudioStage: what the engine core opens, pushes to, steps and finishes
"""
