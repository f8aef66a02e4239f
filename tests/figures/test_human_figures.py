"""The human-comparison figures draw what the papers draw: orientation, pooled humans, order, counts, bounds."""

from __future__ import annotations

import csv

import matplotlib.pyplot as plt
import numpy as np
import pytest

from modelval.behaviour.humans import compare_with_humans, load_human_panel
from modelval.behaviour.trials import read_trials
from modelval.figures.accuracy import plot_accuracy_by_dataset
from modelval.figures.consistency import plot_error_consistency, plot_kappa_matrix
from modelval.figures.humans import (
    _category_order,
    _human_shape_bias,
    plot_shape_bias_boxplot,
    plot_shape_bias_figure,
)
from reference_packages import reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
(binomtest,) = reference_names("scipy.stats", "binomtest")

VGG = "style-transfer-512-nomask-experiment_vgg16_session-1.csv"
TRAINED_CNNS = "raw-data/style-transfer-512-nomask-experiment-trained-CNNs/" + VGG


@pytest.fixture(scope="module")
def panel(modelval_reference_dir):
    return load_human_panel(modelval_reference_dir, "cue-conflict")


@pytest.fixture(scope="module")
def vgg(modelval_reference_dir):
    return read_trials(modelval_reference_dir / VGG)


def _pooled_texture_fraction(modelval_reference_dir) -> dict[str, float]:
    """Per shape category, over all human trials pooled: texture / (shape + texture), with csv only."""
    shape: dict[str, int] = {}
    texture: dict[str, int] = {}
    for path in sorted(modelval_reference_dir.glob("style-transfer-512-nomask-experiment_subject-*_session_1.csv")):
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                name = row["imagename"].split("_")[-1].removesuffix(".png")
                s, t = (part.rstrip("0123456789") for part in name.split("-"))
                if s != t:
                    shape[s] = shape.get(s, 0) + (row["object_response"] == s)
                    texture[s] = texture.get(s, 0) + (row["object_response"] == t)
    return {c: texture[c] / (shape[c] + texture[c]) for c in shape}


def test_shape_bias_figure_is_model_vs_humans_orientation(modelval_reference_dir, panel, vgg):
    fig, ax = plt.subplots()
    assert plot_shape_bias_figure({"VGG-16": vgg}, panel, ax=ax) is fig  # takes ax, returns the Figure
    assert ax.get_xlabel() == "Fraction of 'texture' decisions"  # bottom axis: texture, as upstream
    # humans pooled over their trials (as upstream), rows ordered by them: lowest texture fraction at the bottom
    fractions = _pooled_texture_fraction(modelval_reference_dir)
    expected = sorted(fractions, key=lambda c: (fractions[c], c))
    assert _category_order(_human_shape_bias(panel)) == expected
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    assert labels == [f"{c} (75)" for c in expected]  # the counts of conflict stimuli
    assert ax.get_ylim()[0] < ax.get_ylim()[1]  # first category at the bottom
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert any("all trials pooled (95.9%)" in text for text in legend)
    assert any("VGG-16 (9.2% shape bias)" in text for text in legend)
    # the humans' marker of each row sits at the pooled texture fraction
    diamonds = next(c for c in ax.collections if c.get_sizes()[0] == 60).get_offsets()
    assert np.allclose(np.asarray(diamonds)[:, 0], [fractions[c] for c in expected])
    plt.close(fig)


def test_humans_as_the_mean_of_observers_is_an_option(panel):
    mean = _human_shape_bias(panel, "mean")
    assert round(mean.overall, 4) == 0.9576 and round(_human_shape_bias(panel).overall, 4) == 0.9587
    with pytest.raises(ValueError, match="humans_mode"):
        _human_shape_bias(panel, "median")


