"""The per-category shape-bias figure names its model and keeps its legend off the points (issue 32, point 7).

Before: the legend sat inside the axes at the lower right, over truck (the last category, drawn near a texture
fraction of 0.68 for EfficientNet-Lite0), and the title said "Shape bias per shape category" for every model.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from modelval.behaviour.decisions import read_decisions
from modelval.behaviour.shape_bias import compute_shape_bias
from modelval.figures.shape_bias import DPI, plot_per_category
from modelval.figures.style import save
from modelval.paths import package_data

LABEL = "EfficientNet-Lite0 (PyPI) (model (half))"


@pytest.fixture(scope="module")
def lite0():
    return compute_shape_bias(read_decisions(package_data("baselines/efficientnet_lite0.csv")), n_bootstrap=0)


def test_the_title_names_the_model_and_the_legend_covers_no_point(lite0, tmp_path):
    fig = plot_per_category({LABEL: lite0})
    (ax,) = [a for a in fig.axes if a.get_legend() is not None]
    assert ax.get_title() == f"Shape bias per shape category\n{LABEL}"
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    axes = ax.get_window_extent(renderer)
    assert legend.y1 < axes.y0  # below the axes, so over no point
    points = ax.transData.transform(ax.collections[0].get_offsets())
    assert not any(legend.contains(x, y) for x, y in points)
    assert 1 - lite0.per_category["truck"].shape_bias == pytest.approx(40 / 59)
    written = save(fig, tmp_path / "per-category.png", dpi=DPI)
    assert written[0].stat().st_size > 10_000  # the legend is inside the saved image, not cut off
    image = plt.imread(written[0])
    assert image.shape[0] > 700


def test_a_given_title_and_several_results_keep_the_plain_title(lite0):
    fig = plot_per_category({"a": lite0, "b": lite0})
    assert fig.axes[0].get_title() == "Shape bias per shape category"
    plt.close(fig)
    fig = plot_per_category({"a": lite0}, title="mine")
    assert fig.axes[0].get_title() == "mine"
    plt.close(fig)
