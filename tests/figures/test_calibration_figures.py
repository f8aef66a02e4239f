"""The calibration plots as the commands write them (``save(fig, path, dpi=DPI)``), and what they say on their axes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from modelval.errors import InputValidationError
from modelval.figures import plot_confidence_histogram, plot_ece_vs_temperature, plot_reliability, save
from modelval.figures.calibration import DPI
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
    figure = plot_reliability(bins_by_convention[convention], histogram=histogram)
    [out] = save(figure, tmp_path / "sub" / "rel.png", dpi=DPI)
    assert out.read_bytes()[:8] == PNG_MAGIC
    with Image.open(out) as image:
        width, height = image.size
        # the histogram panel makes the figure taller (5x7 inches instead of 5x5 at 100 dpi)
        assert (width, height) == ((500, 700) if histogram else (500, 500))
        # not a blank canvas: bars, the diagonal and the annotation draw many colours
        assert len(image.convert("RGB").getcolors(maxcolors=1_000_000)) > 20


def test_confidence_histogram_and_ece_vs_temperature(tmp_path, bins_by_convention):
    [hist] = save(plot_confidence_histogram(bins_by_convention["default"]), tmp_path / "hist.png", dpi=DPI)
    assert hist.read_bytes()[:8] == PNG_MAGIC
    figure = plot_ece_vs_temperature([0.5, 1, 1.5, 2], [0.2, 0.1, 0.05, 0.08], fitted=1.4)
    [curve] = save(figure, tmp_path / "ece_t.png", dpi=DPI)
    assert curve.read_bytes()[:8] == PNG_MAGIC
    with Image.open(curve) as image:
        assert image.size == (600, 400)  # 6 x 4 inches at 100 dpi, as before


def test_ece_vs_temperature_length_mismatch():
    with pytest.raises(InputValidationError, match="one ECE per temperature"):
        plot_ece_vs_temperature([1.0, 2.0], [0.1])
    with pytest.raises(InputValidationError, match="one ECE per temperature"):
        plot_ece_vs_temperature([], [])


def test_binary_diagrams_say_fraction_of_positives():
    from modelval.figures import plot_smooth_reliability
    from modelval.metrics.binary import FRACTION_OF_POSITIVES, binary_reliability_bins, binary_smooth_reliability_curve

    rng = np.random.default_rng(1)
    p = rng.uniform(size=400)
    y = rng.uniform(size=400) < p**1.5
    bins = binary_reliability_bins(p, y, 10)
    figure = plot_reliability(bins, title="binary")
    top, bottom = figure.axes
    assert top.get_ylabel() == "fraction of positives"
    assert bottom.get_xlabel() == "predicted probability of the positive class"
    assert f"ECE {bins.ece * 100:.2f}%" in top.get_title()
    plt.close(figure)
    figure = plot_smooth_reliability(binary_smooth_reliability_curve(p, y), target=FRACTION_OF_POSITIVES)
    assert figure.axes[0].get_ylabel() == "fraction of positives"
    plt.close(figure)
    # The top-1 diagrams keep their labels.
    figure = plot_reliability(reliability_bins(p, y, 10))
    assert figure.axes[0].get_ylabel() == "accuracy"
    plt.close(figure)


def test_multilabel_reliability_diagram(tmp_path):
    from modelval.figures import plot_multilabel_reliability
    from modelval.metrics.binary import binary_reliability_bins

    rng = np.random.default_rng(2)
    p = rng.uniform(size=(300, 5))
    y = rng.uniform(size=p.shape) < p
    bins = [binary_reliability_bins(p[:, k], y[:, k], 10) for k in range(5)]
    fig = plot_multilabel_reliability(
        bins, list("abcde"), title="labels", summary={"macro ECE": 0.05, "micro ECE": 0.04}
    )
    assert "macro ECE 5.00% · micro ECE 4.00%" in fig.get_suptitle()
    titles = [ax.get_title() for ax in fig.axes if ax.axison]
    assert titles[0] == f"a: ECE {bins[0].ece * 100:.1f}%, {int(y[:, 0].sum())} pos."
    assert fig.axes[0].get_ylabel() == "fraction of positives"
    [out] = save(fig, tmp_path / "ml.png", dpi=DPI)
    with Image.open(out) as image:
        assert image.size == (1280, 680)  # 4 columns x 2 rows of 3.2 x 3.0 inches, + 0.8 inch of title, 100 dpi
    with pytest.raises(InputValidationError, match="one name per label"):
        plot_multilabel_reliability(bins, ["a"])


def test_multilabel_panels_in_the_callers_grid():
    from modelval.figures import plot_multilabel_reliability
    from modelval.metrics.binary import binary_reliability_bins

    rng = np.random.default_rng(3)
    p = rng.uniform(size=(200, 3))
    y = rng.uniform(size=p.shape) < p
    bins = [binary_reliability_bins(p[:, k], y[:, k], 10) for k in range(3)]
    fig, axes = plt.subplots(2, 2)
    fig.suptitle("my panels")
    assert plot_multilabel_reliability(bins, ["cat", "dog", "car"], axes=axes, summary={"macro ECE": 0.05}) is fig
    assert fig.get_suptitle() == "my panels"  # the caller's figure title stays; the heading tops the first panel
    assert axes[0, 0].get_title().splitlines()[:2] == ["Per-label reliability", "macro ECE 5.00%"]
    assert [ax.get_title().splitlines()[-1].split(":")[0] for ax in axes.flat[:3]] == ["cat", "dog", "car"]
    assert not axes.flat[3].axison  # the panel beyond the labels is turned off
    assert [ax.get_ylabel() for ax in axes.flat[:3]] == ["fraction of positives", "", "fraction of positives"]
    plt.close(fig)
