"""Our SNAC decoder against the `snac` package (the reference; runtime code never imports it).

Tolerance: float32 outputs agree within 1e-5 absolute (measured ≤ 1e-6 on the tiny codec); the
outputs themselves have a standard deviation of about 0.1, checked so agreement is not trivial.
"""
from __future__ import annotations

import json

import pytest
import torch

from model.codecs.snac import SnacConfig, SnacDecoder, save_random_snac, tiny_snac_config
from model.codecs.snac_frames import SnacFrameCodec

snac = pytest.importorskip("snac")

ATOL = 1e-5


def reference_snac(config: SnacConfig, seed: int) -> torch.nn.Module:
    """snac.SNAC with its parameters moved off their initial values (α = 1, g = ‖v‖)."""
    torch.manual_seed(seed)
    model = snac.SNAC(**config.to_dict()).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("alpha") or name.endswith("original0"):
                param.mul_(torch.empty_like(param).uniform_(0.5, 1.5))
            elif name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.05)
    return model


def write_snac_folder(model: torch.nn.Module, config: SnacConfig, path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config.to_dict()))
    torch.save(model.state_dict(), path / "pytorch_model.bin")


def random_codes(config: SnacConfig, batch: int, n: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    top = config.vq_strides[0]
    return [
        torch.randint(0, config.codebook_size, (batch, n * top // stride), generator=generator)
        for stride in config.vq_strides
    ]


def tiny_decoder(path) -> SnacDecoder:
    return SnacDecoder.from_pretrained(save_random_snac(path, tiny_snac_config()))


def without_reference_noise(monkeypatch) -> None:
    monkeypatch.setattr(snac.layers.NoiseBlock, "forward", lambda self, x: x)


def assert_close_and_not_trivial(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    assert theirs.std() > 1e-3, "reference output is flat: the comparison would prove nothing"
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "config",
    [
        tiny_snac_config(),
        SnacConfig(encoder_dim=8, decoder_dim=32, codebook_size=64, noise=False, depthwise=False),
    ],
    ids=["tiny", "no-noise-blocks-not-depthwise"],
)
def test_decode_matches_snac_with_noise_disabled(config, tmp_path, monkeypatch):
    reference = reference_snac(config, seed=1)
    write_snac_folder(reference, config, tmp_path)
    ours = SnacDecoder.from_pretrained(tmp_path)
    ours.noise = False
    without_reference_noise(monkeypatch)
    codes = random_codes(config, batch=2, n=3, seed=2)
    with torch.inference_mode():
        expected = reference.decode(codes)
        actual = ours.decode(codes)
    assert actual.shape == (2, 1, 3 * config.vq_strides[0] * config.hop_length)
    assert_close_and_not_trivial(actual, expected)


def test_noise_draws_match_snac_for_the_same_seed(tmp_path):
    config = tiny_snac_config()
    reference = reference_snac(config, seed=3)
    write_snac_folder(reference, config, tmp_path)
    ours = SnacDecoder.from_pretrained(tmp_path)
    assert ours.noise
    codes = random_codes(config, batch=2, n=2, seed=4)
    with torch.inference_mode():
        torch.manual_seed(7)
        expected = reference.decode(codes)
        torch.manual_seed(7)
        actual = ours.decode(codes)
        ours.noise = False
        quiet = ours.decode(codes)
    assert_close_and_not_trivial(actual, expected)
    assert (actual - quiet).abs().max() > 1e-3, "noise on and off must differ"


def test_legacy_weight_g_weight_v_keys_load(tmp_path, monkeypatch):
    config = tiny_snac_config()
    reference = reference_snac(config, seed=5)
    legacy = {
        key.replace(".parametrizations.weight.original0", ".weight_g").replace(
            ".parametrizations.weight.original1", ".weight_v"
        ): value
        for key, value in reference.state_dict().items()
    }
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    torch.save(legacy, tmp_path / "pytorch_model.bin")
    ours = SnacDecoder.from_pretrained(tmp_path)
    ours.noise = False
    without_reference_noise(monkeypatch)
    codes = random_codes(config, batch=1, n=2, seed=6)
    with torch.inference_mode():
        assert_close_and_not_trivial(ours.decode(codes), reference.decode(codes))


def test_save_random_snac_is_a_snac_checkpoint(tmp_path, monkeypatch):
    config = tiny_snac_config()
    folder = save_random_snac(tmp_path / "codec", config, seed=11)
    reference = snac.SNAC(**json.loads((folder / "config.json").read_text())).eval()
    reference.load_state_dict(torch.load(folder / "pytorch_model.bin"))  # strict: every key
    ours = SnacDecoder.from_pretrained(folder)
    ours.noise = False
    without_reference_noise(monkeypatch)
    codes = random_codes(config, batch=2, n=2, seed=12)
    with torch.inference_mode():
        expected = reference.decode(codes)
        assert_close_and_not_trivial(ours.decode(codes), expected)
    assert expected.abs().max() < 0.99, "random weights should not saturate the output tanh"


def test_save_random_snac_is_seeded(tmp_path):
    config = tiny_snac_config()
    first = torch.load(save_random_snac(tmp_path / "a", config, seed=1) / "pytorch_model.bin")
    again = torch.load(save_random_snac(tmp_path / "b", config, seed=1) / "pytorch_model.bin")
    other = torch.load(save_random_snac(tmp_path / "c", config, seed=2) / "pytorch_model.bin")
    assert first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[key], again[key]) for key in first)
    assert not torch.equal(first["decoder.model.0.bias"], other["decoder.model.0.bias"])


def test_from_pretrained_casts_and_freezes(tmp_path):
    folder = save_random_snac(tmp_path, tiny_snac_config())
    ours = SnacDecoder.from_pretrained(folder, device="cpu", dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in ours.parameters())
    assert 0.05e6 < sum(p.numel() for p in ours.parameters()) < 0.3e6


def test_unsupported_configs_fail_clearly(tmp_path):
    with pytest.raises(NotImplementedError, match="attention"):
        SnacDecoder(SnacConfig(attn_window_size=32))
    with pytest.raises(ValueError, match="decoder_dim"):
        SnacConfig(decoder_dim=100)
    (tmp_path / "config.json").write_text(json.dumps({"sampling_rate": 24000, "bogus": 1}))
    with pytest.raises(ValueError, match="bogus"):
        SnacConfig.from_file(tmp_path / "config.json")
    decoder = SnacDecoder(tiny_snac_config())
    with pytest.raises(ValueError, match="level 2"):
        decoder.decode([torch.zeros(1, n, dtype=torch.long) for n in (2, 4, 7)])


def test_frame_codes_land_at_their_level_and_index(tmp_path, monkeypatch):
    codec = SnacFrameCodec(tiny_decoder(tmp_path))
    seen: list[list[torch.Tensor]] = []
    monkeypatch.setattr(
        codec.decoder, "decode", lambda codes: seen.append(codes) or torch.zeros(2, 1, 3 * 2048)
    )
    # Code = 100·batch + 10·frame + position, so each value says where it came from.
    batch, frame, position = torch.meshgrid(
        torch.arange(2), torch.arange(3), torch.arange(7), indexing="ij"
    )
    pcm = codec.decode(100 * batch + 10 * frame + position)
    assert pcm.shape == (2, 3 * 2048) and pcm.dtype == torch.float32
    level0, level1, level2 = seen[0]
    for b in range(2):
        base = 100 * b
        assert level0[b].tolist() == [base + 10 * f for f in range(3)]
        assert level1[b].tolist() == [base + 10 * f + p for f in range(3) for p in (1, 4)]
        assert level2[b].tolist() == [base + 10 * f + p for f in range(3) for p in (2, 3, 5, 6)]


def test_frame_codec_decodes_like_the_reference_unpacking(tmp_path):
    decoder = tiny_decoder(tmp_path)
    decoder.noise = False
    codec = SnacFrameCodec(decoder)
    frames = torch.randint(0, 1024, (1, 3, 7), generator=torch.Generator().manual_seed(0))
    flat = frames.flatten().tolist()
    # The Orpheus reference unpacking, written out by hand.
    levels: list[list[int]] = [[], [], []]
    for j in range(3):
        f = flat[7 * j : 7 * j + 7]
        levels[0] += [f[0]]
        levels[1] += [f[1], f[4]]
        levels[2] += [f[2], f[3], f[5], f[6]]
    with torch.inference_mode():
        expected = decoder.decode([torch.tensor([level]) for level in levels])[:, 0]
    assert codec.sample_rate == 24000 and codec.samples_per_frame == 2048
    torch.testing.assert_close(codec.decode(frames), expected, atol=0, rtol=0)


def test_frame_codec_rejects_bad_frames(tmp_path):
    codec = SnacFrameCodec(tiny_decoder(tmp_path))
    with pytest.raises(ValueError, match=r"\[0, 1024\)"):
        codec.decode(torch.full((1, 1, 7), 1024))
    with pytest.raises(ValueError, match=r"\[0, 1024\)"):
        codec.decode(torch.full((1, 1, 7), -1))
    with pytest.raises(ValueError, match="frames must be"):
        codec.decode(torch.zeros(1, 1, 6, dtype=torch.long))
