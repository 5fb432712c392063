"""The capacity flags (admission and slack thresholds) map onto CapacityConfig, 'none' turning
admission and skipping off."""
from __future__ import annotations

import argparse

import pytest

from api.config.engine_args import add_engine_args, engine_config_from_args
from capacity.config import CapacityConfig


def parse(*argv: str):
    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    return engine_config_from_args(parser.parse_args(list(argv))).capacity


def test_defaults_are_the_config_defaults():
    assert parse() == CapacityConfig()
    assert parse("--pace-slack-seconds", "2").pace_slack_seconds == 2.0


def test_the_audio_thresholds_default_to_the_codecs_and_each_flag_sets_its_field():
    assert (parse().urgent_slack_seconds, parse().defer_slack_seconds) == (None, None)
    set_ = parse("--urgent-slack-seconds", "0", "--defer-slack-seconds", "0.5", "--feed-slack-seconds", "0.25")
    assert (set_.urgent_slack_seconds, set_.defer_slack_seconds, set_.feed_slack_seconds) == (0.0, 0.5, 0.25)
    with pytest.raises(ValueError, match="0: never urgent"):
        parse("--urgent-slack-seconds", "-1")


def test_flags_set_their_fields_and_none_turns_them_off():
    assert parse("--max-queue-delay", "0.5", "--skip-slack-seconds", "2").max_queue_delay == 0.5
    assert parse("--skip-slack-seconds", "2").skip_slack_seconds == 2.0
    off = parse("--max-queue-delay", "none", "--skip-slack-seconds", "None")
    assert off.max_queue_delay is None and off.skip_slack_seconds is None


def test_a_delay_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="max_queue_delay"):
        parse("--max-queue-delay", "0")