def test_box_plot_has_one_box_per_observer(panel, vgg):
    figure = plot_shape_bias_boxplot({"VGG-16": vgg, "again": vgg}, panel, sources={"VGG-16": {"cue-conflict": "x"}})
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["humans (pooled)", "VGG-16", "again"]
    assert ax.get_ylabel() == "shape bias per category"
    assert any(text.get_text().startswith("Sources: VGG-16") for text in figure.texts)
    plt.close(figure)


def test_accuracy_figure_has_wilson_intervals_and_says_na(modelval_reference_dir):
    panels = {d: load_human_panel(modelval_reference_dir, d) for d in ("cue-conflict", "edges")}
    edges = read_trials(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")
    figure = plot_accuracy_by_dataset({"VGG-16": {"edges": edges}}, panels)
    ax = figure.axes[0]
    correct = sum(t.correct for t in edges)
    low, high = binomtest(correct, len(edges)).proportion_ci(method="wilson")
    # the error bars' segments (x, low) - (x, high), from the LineCollections errorbar draws
    segments = [seg for collection in ax.collections if hasattr(collection, "get_segments")
                for seg in collection.get_segments()]  # fmt: skip
    whiskers = [(round(float(seg[0][1]), 9), round(float(seg[1][1]), 9)) for seg in segments if len(seg) == 2]
    assert (round(low, 9), round(high, 9)) in whiskers
    assert any(text.get_text() == "n/a" for text in ax.texts)  # not run on cue-conflict: said, not blank
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "each human observer (not an interval)" in legend
    plt.close(figure)


def test_error_consistency_figure_shows_kappa_max_and_names_the_band(panel, vgg):
    result = compare_with_humans(vgg, panel, n_bootstrap=100)
    figure = plot_error_consistency({"VGG-16": {"cue-conflict": result}})
    ax = figure.axes[0]
    bound = [line for line in ax.lines if line.get_marker() == "_" and line.get_markersize() == 14]  # not caps
    assert len(bound) == 1 and bound[0].get_ydata()[0] == pytest.approx(result.kappa_max)
    legend = " ".join(text.get_text() for text in ax.get_legend().get_texts())
    assert "humans' mutual kappa" in legend and "not a ceiling" in legend and "kappa_max" in legend
    assert "texture resampled, observers fixed" in ax.get_legend().get_title().get_text()
    plt.close(figure)


def test_kappa_matrix_figure(panel, vgg):
    from modelval.behaviour.consistency import kappa_matrix

    matrix = kappa_matrix({**panel.observers, "VGG-16": vgg})
    figure = plot_kappa_matrix(matrix, humans=list(panel.observers), dataset="cue-conflict",
                               sources={"VGG-16": {"cue-conflict": TRAINED_CNNS}})  # fmt: skip
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert len(texts) == 11 * 11 and texts[0] == "1.00"
    assert any(TRAINED_CNNS in t.get_text().replace("\n", "").replace("    ", "") for t in figure.texts)
    plt.close(figure)


def test_per_category_plot_of_shape_bias_has_model_vs_human_orientation(tmp_path, modelval_reference_dir):
    from modelval.behaviour.decisions import read_decisions
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.figures import save
    from modelval.figures.shape_bias import DPI, plot_per_category

    result = compute_shape_bias(read_decisions(modelval_reference_dir / VGG), n_bootstrap=0)
    figure = plot_per_category({"VGG-16": result}, unmapped=["knife"])
    ax = figure.axes[0]
    assert ax.get_xlabel() == "fraction of 'texture' decisions"
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    assert labels[0] == "airplane (75)" and "knife (75), unmapped" in labels
    # each point at the fraction of texture decisions; an unmapped category has none (not 0)
    points = np.asarray(ax.collections[0].get_offsets())
    texture = [1 - result.per_category[label.split(" ")[0]].shape_bias for label in labels]
    knife = labels.index("knife (75), unmapped")
    assert np.isnan(points[knife, 0]) and np.allclose(np.delete(points[:, 0], knife), np.delete(texture, knife))
    [path] = save(figure, tmp_path / "p.png", dpi=DPI)
    assert path.stat().st_size > 5000
