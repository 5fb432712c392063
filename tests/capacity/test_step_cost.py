"""The step-cost model: priors first, then what the observed steps say, forgetting the old ones."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.step_cost import PRIOR_COEFFICIENTS, StepCostModel, _solve3


def observe_mix(model: StepCostModel, a: float, b: float, c: float, repeats: int) -> None:
    for _ in range(repeats):
        for rows, tokens in ((2, 0), (9, 0), (16, 0), (4, 64), (1, 200)):
            model.observe(rows, tokens, a + b * rows + c * tokens)


def test_before_any_step_the_prior_speaks():
    model = StepCostModel()
    a, b, c = PRIOR_COEFFICIENTS
    assert model.predict(10, 20) == pytest.approx(a + 10 * b + 20 * c)


def test_varied_steps_recover_the_true_costs():
    model = StepCostModel()
    observe_mix(model, 0.004, 0.0015, 0.00003, repeats=40)
    assert model.coefficients == pytest.approx((0.004, 0.0015, 0.00003), rel=0.05, abs=2e-6)


def test_old_steps_are_forgotten_when_the_machine_slows_down():
    model = StepCostModel(forgetting=0.95, forward_forgetting=0.95)
    observe_mix(model, 0.004, 0.0015, 0.00003, repeats=40)
    observe_mix(model, 0.008, 0.003, 0.00006, repeats=40)
    assert model.predict(12) == pytest.approx(0.008 + 12 * 0.003, rel=0.05)


def test_steps_all_of_one_size_predict_that_size_exactly():
    model = StepCostModel()
    for _ in range(200):
        model.observe(16, 0, 0.065)
    assert model.predict(16) == pytest.approx(0.065, rel=0.01)
    assert model.predict(17) > model.predict(16)  # the prior still says how rows add


def test_one_huge_step_is_clipped():
    model = StepCostModel()
    for _ in range(100):
        model.observe(8, 0, 0.03)
    model.observe(8, 0, 10.0)  # a pause of the whole process
    assert model.predict(8) < 0.03 * 1.5


def test_prefill_tokens_within_a_time():
    model = StepCostModel(prior=(0.5, 0.25, 0.125))  # exact in binary
    assert model.prefill_tokens_within(2.0, decode_rows=2) == 8  # (2 - 0.5 - 2 * 0.25) / 0.125
    assert model.predict(2, 8) == 2.0
    assert model.prefill_tokens_within(0.9, decode_rows=2) == 0  # the rows alone take 1 s


def test_the_tail_is_the_usual_worst_step_not_the_mean():
    """One step in five twice as long as the rest: the mean sits between, the tail on the slow ones."""
    model = StepCostModel()
    for i in range(400):
        model.observe(8, 0, 0.04 if i % 5 == 0 else 0.02)
    assert 0.02 < model.predict(8) < 0.04
    assert model.predict_tail(8) == pytest.approx(0.04, rel=0.05)


def test_a_run_of_steps_overruns_by_far_less_than_each_steps_tail():
    """One step in five twice as long as the rest: each step's tail is the slow one, but 64 steps
    in a row hold 12 or 13 slow ones, whatever the order, and overrun their mean by a fraction
    of one step."""
    model = StepCostModel()
    for i in range(300):
        model.observe(8, 0, 0.04 if i % 5 == 0 else 0.02)
    one_step_excess = model.predict_tail(8) - model.predict(8)
    assert model.overrun(8)(1) == pytest.approx(one_step_excess, rel=0.15)
    assert model.overrun(8)(64) < 0.1 * 64 * one_step_excess


def test_steps_that_match_the_line_have_no_tail():
    model = StepCostModel()
    observe_mix(model, 0.004, 0.0015, 0.00003, repeats=40)
    assert model.tail_factor == pytest.approx(1.0, abs=0.02)
    assert model.predict_tail(10, 20) == pytest.approx(model.predict(10, 20), rel=0.02)


def test_config_is_validated():
    with pytest.raises(ValueError, match="forgetting"):
        StepCostModel(forgetting=0)
    with pytest.raises(ValueError, match="prior"):
        StepCostModel(prior=(0.01, -1.0, 0.0))


observation = st.tuples(st.integers(0, 64), st.integers(0, 512), st.floats(0.0, 2.0))


@settings(max_examples=100, deadline=None)
@given(st.lists(observation, min_size=1, max_size=60))
def test_any_observations_keep_costs_non_negative_and_monotone(observations):
    model = StepCostModel()
    for rows, tokens, seconds in observations:
        model.observe(rows, tokens, seconds)
        assert min(model.coefficients) >= 0
        assert model.predict(rows + 1, tokens) >= model.predict(rows, tokens)
        assert model.predict(rows, tokens + 1) >= model.predict(rows, tokens)
        assert model.tail_factor >= 1 and model.predict_tail(rows, tokens) >= model.predict(rows, tokens)
        assert model.overrun(rows)(64) >= model.overrun(rows)(1) >= 0


def test_the_prefill_rate_comes_from_the_forward_alone():
    """The rest of a step (the codec) scatters and happens to be slow on the steps that carry a
    prefill; the forward, which alone grows with a prompt, still gives c."""
    model = StepCostModel()
    for i in range(60):
        for rows, tokens in ((4, 0), (16, 0), (12, 0), (16, 130), (8, 40)):
            forward = 0.002 + 0.0005 * rows + 0.0001 * tokens
            rest = 0.001 + 0.002 * rows + (0.03 if tokens else 0.0) + 0.01 * (i % 3)
            model.observe(rows, tokens, forward + rest, forward)
    a, b, c = model.coefficients
    assert c == pytest.approx(0.0001, rel=0.05)
    assert b == pytest.approx(0.0025, rel=0.2)
    whole = StepCostModel()  # the same steps without their forward time: c takes the codec's 0.03
    for i in range(60):
        for rows, tokens in ((4, 0), (16, 0), (12, 0), (16, 130), (8, 40)):
            whole.observe(rows, tokens, 0.003 + 0.0025 * rows + 0.0001 * tokens + (0.03 if tokens else 0.0) + 0.01 * (i % 3))
    assert whole.coefficients[2] > 3 * c


def test_a_forward_longer_than_its_step_counts_as_the_whole_step():
    model = StepCostModel()
    for _ in range(50):
        model.observe(8, 0, 0.02, forward_seconds=0.05)
    assert model.predict(8) == pytest.approx(0.02, rel=0.02)


@given(st.lists(st.floats(-50.0, 50.0), min_size=9, max_size=9), st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3))
@settings(max_examples=200, deadline=None)
def test_the_normal_equations_are_solved(entries, rhs):
    """_solve3 on symmetric positive definite systems of the normal equations' scales (a Gram
    matrix plus the identity): the residual is at rounding level."""
    rows = [entries[0:3], entries[3:6], entries[6:9]]
    m = [[sum(rows[k][i] * rows[k][j] for k in range(3)) + (i == j) for j in range(3)] for i in range(3)]
    x = _solve3(m, rhs)
    scale = max(1.0, max(abs(v) for row in m for v in row)) * max(1.0, max(abs(v) for v in x))
    for i in range(3):
        assert abs(sum(m[i][j] * x[j] for j in range(3)) - rhs[i]) <= 1e-9 * scale
