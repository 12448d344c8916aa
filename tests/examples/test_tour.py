"""The tour (``examples/tour.py``) says what it checks: step 5 names exactly the rules it checks, and
its speed ratio is a median with its range over alternated rounds (timed here with a fake clock)."""
import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np

import rules
from examples import tour

# The same rules and JAX functions as the tour's cases, on small shapes: a run takes seconds.
SMALL = {(4096, 4, 4): (3, 4, 4), (128, 128): (6, 6), (256, 32): (8, 3), (1024, 8, 8): (2, 5, 5),
         (32, 256): (3, 8)}


def _named_rules(heading: str) -> set[str]:
    return set(re.findall(r"\brules\.(\w+)", heading))


def test_heading_names_the_rules_of_the_cases_and_claims_no_more():
    heading = tour.scoreboard_heading(tour.CASES)
    assert _named_rules(heading) == {case.rule for case in tour.CASES} == {"inv", "qr", "lq"}
    assert "every linear-algebra rule" not in heading and not heading.startswith("5. every")
    assert f"{tour.ROUNDS} alternated rounds" in heading


def test_step_5_checks_exactly_the_rules_it_names(monkeypatch, capsys):
    checked, timed = [], []

    def spy_check_rrule(f, *args, **kwargs):
        checked.append(f)

    def spy_time_ratio(ours, theirs, *args, **kwargs):
        timed.append(args)
        return 1.0, 0.9, 1.1

    monkeypatch.setattr(rules.testing, "check_rrule", spy_check_rrule)
    monkeypatch.setattr(tour, "time_ratio", spy_time_ratio)
    cases = [dataclasses.replace(case, shape=SMALL[case.shape]) for case in tour.CASES]
    tour.step_scoreboard(jax.random.PRNGKey(0), cases)
    out = capsys.readouterr().out
    heading, rows = out.split("\n   inv", 1)

    by_identity = {id(getattr(rules, name)): name for name in rules.__all__}
    assert [by_identity[id(f)] for f in checked] == [case.rule for case in tour.CASES]
    assert _named_rules(heading) == {by_identity[id(f)] for f in checked}
    assert rows.count("check_rrule: passed") == len(tour.CASES)
    # what the heading calls the float32 gradient time is timed in float32
    assert [a.dtype for (a,) in timed] == [jnp.float32] * len(tour.CASES)
    assert rows.count("time ours/JAX 1.00× (0.90–1.10 over 7 rounds)") == len(tour.CASES)


class FakeClock:
    """A clock that moves only when a fake function runs; records who ran."""

    def __init__(self):
        self.now, self.log = 0.0, []

    def __call__(self):
        return self.now

    def function(self, name, durations):
        durations = iter(durations)

        def fn(*args):
            self.log.append(name)
            self.now += next(durations)
            return jnp.zeros(())

        return fn


def test_time_ratio_alternates_rounds_and_reports_median_and_range():
    clock = FakeClock()
    # one compiling call each, then 3 rounds of 2 calls: ours takes 3, 1, 2 per call, JAX's 1
    ours = clock.function("ours", [100.0, 3.0, 3.0, 1.0, 1.0, 2.0, 2.0])
    theirs = clock.function("jax", [50.0] + [1.0] * 6)
    median, low, high = tour.time_ratio(ours, theirs, rounds=3, calls=2, clock=clock)
    assert clock.log == ["ours", "jax"] + ["ours", "ours", "jax", "jax"] * 3
    assert (median, low, high) == (2.0, 1.0, 3.0)  # the median of the ratios 3, 1, 2, not the mean


def test_time_ratio_median_resists_one_slow_round():
    clock = FakeClock()
    ours = clock.function("ours", [0.0] + [1.0] * 4 + [40.0])
    theirs = clock.function("jax", [0.0] + [2.0] * 5)
    median, low, high = tour.time_ratio(ours, theirs, rounds=5, calls=1, clock=clock)
    assert (median, low, high) == (0.5, 0.5, 20.0)


def test_time_ratio_picks_enough_calls_for_a_round():
    clock = FakeClock()  # durations that are exact in binary, so the count of calls is exact too
    ours = clock.function("ours", [1.0] + [0.125] * 100)
    theirs = clock.function("jax", [1.0] + [0.25] * 100)
    median, low, high = tour.time_ratio(ours, theirs, rounds=2, clock=clock, round_seconds=1.0)
    # compile, one timed call each to size the rounds (by the slower one, 0.25 s: 4 calls), 2 rounds
    assert clock.log == ["ours", "jax"] * 2 + (["ours"] * 4 + ["jax"] * 4) * 2
    assert (median, low, high) == (0.5, 0.5, 0.5)


def test_time_ratio_of_real_functions_runs():
    f = jax.jit(lambda a: a * 2.0)
    median, low, high = tour.time_ratio(f, f, jnp.ones(3), rounds=3, calls=2)
    assert low <= median <= high and np.isfinite([low, high]).all()  # never a bound on the values


def test_format_ratio():
    assert tour.format_ratio(0.97, 0.912, 1.05, 7) == "0.97× (0.91–1.05 over 7 rounds)"
