"""Streaming a 'same'-padded convolution stack piece by piece equals decoding it whole.

The stack mixes every streaming part (a plain convolution, residual dilated ones, an upsampler,
a delay line aligning two branches) like the joe iSTFT decoder does; the property holds for any
split of the utterance into pieces, any batch of streams at different positions, and both of its
edges (the masks stand in for each layer's zero padding).
"""
from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor, nn
from torch.nn import functional as F

from model.codecs.streaming_conv import Delay, Positions, StreamingConv, StreamingUpsample

SLOPE = 0.1
RATE = 4


class TinyStack(nn.Module):
    """conv(k5) → leaky → upsample ×4 → two residual branches of different lags, summed."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.pre = nn.Conv1d(3, 6, 5, padding=2)
        self.up = nn.ConvTranspose1d(6, 4, 2 * RATE, RATE, padding=RATE // 2)
        self.fast = nn.Conv1d(4, 4, 3, dilation=1, padding=1)
        self.slow = nn.Conv1d(4, 4, 5, dilation=3, padding=6)

    def forward(self, z: Tensor) -> Tensor:
        x = self.up(F.leaky_relu(self.pre(z), SLOPE))
        fast = x + self.fast(F.leaky_relu(x, SLOPE))
        slow = x + self.slow(F.leaky_relu(x, SLOPE))
        return fast + slow


class StreamedStack:
    def __init__(self, stack: TinyStack) -> None:
        self.pre = StreamingConv(stack.pre)
        self.up = StreamingUpsample.of(stack.up, SLOPE)
        self.fast = StreamingConv(stack.fast, SLOPE, residual=True)
        self.slow = StreamingConv(stack.slow, SLOPE, residual=True)
        self.align = Delay(4, self.slow.delay - self.fast.delay, torch.float32)
        self.layers = [self.pre, self.up, self.fast, self.slow, self.align]
        # Output position p of a piece fed at frame c is c * RATE - lag + p.
        self.lag = self.pre.delay * RATE + self.up.padding + self.slow.delay

    def initial_state(self, batch: int) -> list[Tensor]:
        return [torch.zeros(batch, layer.channels, layer.state_length) for layer in self.layers]

    def __call__(self, z: Tensor, before: Tensor, totals: Tensor, states: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        new = []

        def run(layer, x, state):
            y, state = layer(x, state)
            new.append(state)
            return y

        at = Positions(before, totals)
        at, z = at.shifted(self.pre.delay), at.apply(z)
        x = at.apply(run(self.pre, z, states[0]))
        at = at.scaled(RATE, -self.up.padding)
        x = at.apply(run(self.up, x, states[1]))
        fast = at.shifted(self.fast.delay).apply(run(self.fast, x, states[2]))
        slow = at.shifted(self.slow.delay).apply(run(self.slow, x, states[3]))
        return run(self.align, fast, states[4]) + slow, new


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=3), data=st.data())
def test_streamed_pieces_equal_the_whole_decode(lengths, data):
    stack, streamed = TinyStack().eval(), None
    streamed = StreamedStack(stack)
    flush = -(-streamed.lag // RATE)
    with torch.no_grad():
        for length in lengths:
            z = torch.randn(1, 3, length)
            whole = stack(z)[0]
            pieces = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=length))
            states, fed, out = streamed.initial_state(1), 0, []
            while fed < length:
                n = min(pieces[len(out) % len(pieces)], length - fed)
                y, states = streamed(z[..., fed : fed + n], torch.tensor([fed]), torch.tensor([Positions.OPEN]), states)
                out.append(y)
                fed += n
            y, states = streamed(torch.randn(1, 3, flush), torch.tensor([fed]), torch.tensor([length]), states)
            audio = torch.cat(out + [y], dim=-1)[0, :, streamed.lag : streamed.lag + length * RATE]
            # The flush fed random frames: past the end they count as zero padding all the same.
            assert torch.allclose(audio, whole, atol=1e-5), (audio - whole).abs().max()


def test_a_batch_of_streams_at_different_positions_decodes_each_as_alone():
    stack = TinyStack().eval()
    streamed = StreamedStack(stack)
    z = torch.randn(2, 3, 30)
    with torch.no_grad():
        # Stream 0 is 10 frames ahead of stream 1; both then take 6 frames in one batch.
        states = streamed.initial_state(2)
        ahead = [s[:1] for s in streamed.initial_state(1)]
        _, ahead = streamed(z[:1, :, :10], torch.tensor([0]), torch.tensor([Positions.OPEN]), ahead)
        behind = [s[1:] for s in states]
        states = [torch.cat([a, b]) for a, b in zip(ahead, behind)]
        batch, _ = streamed(torch.stack([z[0, :, 10:16], z[1, :, 0:6]]), torch.tensor([10, 0]),
                            torch.tensor([Positions.OPEN, Positions.OPEN]), states)
        alone, _ = streamed(z[1:, :, 0:6], torch.tensor([0]), torch.tensor([Positions.OPEN]), streamed.initial_state(1))
    assert torch.allclose(batch[1:], alone, atol=1e-6)


def test_positions_mask_both_edges_and_nothing_between():
    at = Positions(torch.tensor([-2, 5]), torch.tensor([Positions.OPEN, 8]))
    mask = at.apply(torch.ones(2, 1, 4))[:, 0]
    assert mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 0]]
    assert at.scaled(4, -2).start.tolist() == [-10, 18] and at.scaled(4, -2).end.tolist()[1] == 32


def test_refuses_layers_it_cannot_stream():
    import pytest

    with pytest.raises(ValueError, match="same"):
        StreamingConv(nn.Conv1d(2, 2, 4, padding=1))
    with pytest.raises(ValueError, match="stride"):
        StreamingUpsample(torch.zeros(2, 2, 6), None, 4, None)


def test_each_layers_state_owns_only_its_own_memory():
    """A state that were a view of its layer's whole input would keep that input alive with it:
    every layer's at once until a step ends (hundreds of MiB a stream for a long feed on a GPU)."""
    streamed = StreamedStack(TinyStack())
    _, states = streamed(torch.randn(2, 3, 40), torch.zeros(2, dtype=torch.long), torch.full((2,), 100),
                         streamed.initial_state(2))
    for state in states:
        assert state.untyped_storage().nbytes() == state.numel() * state.element_size()
