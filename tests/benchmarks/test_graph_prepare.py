"""benchmarks/graph_prepare.py: a decode-graph step's host calls, for a kept batch and a new one."""
from __future__ import annotations

import json

import torch

from benchmarks.graph_prepare import main, measure

CPU = torch.device("cpu")


def test_a_kept_batch_prepares_its_noise_and_little_else():
    """What follows from the rows' params stays in the buffers: an unseeded batch that comes again
    costs the same few calls at any size (its noise, drawn for all rows at once), under a quarter
    of a new batch's (every row's params and slot, the padding), where it made most of them before."""
    small, large = measure(4, seeded=False, repeats=3, device=CPU), measure(8, seeded=False, repeats=3, device=CPU)
    assert small["calls_kept"] == large["calls_kept"]
    assert 4 * small["calls_kept"] < small["calls_changed"] < large["calls_changed"]


def test_seeded_rows_add_their_generator_calls():
    unseeded, seeded = measure(4, seeded=False, repeats=3, device=CPU), measure(4, seeded=True, repeats=3, device=CPU)
    assert seeded["calls_kept"] >= unseeded["calls_kept"] + 2 * 4  # code 0's and the sub-steps', per row


def test_main_writes_one_json_line(capsys):
    main(["--rows", "2", "--repeats", "2"])
    line = json.loads(capsys.readouterr().out)
    assert set(line["rows"]["2"]) == {"calls_kept", "us_kept", "calls_changed", "us_changed"}
    assert line["command"] == "python -m benchmarks.graph_prepare --rows 2 --repeats 2"
