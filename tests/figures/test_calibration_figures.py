"""PNG output of the calibration plots (Agg backend, no display)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from modelval.errors import InputValidationError
from modelval.figures.calibration import confidence_histogram, ece_vs_temperature, reliability_diagram
from modelval.metrics.calibration import reliability_bins

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def bins_by_convention():
    rng = np.random.default_rng(0)
    conf = np.concatenate([rng.uniform(0.3, 1, 200), [1.0, 1.0, 0.0]])
    correct = rng.uniform(size=conf.size) < conf * 0.8
    return {c: reliability_bins(conf, correct, 10, convention=c) for c in ("default", "torchmetrics")}


@pytest.mark.parametrize("convention", ["default", "torchmetrics"])
@pytest.mark.parametrize("histogram", [True, False])
def test_reliability_diagram_writes_png(tmp_path, bins_by_convention, convention, histogram):
    out = reliability_diagram(bins_by_convention[convention], tmp_path / "sub" / "rel.png", histogram=histogram)
    assert out.read_bytes()[:8] == PNG_MAGIC
    with Image.open(out) as image:
        width, height = image.size
        # the histogram panel makes the figure taller (5x7 inches instead of 5x5 at 100 dpi)
        assert (width, height) == ((500, 700) if histogram else (500, 500))
        # not a blank canvas: bars, the diagonal and the annotation draw many colours
        assert len(image.convert("RGB").getcolors(maxcolors=1_000_000)) > 20


def test_confidence_histogram_and_ece_vs_temperature(tmp_path, bins_by_convention):
    hist = confidence_histogram(bins_by_convention["default"], tmp_path / "hist.png")
    assert hist.read_bytes()[:8] == PNG_MAGIC
    curve = ece_vs_temperature([0.5, 1, 1.5, 2], [0.2, 0.1, 0.05, 0.08], tmp_path / "ece_t.png", fitted=1.4)
    assert curve.read_bytes()[:8] == PNG_MAGIC


def test_ece_vs_temperature_length_mismatch(tmp_path):
    with pytest.raises(InputValidationError, match="one ECE per temperature"):
        ece_vs_temperature([1.0, 2.0], [0.1], tmp_path / "x.png")


@pytest.fixture
def closed_figures(monkeypatch):
    """The figures the plot functions close after saving (their axes can then be inspected)."""
    import matplotlib.pyplot as plt

    closed = []
    real_close = plt.close

    def close(fig=None):
        closed.append(fig)
        real_close(fig)

    monkeypatch.setattr(plt, "close", close)
    return closed


def test_binary_diagrams_say_fraction_of_positives(tmp_path, closed_figures):
    from modelval.figures.calibration import smooth_reliability_diagram
    from modelval.metrics.binary import FRACTION_OF_POSITIVES, binary_reliability_bins, binary_smooth_reliability_curve

    rng = np.random.default_rng(1)
    p = rng.uniform(size=400)
    y = rng.uniform(size=400) < p**1.5
    bins = binary_reliability_bins(p, y, 10)
    out = reliability_diagram(bins, tmp_path / "binary.png", title="binary")
    assert out.read_bytes()[:8] == PNG_MAGIC
    top, bottom = closed_figures[-1].axes
    assert top.get_ylabel() == "fraction of positives"
    assert bottom.get_xlabel() == "predicted probability of the positive class"
    assert f"ECE {bins.ece * 100:.2f}%" in top.get_title()
    smooth_reliability_diagram(
        binary_smooth_reliability_curve(p, y), tmp_path / "smooth.png", target=FRACTION_OF_POSITIVES
    )
    assert closed_figures[-1].axes[0].get_ylabel() == "fraction of positives"
    # The top-1 diagrams keep their labels.
    reliability_diagram(reliability_bins(p, y, 10), tmp_path / "top1.png")
    assert closed_figures[-1].axes[0].get_ylabel() == "accuracy"


def test_multilabel_reliability_diagram(tmp_path, closed_figures):
    from modelval.figures.calibration import multilabel_reliability_diagram
    from modelval.metrics.binary import binary_reliability_bins

    rng = np.random.default_rng(2)
    p = rng.uniform(size=(300, 5))
    y = rng.uniform(size=p.shape) < p
    bins = [binary_reliability_bins(p[:, k], y[:, k], 10) for k in range(5)]
    out = multilabel_reliability_diagram(
        bins, list("abcde"), tmp_path / "ml.png", title="labels", summary={"macro ECE": 0.05, "micro ECE": 0.04}
    )
    with Image.open(out) as image:
        assert image.size == (1280, 680)  # 4 columns x 2 rows of 3.2 x 3.0 inches, + 0.8 inch of title, 100 dpi
    fig = closed_figures[-1]
    assert "macro ECE 5.00% · micro ECE 4.00%" in fig._suptitle.get_text()
    titles = [ax.get_title() for ax in fig.axes if ax.axison]
    assert titles[0] == f"a: ECE {bins[0].ece * 100:.1f}%, {int(y[:, 0].sum())} pos."
    assert fig.axes[0].get_ylabel() == "fraction of positives"
    with pytest.raises(InputValidationError, match="one name per label"):
        multilabel_reliability_diagram(bins, ["a"], tmp_path / "x.png")
