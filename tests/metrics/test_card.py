"""The calibration card: every number against its reference package, on random and on real model outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from modelval.errors import InputValidationError
from modelval.metrics.calibration import expected_calibration_error, top1_confidences
from modelval.metrics.card import calibration_card
from modelval.metrics.temperature import softmax
from reference_packages import reference, reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
brier_score_loss, log_loss = reference_names("sklearn.metrics", "brier_score_loss", "log_loss")

calibration_ref = reference("calibration")
relplot = reference("relplot")

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


def test_card_on_real_model_outputs(recorded_evaluations):
    # EfficientNet-Lite0 on the 1280 cue-conflict stimuli: 16-class probabilities (mean aggregation,
    # renormalised to sum 1) against the shape category. Real, far-from-calibrated outputs.
    evaluation = recorded_evaluations()
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


# --------------------------------------------------------------------------------------------------
# Binary and multilabel cards (issue 22)

tm_classification = reference("torchmetrics.functional.classification")
netcal_metrics = reference("netcal.metrics")

BINARY_KEYS = {
    "task", "task_detection", "n", "n_positive", "positive_rate", "positive_rate_ci95", "accuracy", "accuracy_ci95",
    "ece", "ece_ci95", "mce", "mce_ci95", "rms", "rms_ci95", "top_label_ece", "top_label_ece_ci95", "brier", "nll",
    "debiased_l2", "smece", "effective_bins", "min_bin_count", "ece_by_bins", "ece_sweep", "convention", "n_bins",
    "input", "bootstrap", "definitions", "versions",
}  # fmt: skip


def check_binary_card(card: dict, p: np.ndarray, y: np.ndarray) -> None:
    """The binary card's numbers against torchmetrics, netcal, scikit-learn, uncertainty-calibration, relplot."""
    import torch

    bins = card["n_bins"]
    assert card["task"] == "binary" and set(card) >= BINARY_KEYS - {"positive_rate_ci95", "accuracy_ci95"}
    assert card["ece"] == pytest.approx(netcal_metrics.ECE(bins).measure(p, y), abs=1e-12)
    tm = tm_classification.binary_calibration_error(torch.tensor(p), torch.tensor(y), n_bins=bins, norm="max")
    assert card["mce"] == pytest.approx(float(tm), abs=1e-12)
    two = np.stack([1 - p, p], axis=1)
    assert card["top_label_ece"] == pytest.approx(
        calibration_ref.get_ece(two, y, num_bins=bins, mode="top-label"), abs=1e-12
    )
    assert card["brier"] == pytest.approx(brier_score_loss(y, p), abs=1e-12)
    assert card["nll"] == pytest.approx(log_loss(y, p, labels=[0, 1]), abs=1e-12)
    debiased = calibration_ref.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=bins)
    assert card["debiased_l2"] == pytest.approx(debiased, abs=1e-9)
    assert card["smece"] == pytest.approx(relplot.smECE(p, y), abs=1e-12)
    assert card["positive_rate"] == pytest.approx(y.mean()) and card["n_positive"] == y.sum()
    strict_loads(json.dumps(card))


def test_binary_card_on_random_probabilities_and_logits():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=3000)
    y = (rng.uniform(size=3000) < p**1.5).astype(np.int64)
    card = calibration_card(y, probs=p, n_bootstrap=200)
    assert set(card) >= BINARY_KEYS
    assert card["task_detection"].startswith("detected: one probability per example")
    check_binary_card(card, p, y)
    assert card["ece_ci95"][0] < card["ece"] < card["ece_ci95"][1]
    assert card["top_label_ece"] != pytest.approx(card["ece"], abs=1e-3)  # two different numbers
    # From logits: the same binned numbers, the NLL exact (no clipping).
    z = np.log(p) - np.log1p(-p)
    from_logits = calibration_card(y, logits=z, n_bootstrap=0)
    assert from_logits["ece"] == pytest.approx(card["ece"], abs=1e-12) and from_logits["input"] == "logits"
    assert from_logits["nll"] == pytest.approx(card["nll"], rel=1e-9)
    # An (N, 2) softmax is a multiclass card unless told otherwise; told, it is column 1's binary card.
    two = np.stack([1 - p, p], axis=1)
    assert calibration_card(y, probs=two, n_bootstrap=0)["task"] == "multiclass"
    forced = calibration_card(y, probs=two, task="binary", n_bootstrap=0)
    assert forced["ece"] == pytest.approx(card["ece"], abs=1e-15) and "column 1" in forced["task_detection"]
    # The multiclass card's top-1 ECE of the (N, 2) softmax is the binary card's top-label ECE.
    assert calibration_card(y, probs=two, n_bootstrap=0)["ece"] == pytest.approx(card["top_label_ece"], abs=1e-15)


def test_multilabel_card_on_random_scores():
    rng = np.random.default_rng(4)
    p = rng.beta(0.7, 2.0, size=(1000, 5))
    y = (rng.uniform(size=p.shape) < p**1.3).astype(np.int64)
    card = calibration_card(y, probs=p, n_bootstrap=100, label_names=list("abcde"))
    assert card["task"] == "multilabel" and card["num_labels"] == 5 and card["n"] == 1000
    per_label = [netcal_metrics.ECE(15).measure(p[:, k], y[:, k]) for k in range(5)]
    assert [row["ece"] for row in card["labels"]] == pytest.approx(per_label, abs=1e-12)
    assert card["macro"]["ece"] == pytest.approx(np.mean(per_label), abs=1e-12)
    support = y.sum(axis=0)
    assert card["weighted"]["ece"] == pytest.approx(np.dot(support, per_label) / support.sum(), abs=1e-12)
    assert card["micro"]["ece"] == pytest.approx(netcal_metrics.ECE(15).measure(p.ravel(), y.ravel()), abs=1e-12)
    assert card["micro"]["nll"] == pytest.approx(log_loss(y.ravel(), p.ravel()), abs=1e-12)
    assert [row["label"] for row in card["labels"]] == list("abcde") and "ece_ci95" in card["labels"][0]
    strict_loads(json.dumps(card))
    # No positive anywhere: the weighted summary is null with a reason, never NaN.
    from modelval import jsonio

    empty = json.loads(jsonio.dumps(calibration_card(np.zeros_like(y), probs=p, n_bootstrap=0)))
    assert empty["weighted"]["ece"] is None and "no label has a positive" in empty["weighted"]["null_reasons"]["ece"]


