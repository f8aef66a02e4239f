"""`modelval calibration FILE`: the card from .npz and .pt files, --bins auto, bad files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from modelval.cli import main
from modelval.metrics.card import calibration_card

REQUIRED = [
    "n", "accuracy", "accuracy_ci95", "ece", "ece_ci95", "mce", "rms", "brier", "nll", "classwise_ece",
    "debiased_l2", "smece", "effective_bins", "convention", "n_bins", "versions",
]  # fmt: skip


def logits_and_labels(n: int = 1000, classes: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, classes)) * 3
    y = rng.integers(0, classes, n)
    y[: n // 2] = z[: n // 2].argmax(1)
    return z, y


def strict(text: str):
    return json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def test_card_json_from_npz_and_pt(tmp_path, capsys):
    z, y = logits_and_labels()
    np.savez(tmp_path / "val.npz", logits=z, labels=y)
    torch.save({"logits": torch.from_numpy(z), "labels": torch.from_numpy(y)}, tmp_path / "val.pt")
    assert main(["calibration", "card", str(tmp_path / "val.npz"), "--json", "--bootstrap", "200"]) == 0
    card = strict(capsys.readouterr().out)
    assert all(key in card for key in REQUIRED)
    expected = calibration_card(y, logits=z, n_bootstrap=200)
    for key in ("ece", "brier", "nll", "smece", "debiased_l2", "ece_ci95"):
        assert card[key] == pytest.approx(expected[key])
    assert card["versions"]["numpy"] == np.__version__ and card["versions"]["relplot"]
    assert main(["calibration", "card", str(tmp_path / "val.pt"), "--json", "--bootstrap", "200"]) == 0
    assert strict(capsys.readouterr().out)["ece"] == pytest.approx(card["ece"])


def test_card_text_probs_and_auto_bins(tmp_path, capsys):
    z, y = logits_and_labels(n=1000)
    probs = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    np.savez(tmp_path / "p.npz", probs=probs, labels=y)
    assert main(["calibration", "card", str(tmp_path / "p.npz"), "--bins", "auto"]) == 0
    text = capsys.readouterr().out
    assert "1000 predictions, 5 classes, from probs" in text
    assert "10 bins, (lo, hi] edges, auto: ceil(n^(1/3)) for n = 1000" in text
    for label in ("ECE", "smooth ECE", "debiased L2", "Brier", "NLL", "classwise ECE", "percentile bootstrap"):
        assert label in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"logits": np.zeros((2, 3))}, "expected 'labels' and exactly one of 'logits' or 'probs'"),
        ({"logits": np.zeros((2, 3)), "probs": np.full((2, 3), 1 / 3), "labels": [0, 1]}, "exactly one of"),
        ({"probs": np.full((2, 3), 0.5), "labels": [0, 1]}, "rows must sum to 1"),
        ({"logits": np.array([[0.0, np.nan]]), "labels": [0]}, "logits"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, capsys, content, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **content)
    assert main(["calibration", "card", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("modelval: error: ") and message in err and "Traceback" not in err


def test_missing_truncated_and_unknown_files(tmp_path, capsys):
    assert main(["calibration", "card", str(tmp_path / "nope.npz")]) == 2
    assert "predictions file not found" in capsys.readouterr().err
    z, y = logits_and_labels(n=50)
    np.savez(tmp_path / "ok.npz", logits=z, labels=y)
    data = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    assert main(["calibration", "card", str(tmp_path / "cut.npz")]) == 2
    assert "could not read predictions" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("1,2\n")
    assert main(["calibration", "card", str(tmp_path / "x.csv")]) == 2
    assert "unsupported predictions file type '.csv'" in capsys.readouterr().err
    assert main(["calibration", "card", str(tmp_path / "ok.npz"), "--bins", "zero"]) == 2
    assert "is not a whole number" in capsys.readouterr().err


def test_card_plots(tmp_path, capsys):
    from PIL import Image

    z, y = logits_and_labels(n=500)
    np.savez(tmp_path / "v.npz", logits=z, labels=y)
    argv = ["calibration", "card", str(tmp_path / "v.npz"), "--report-dir", str(tmp_path / "plots"), "--json"]
    assert main(argv) == 0
    card = strict(capsys.readouterr().out)
    assert [p.rsplit("/", 1)[-1] for p in card["plots"]] == ["reliability.png", "smooth-reliability.png"]
    for path in card["plots"]:
        with Image.open(path) as image:
            assert image.format == "PNG" and image.height > 600


# --------------------------------------------------------------------------------------------------
# Binary and multilabel files, task detection and --task (issue 22)


def binary_scores(n: int = 800, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    return p, (rng.uniform(size=n) < p**1.5).astype(np.int64)


def multilabel_scores(n: int = 600, labels: int = 4, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 2.0, size=(n, labels))
    return p, (rng.uniform(size=p.shape) < p**1.3).astype(np.int64)


def test_binary_file_json_and_text(tmp_path, capsys):
    p, y = binary_scores()
    np.savez(tmp_path / "bin.npz", probs=p, labels=y)
    assert main(["calibration", "card", str(tmp_path / "bin.npz"), "--json", "--bootstrap", "100"]) == 0
    card = strict(capsys.readouterr().out)
    expected = calibration_card(y, probs=p, n_bootstrap=100)
    assert card["task"] == "binary" and card["task_detection"] == expected["task_detection"]
    for key in ("ece", "mce", "rms", "top_label_ece", "brier", "nll", "smece", "ece_ci95", "positive_rate_ci95"):
        assert card[key] == pytest.approx(expected[key])
    assert main(["calibration", "card", str(tmp_path / "bin.npz"), "--bootstrap", "0"]) == 0
    text = capsys.readouterr().out
    assert "800 predictions" in text and "task            binary (detected: one probability per example" in text
    for label in ("positive rate", "top-label ECE", "not the positive-class ECE", "fraction of positives vs p"):
        assert label in text


def test_multilabel_file_with_label_names(tmp_path, capsys):
    p, y = multilabel_scores()
    # Byte strings (an "S" array) are decoded: the table says cat, not b'cat'.
    np.savez(tmp_path / "ml.npz", probs=p, labels=y, label_names=np.array([b"cat", b"dog", b"car", b"bird"]))
    assert main(["calibration", "card", str(tmp_path / "ml.npz"), "--json", "--bootstrap", "50"]) == 0
    card = strict(capsys.readouterr().out)
    assert card["task"] == "multilabel" and [row["label"] for row in card["labels"]] == ["cat", "dog", "car", "bird"]
    expected = calibration_card(y, probs=p, n_bootstrap=50, label_names=["cat", "dog", "car", "bird"])
    for average in ("macro", "micro", "weighted"):
        assert card[average]["ece"] == pytest.approx(expected[average]["ece"])
    assert main(["calibration", "card", str(tmp_path / "ml.npz")]) == 0
    text = capsys.readouterr().out
    assert "4 labels" in text and "macro" in text and "weighted" in text and "ECE 95% CI" in text
    assert all(name in text for name in ("cat", "dog", "car", "bird"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            {"probs": np.full((4, 3), 1 / 3), "labels": np.eye(3, dtype=int)[[0, 1, 2, 0]]},
            "ambiguous: (N, L) probs whose rows sum to 1",
        ),
        ({"logits": np.array([0.1, 0.9, 0.4]), "labels": [0, 1, 1]}, "ambiguous: every one of the (N,) 'logits'"),
        ({"probs": np.array([0.1, 1.9]), "labels": [0, 1]}, "positive-class probabilities in [0, 1]"),
        ({"probs": np.array([0.1, 0.9]), "labels": [0, 2]}, "not all 0/1"),
    ],
)
def test_ambiguous_and_bad_binary_files_are_one_line_errors(tmp_path, capsys, content, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **content)
    assert main(["calibration", "card", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("modelval: error: ") and message in err and "Traceback" not in err
    assert err.count("\n") == 1
    if "ambiguous" in message:
        assert "--task" in err


def test_task_option_forces_the_task(tmp_path, capsys):
    probs = np.random.default_rng(3).dirichlet(np.ones(3), size=60)
    labels = np.eye(3, dtype=int)[np.arange(60) % 3]
    np.savez(tmp_path / "amb.npz", probs=probs, labels=labels)
    for task in ("multiclass", "multilabel"):
        assert (
            main(["calibration", "card", str(tmp_path / "amb.npz"), "--task", task, "--json", "--bootstrap", "0"]) == 0
        )
        card = strict(capsys.readouterr().out)
        assert card["task"] == task and card["task_detection"].startswith(f"given: task='{task}'")
    p, y = binary_scores(200)
    np.savez(tmp_path / "two.npz", probs=np.stack([1 - p, p], 1), labels=y)
    assert (
        main(["calibration", "card", str(tmp_path / "two.npz"), "--task", "binary", "--json", "--bootstrap", "0"]) == 0
    )
    assert strict(capsys.readouterr().out)["ece"] == pytest.approx(calibration_card(y, probs=p, n_bootstrap=0)["ece"])
    assert main(["calibration", "card", str(tmp_path / "two.npz"), "--task", "ranking"]) == 2
    assert "invalid choice: 'ranking'" in capsys.readouterr().err
    assert main(["calibration", "card", str(tmp_path / "two.npz"), "--task", "multilabel"]) == 2
    assert "0/1 label matrix" in capsys.readouterr().err


def test_binary_and_multilabel_plots(tmp_path, capsys):
    from PIL import Image

    p, y = binary_scores(500)
    np.savez(tmp_path / "b.npz", logits=np.log(p) - np.log1p(-p), labels=y)
    assert main(["calibration", "card", str(tmp_path / "b.npz"), "--report-dir", str(tmp_path / "bp"), "--json"]) == 0
    card = strict(capsys.readouterr().out)
    assert [path.rsplit("/", 1)[-1] for path in card["plots"]] == ["reliability.png", "smooth-reliability.png"]
    p, y = multilabel_scores(labels=6)
    np.savez(tmp_path / "m.npz", probs=p, labels=y)
    assert main(["calibration", "card", str(tmp_path / "m.npz"), "--report-dir", str(tmp_path / "mp"), "--json"]) == 0
    card = strict(capsys.readouterr().out)
    assert [path.rsplit("/", 1)[-1] for path in card["plots"]] == ["reliability.png"]
    with Image.open(card["plots"][0]) as image:
        assert image.format == "PNG" and image.width >= 1200  # 4 panels a row


def test_calibration_help_renders(capsys):
    assert main(["calibration", "card", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--task {auto,binary,multiclass,multilabel}" in out and "multilabel" in out


def test_the_card_prints_why_an_estimate_lies_outside_its_interval(tmp_path, capsys):
    """Issue 32: the binary card's top-label ECE lay outside its own interval with no word why."""
    rng = np.random.default_rng(3)  # calibrated scores: for this seed every resampled top-label ECE is larger
    p = rng.uniform(size=2000)
    y = (rng.uniform(size=2000) < p).astype(np.int64)
    path = tmp_path / "binary.npz"
    np.savez(path, probs=p, labels=y)
    assert main(["calibration", "card", str(path), "--bins", "15"]) == 0
    text = capsys.readouterr().out
    card = calibration_card(y, probs=p)
    value, (low, high) = card["top_label_ece"], card["top_label_ece_ci95"]
    assert value < low and f"top-label ECE   {value:.4f}  [{low:.4f}, {high:.4f}]" in text
    assert f"  note: top_label_ece {value:.4f} lies below its interval [{low:.4f}, {high:.4f}]: the binned" in text
    assert "(default)" not in text and "15 bins, (lo, hi] edges" in text
