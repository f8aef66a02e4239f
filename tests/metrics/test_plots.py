"""PNG output of the calibration plots (Agg backend, no display)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from modelval.errors import InputValidationError
from modelval.metrics.calibration import reliability_bins
from modelval.metrics.plots import confidence_histogram, ece_vs_temperature, reliability_diagram

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
