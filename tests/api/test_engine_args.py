"""The admission and deadline flags map onto SchedulerConfig, 'none' turning each off."""
from __future__ import annotations

import argparse

import pytest

from api.engine_args import add_engine_args, engine_config_from_args


def parse(*argv: str):
    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    return engine_config_from_args(parser.parse_args(list(argv))).scheduler


def test_defaults_are_the_config_defaults():
    scheduler = parse()
    assert (scheduler.max_queue_delay, scheduler.skip_slack_seconds) == (1.0, 4.0)


def test_flags_set_their_fields_and_none_turns_them_off():
    assert parse("--max-queue-delay", "0.5", "--skip-slack-seconds", "2").max_queue_delay == 0.5
    assert parse("--skip-slack-seconds", "2").skip_slack_seconds == 2.0
    off = parse("--max-queue-delay", "none", "--skip-slack-seconds", "None")
    assert off.max_queue_delay is None and off.skip_slack_seconds is None


def test_a_delay_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="max_queue_delay"):
        parse("--max-queue-delay", "0")
