"""The calibration card: every number against its reference package, on random and on real model outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss

from modelval.errors import InputValidationError
from modelval.metrics.calibration import expected_calibration_error, top1_confidences
from modelval.metrics.card import calibration_card
from modelval.metrics.temperature import softmax

calibration_ref = pytest.importorskip("calibration", reason="pip install uncertainty-calibration (test extras)")
relplot = pytest.importorskip("relplot", reason="pip install relplot (test extras)")

KEYS = {
    "n", "accuracy", "accuracy_ci95", "ece", "ece_ci95", "mce", "rms", "brier", "nll", "classwise_ece",
    "debiased_l2", "smece", "effective_bins", "convention", "n_bins", "versions",
}  # fmt: skip


def strict_loads(text: str):
    def reject(constant: str):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=reject)


def random_logits(n: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, classes)) * 2
    y = np.array([rng.choice(classes, p=row) for row in softmax(z / 2)])  # over-confident by 2x
    return z, y


def check_against_references(card: dict, probs: np.ndarray, labels: np.ndarray) -> None:
    conf, correct = top1_confidences(probs, labels)
    classes = probs.shape[1]
    assert card["ece"] == pytest.approx(expected_calibration_error(conf, correct, card["n_bins"]), abs=1e-12)
    assert card["brier"] == pytest.approx(
        brier_score_loss(labels, probs, labels=range(classes), scale_by_half=False), abs=1e-12
    )
    assert card["nll"] == pytest.approx(log_loss(labels, probs, labels=range(classes)), abs=1e-9)
    # 1-D scores: the package calibrates P(correct) = the top-1 confidence, i.e. the top-label error.
    debiased = calibration_ref.lower_bound_scaling_ce(
        conf, correct.astype(int), p=2, debias=True, num_bins=card["n_bins"]
    )
    assert card["debiased_l2"] == pytest.approx(debiased, abs=1e-9)
    assert card["smece"] == pytest.approx(relplot.smECE(conf, correct), abs=1e-6)


@pytest.mark.parametrize(("n", "classes", "seed"), [(2000, 10, 0), (5000, 3, 1)])
def test_card_on_random_logits_matches_the_reference_packages(n, classes, seed):
    z, y = random_logits(n, classes, seed)
    card = calibration_card(y, logits=z, n_bootstrap=200)
    assert set(card) >= KEYS
    check_against_references(card, softmax(z), y)
    low, high = card["ece_ci95"]
    assert low < card["ece"] < high
    strict_loads(json.dumps(card))
    from_probs = calibration_card(y, probs=softmax(z), n_bootstrap=0)
    assert from_probs["ece"] == card["ece"] and "ece_ci95" not in from_probs
    assert from_probs["nll"] == pytest.approx(card["nll"], rel=1e-9)


def test_card_on_real_model_outputs(bundled_evaluations):
    # EfficientNet-Lite0 on the 1280 cue-conflict stimuli: 16-class probabilities (mean aggregation,
    # renormalised to sum 1) against the shape category. Real, far-from-calibrated outputs.
    evaluation = bundled_evaluations()
    scores = evaluation.category_probabilities.astype(np.float64)  # float64: sklearn computes in the input's dtype
    probs = scores / scores.sum(axis=1, keepdims=True)
    from modelval.behaviour.categories import CATEGORIES

    labels = np.array([CATEGORIES.index(s.shape) for s in evaluation.stimuli])
    card = calibration_card(labels, probs=probs, n_bins="auto", n_bootstrap=200)
    assert card["n"] == 1280 and card["n_bins"] == 11 and "ceil(n^(1/3))" in card["n_bins_rule"]
    check_against_references(card, probs, labels)


def test_bad_input_is_a_clear_error():
    with pytest.raises(InputValidationError, match="exactly one of logits and probs"):
        calibration_card([0, 1], logits=np.zeros((2, 2)), probs=np.full((2, 2), 0.5))
    with pytest.raises(InputValidationError, match="positive integer or 'auto'"):
        calibration_card([0, 1], probs=np.full((2, 2), 0.5), n_bins=0)