def test_binary_and_multilabel_cards_on_real_model_outputs(recorded_evaluations):
    from modelval.behaviour.categories import CATEGORIES

    evaluation = recorded_evaluations()
    scores = evaluation.category_probabilities.astype(np.float64)
    shapes = np.array([CATEGORIES.index(s.shape) for s in evaluation.stimuli])
    textures = np.array([CATEGORIES.index(s.texture) for s in evaluation.stimuli])
    # Binary: one-vs-rest "is the shape a cat?" from the renormalised 16-class probabilities.
    probs = scores / scores.sum(axis=1, keepdims=True)
    k = CATEGORIES.index("cat")
    p, y = probs[:, k], (shapes == k).astype(np.int64)
    card = calibration_card(y, probs=p, n_bootstrap=200)
    check_binary_card(card, p, y)
    assert card["n"] == 1280 and card["n_positive"] == 80
    # Multilabel: the raw mean-aggregated scores (rows do not sum to 1) against shape-or-texture labels.
    labels = np.zeros(scores.shape, dtype=np.int64)
    labels[np.arange(1280), shapes] = 1
    labels[np.arange(1280), textures] = 1
    card = calibration_card(labels, probs=scores, n_bootstrap=0, label_names=CATEGORIES)
    assert card["task"] == "multilabel" and card["num_labels"] == 16
    per_label = [netcal_metrics.ECE(15).measure(scores[:, j], labels[:, j]) for j in range(16)]
    assert [row["ece"] for row in card["labels"]] == pytest.approx(per_label, abs=1e-12)
    assert card["micro"]["ece"] == pytest.approx(
        netcal_metrics.ECE(15).measure(scores.ravel(), labels.ravel()), abs=1e-12
    )


def test_ambiguous_input_is_refused_and_task_forces_it():
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.ones(3), size=50)
    one_hot = np.eye(3, dtype=np.int64)[rng.integers(0, 3, 50)]
    with pytest.raises(InputValidationError, match=r"ambiguous.*--task multiclass or --task multilabel"):
        calibration_card(one_hot, probs=probs)
    assert calibration_card(one_hot, probs=probs, task="multiclass", n_bootstrap=0)["ece"] == pytest.approx(
        calibration_card(one_hot.argmax(1), probs=probs, n_bootstrap=0)["ece"], abs=0
    )
    assert calibration_card(one_hot, probs=probs, task="multilabel", n_bootstrap=0)["task"] == "multilabel"
    with pytest.raises(InputValidationError, match="label_names apply to multilabel input only"):
        calibration_card(one_hot.argmax(1), probs=probs, label_names=["a", "b", "c"])


def _well_calibrated(n: int = 2000, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated scores; with 2000 examples the estimate falls below its interval for 3 of the seeds 0-9 (this one
    for the ECE, RMS and top-label ECE)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    return p, (rng.uniform(size=n) < p).astype(np.int64)  # P(y = 1 | p) = p: the true calibration error is 0


def test_a_point_estimate_outside_its_interval_is_explained():
    """Issue 32: a binary card printed top-label ECE 0.0089 beside its interval [0.0101, 0.0257]. The cause is the
    estimator, not the fast bootstrap: a binned ECE sums |acc - conf|, so noise only adds to it, and every resample
    adds its own; the textbook example-level bootstrap puts its interval above the estimate too. The card keeps the
    percentile interval and says so wherever an estimate lies outside its own interval."""
    from modelval.metrics.binary import binary_top_label
    from modelval.metrics.bootstrap import naive_bootstrap
    from modelval.metrics.calibration import reliability_bins

    p, y = _well_calibrated()
    card = calibration_card(y, probs=p, n_bootstrap=1000)
    low, high = card["top_label_ece_ci95"]
    assert card["top_label_ece"] < low < high  # the reported symptom, on data whose true error is 0
    conf, correct = binary_top_label(p, y)
    naive = naive_bootstrap(lambda c, k: reliability_bins(c, k, 15).ece, conf, correct, n_resamples=300)
    assert naive.estimate == pytest.approx(card["top_label_ece"]) and naive.low > naive.estimate
    for key in [k.removesuffix("_ci95") for k in card if k.endswith("_ci95")]:
        inside = card[f"{key}_ci95"][0] <= card[key] <= card[f"{key}_ci95"][1]
        assert inside != (key in card.get("interval_notes", {})), key  # outside <=> explained
    note = card["interval_notes"]["top_label_ece"]
    assert f"top_label_ece {card['top_label_ece']:.4f} lies below its interval" in note and "biased upward" in note
    strict_loads(json.dumps(card))


def test_no_note_when_every_estimate_is_inside_its_interval():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=3000)
    y = (rng.uniform(size=3000) < p**1.5).astype(np.int64)  # miscalibrated: the estimates sit inside
    assert "interval_notes" not in calibration_card(y, probs=p, n_bootstrap=200)
