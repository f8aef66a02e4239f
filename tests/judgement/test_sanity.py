"""The sanity gate against the published decision files and a guessing observer."""

from __future__ import annotations

import functools
import json
import math
import random

import pytest

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import read_decisions
from modelval.behaviour.shape_bias import compute_shape_bias
from modelval.cli import main
from modelval.judgement.sanity import SANITY_THRESHOLD, VERDICT, sanity_check

RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"


@pytest.mark.parametrize(
    ("file", "low", "high"),
    [
        (RESNET, 0.60, 0.62),  # (162 + 572) / 1200
        ("style-transfer-512-nomask-experiment_vgg16_session-1.csv", 0.75, 0.77),  # (84 + 828) / 1200
        ("style-transfer-512-nomask-experiment_subject-01_session_1.csv", 0.6, 0.9),
    ],
)
def test_published_observers_pass(modelval_reference_dir, file, low, high):
    sanity = sanity_check(compute_shape_bias(read_decisions(modelval_reference_dir / file), n_bootstrap=0))
    assert sanity.passed and low <= sanity.cue_accuracy <= high


@pytest.fixture
def guessing_file(modelval_reference_dir, tmp_path):
    """The published ResNet-50 file with every response replaced by a seeded random category."""
    rng = random.Random(0)
    lines = (modelval_reference_dir / RESNET).read_text().splitlines()
    rows = [line.split(",") for line in lines[1:]]
    out = tmp_path / "guessing.csv"
    out.write_text("\n".join([lines[0], *(",".join([*r[:4], rng.choice(CATEGORIES), *r[5:]]) for r in rows)]) + "\n")
    return out


def test_a_guessing_observer_fails_near_chance(guessing_file):
    sanity = sanity_check(compute_shape_bias(read_decisions(guessing_file), n_bootstrap=0))
    assert not sanity.passed and 0.08 < sanity.cue_accuracy < 0.18  # chance: 2/16
    assert VERDICT in sanity.message() and "weights were not loaded" in sanity.message()


def test_cli_refuses_to_report_it(guessing_file, capsys):
    assert main(["shape-bias", "--decisions", str(guessing_file), "--json"]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["verdict"] == VERDICT
    assert report["sanity"]["passed"] is False and report["sanity"]["threshold"] == SANITY_THRESHOLD
    assert VERDICT in captured.err
    assert main(["shape-bias", "--decisions", str(guessing_file), "--no-sanity-gate"]) == 0


def test_cli_reports_a_passing_gate(modelval_reference_dir, capsys):
    assert main(["shape-bias", "--decisions", str(modelval_reference_dir / RESNET), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sanity"] == {
        "passed": True,
        "cue_accuracy": pytest.approx(734 / 1200),
        "threshold": 0.3,
        "decided_early": None,  # a decision file: every decision is there, nothing to decide early
    }


# --- deciding early: an exact bound on a random sample of the conflict stimuli -------------------------------


def test_the_bound_is_the_exact_hypergeometric_tail():
    from scipy.stats import hypergeom

    from modelval.judgement.sanity import _hypergeometric_cdf

    for hits, sampled, successes in [(20, 160, 360), (4, 32, 360), (40, 320, 360), (47, 64, 359), (0, 32, 1199)]:
        exact = float(_hypergeometric_cdf(hits, sampled, successes, 1200))
        assert exact == pytest.approx(hypergeom.cdf(hits, 1200, successes, sampled), rel=1e-9)


@pytest.mark.parametrize("population", [1200, 1199, 150, 7])
def test_the_line_is_where_the_full_gate_draws_it(population):
    from modelval.behaviour.shape_bias import ShapeBiasResult
    from modelval.judgement.sanity import _hits_needed

    def gate(hits: int) -> bool:
        result = ShapeBiasResult(hits, 0, population - hits, population, 0, math.nan, math.nan)
        return sanity_check(result).passed

    needed = _hits_needed(population)
    assert gate(needed) and not gate(needed - 1)


@functools.cache  # about a second, and the same for every simulation
def _thresholds(population: int, step: int, limit: int):
    """Per look: the most hits that fail early and the fewest that pass early (from _early_decision itself)."""
    from modelval.judgement.sanity import _early_decision

    looks = -(-limit // step)
    table = []
    for sampled in range(step, limit + 1, step):
        decisions = {h: _early_decision(h, sampled, population, looks=looks) for h in range(sampled + 1)}
        fail = max((h for h, d in decisions.items() if d is not None and not d.passed), default=-1)
        passing = min((h for h, d in decisions.items() if d is not None and d.passed), default=sampled + 1)
        assert all(decisions[h] is None for h in range(fail + 1, passing))  # one undecided band, no holes
        table.append((sampled, fail, passing))
    return table


def _simulate(hits_in_population: int, runs: int, seed: int) -> tuple[int, int]:
    """(early fails, early passes) of the sequential probe over ``runs`` random samples."""
    import numpy as np

    from modelval.judgement.sanity import PROBE_LIMIT, PROBE_STEP

    table = _thresholds(1200, PROBE_STEP, PROBE_LIMIT)
    population = np.zeros(1200, dtype=np.int64)
    population[:hits_in_population] = 1
    rng = np.random.default_rng(seed)
    samples = np.stack([rng.permutation(population)[:PROBE_LIMIT] for _ in range(runs)])
    seen = np.cumsum(samples, axis=1)
    decided = np.zeros(runs, dtype=bool)
    fails = passes = 0
    for sampled, fail, passing in table:  # each run stops at its first decisive step, a fail checked first
        hits = seen[:, sampled - 1]
        failed = ~decided & (hits <= fail)
        passed = ~decided & ~failed & (hits >= passing)
        fails, passes = fails + int(failed.sum()), passes + int(passed.sum())
        decided |= failed | passed
    return fails, passes


def test_a_model_at_the_threshold_is_never_failed_early():
    """360 hits of 1200 passes the full gate: 20000 random samples never reject it early (risk < 1e-6)."""
    fails, _ = _simulate(360, 20_000, seed=1)
    assert fails == 0


def test_a_model_one_hit_short_is_never_passed_early():
    _, passes = _simulate(359, 20_000, seed=2)
    assert passes == 0


def test_a_guessing_model_is_failed_early_and_a_good_one_passed():
    fails, _ = _simulate(150, 2_000, seed=3)  # 12.5%: chance among 16 categories
    _, passes = _simulate(823, 2_000, seed=4)  # 68.6%: EfficientNet-Lite0's 197 + 626 hits
    assert fails >= 0.98 * 2_000 and passes == 2_000  # the rest of the guessers: the full run rejects them
