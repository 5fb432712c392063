"""Our SNAC decoder against the `snac` package at the size of the 24 kHz model Orpheus uses (the
tiny codec's checks are tests/model/test_snac_parity.py's)."""
from __future__ import annotations

import pytest
import torch

from model.codecs.snac import SnacConfig, SnacDecoder

pytest.importorskip("snac")

from tests.model.test_snac_parity import (assert_close_and_not_trivial, random_codes, reference_snac,  # noqa: E402
                                          without_reference_noise, write_snac_folder)


def test_24khz_model_matches_snac(tmp_path, monkeypatch):
    config = SnacConfig()
    reference = reference_snac(config, seed=21)
    write_snac_folder(reference, config, tmp_path)
    ours = SnacDecoder.from_pretrained(tmp_path)
    ours.noise = False
    without_reference_noise(monkeypatch)
    codes = random_codes(config, batch=2, n=2, seed=22)
    with torch.inference_mode():
        assert_close_and_not_trivial(ours.decode(codes), reference.decode(codes))

