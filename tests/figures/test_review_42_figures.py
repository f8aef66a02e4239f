"""Issue 42, point 16: one style per observer name in every figure, no overplotting at a shared scale, and a
figure that suits one model."""

from __future__ import annotations

import dataclasses

import matplotlib.pyplot as plt
import pytest

from modelval.behaviour.benchmark import ModelMetadata, benchmark_table
from modelval.behaviour.humans import load_human_panel
from modelval.behaviour.trials import read_trials
from modelval.figures.benchmark import plot_benchmark_ranks, plot_benchmark_scale, write_scale_figure
from modelval.figures.style import observer_styles, style_indices

EDGES = "edge-experiment_vgg_session_1.csv"
SILHOUETTES = "silhouette-filled-experiment_vgg_session_1.csv"
IMAGENET = ModelMetadata(138_357_544, 1_281_167, "ImageNet-1k")


def _renamed(trials, name):
    return [dataclasses.replace(t, subject=name) for t in trials]


@pytest.fixture
def table(modelval_reference_dir):
    panels = {d: load_human_panel(modelval_reference_dir, d) for d in ("edges", "filled-silhouettes")}
    edges, silhouettes = (read_trials(modelval_reference_dir / name) for name in (EDGES, SILHOUETTES))
    guessing = [dataclasses.replace(t, response=t.category if i % 3 else "knife") for i, t in enumerate(edges)]
    observers = {
        "partial": {"edges": _renamed(guessing, "partial")},  # incomplete: not in the rank figure
        "vgg": {"edges": edges, "filled-silhouettes": silhouettes},
        "zeta": {"edges": _renamed(guessing, "zeta"), "filled-silhouettes": _renamed(silhouettes, "zeta")},
    }
    metadata = {"vgg": IMAGENET, "zeta": dataclasses.replace(IMAGENET, parameters=25_557_032)}
    return benchmark_table(observers, panels, n_bootstrap=30, metadata=metadata)


def _colours(ax) -> dict[str, str]:
    handles, labels = ax.get_legend_handles_labels()
    return {label: handle.lines[0].get_color() if hasattr(handle, "lines") else handle.get_color()
            for handle, label in zip(handles, labels, strict=True)}  # fmt: skip


def test_styles_are_by_name_whatever_the_order():
    assert observer_styles(["zeta", "vgg", "partial"]) == observer_styles(["partial", "vgg", "zeta", "vgg"])
    assert style_indices(["b", "A", "c"]) == {"A": 0, "b": 1, "c": 2}


def test_an_observer_keeps_its_colour_and_marker_between_the_rank_and_scale_figures(table):
    fig, (left, right) = plt.subplots(1, 2)
    plot_benchmark_ranks(table, ax=left)
    plot_benchmark_scale(table, ax=right)
    ranks, scale = _colours(left), _colours(right)
    expected = observer_styles(table.observers)
    for label in ("vgg", "zeta"):
        assert ranks[label] == scale[label] == expected[label][0]
    plt.close(fig)


def test_observers_at_the_same_scale_do_not_overplot(table):
    fig, ax = plt.subplots()
    plot_benchmark_scale(table, scale="training_images", ax=ax)
    xs = [c.lines[0].get_xdata()[0] for c in ax.containers if c.get_label() in ("vgg", "zeta")]
    assert len(xs) == 2 and xs[0] != xs[1]  # both at 1.28 M images: spread sideways
    assert "spread sideways" in ax.get_xlabel()  # and the axis says why they are not exactly at 1.28 M
    plt.close(fig)


def test_one_model_gets_a_figure_for_one_model(modelval_reference_dir, tmp_path):
    panel = load_human_panel(modelval_reference_dir, "edges")
    one = benchmark_table({"vgg": {"edges": read_trials(modelval_reference_dir / EDGES)}}, {"edges": panel},
                          n_bootstrap=30, metadata={"vgg": IMAGENET})  # fmt: skip
    opened = []
    original = plt.Figure.savefig

    def keep(self, *args, **kwargs):
        opened.append(self)
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plt.Figure, "savefig", keep)
        written = write_scale_figure(one, tmp_path)
    assert written and len(opened[0].axes) == 2  # before: 2 scales x 2 measures of one point each
    ticks = [t.get_text() for t in opened[0].axes[0].get_xticklabels()]
    assert ticks == ["vgg\n1.28 M training images, 138 M parameters"]
