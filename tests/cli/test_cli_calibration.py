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
    assert main(["calibration", str(tmp_path / "val.npz"), "--json", "--bootstrap", "200"]) == 0
    card = strict(capsys.readouterr().out)
    assert all(key in card for key in REQUIRED)
    expected = calibration_card(y, logits=z, n_bootstrap=200)
    for key in ("ece", "brier", "nll", "smece", "debiased_l2", "ece_ci95"):
        assert card[key] == pytest.approx(expected[key])
    assert card["versions"]["numpy"] == np.__version__ and card["versions"]["relplot"]
    assert main(["calibration", str(tmp_path / "val.pt"), "--json", "--bootstrap", "200"]) == 0
    assert strict(capsys.readouterr().out)["ece"] == pytest.approx(card["ece"])


def test_card_text_probs_and_auto_bins(tmp_path, capsys):
    z, y = logits_and_labels(n=1000)
    probs = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    np.savez(tmp_path / "p.npz", probs=probs, labels=y)
    assert main(["calibration", str(tmp_path / "p.npz"), "--bins", "auto"]) == 0
    text = capsys.readouterr().out
    assert "1000 predictions, 5 classes, from probs" in text
    assert "10 bins (default), auto: ceil(n^(1/3)) for n = 1000" in text
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
    assert main(["calibration", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("modelval: error: ") and message in err and "Traceback" not in err


def test_missing_truncated_and_unknown_files(tmp_path, capsys):
    assert main(["calibration", str(tmp_path / "nope.npz")]) == 2
    assert "predictions file not found" in capsys.readouterr().err
    z, y = logits_and_labels(n=50)
    np.savez(tmp_path / "ok.npz", logits=z, labels=y)
    data = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    assert main(["calibration", str(tmp_path / "cut.npz")]) == 2
    assert "could not read predictions" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("1,2\n")
    assert main(["calibration", str(tmp_path / "x.csv")]) == 2
    assert "unsupported predictions file type '.csv'" in capsys.readouterr().err
    assert main(["calibration", str(tmp_path / "ok.npz"), "--bins", "zero"]) == 2
    assert "is not a whole number" in capsys.readouterr().err


def test_card_plots(tmp_path, capsys):
    from PIL import Image

    z, y = logits_and_labels(n=500)
    np.savez(tmp_path / "v.npz", logits=z, labels=y)
    assert main(["calibration", str(tmp_path / "v.npz"), "--plot", str(tmp_path / "plots"), "--json"]) == 0
    card = strict(capsys.readouterr().out)
    assert [p.rsplit("/", 1)[-1] for p in card["plots"]] == ["reliability.png", "smooth-reliability.png"]
    for path in card["plots"]:
        with Image.open(path) as image:
            assert image.format == "PNG" and image.height > 600
