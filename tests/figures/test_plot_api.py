"""Every ``plot_*`` of ``modelval.figures`` in one style: it draws into the caller's axes when given (a figure of
several panels: ``axes``), else into a new figure, and returns that Figure, open, with nothing written to disk.

The data are real: the published decisions and human observers of texture-vs-shape and model-vs-human, a
calibration input of the calibration tests, and a protocol-sensitivity card of a small network on real stimuli.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

import modelval.figures
from modelval.behaviour.answers import PromptSearchRow
from modelval.errors import InputValidationError

RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
VGG = "style-transfer-512-nomask-experiment_vgg16_session-1.csv"
VGG_EDGES = "edge-experiment_vgg_session_1.csv"

NETS = """
import torch


def untrained():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
"""


@pytest.fixture(scope="module")
def data(modelval_reference_dir: Path, model_vs_human_raw_data: Path) -> dict[str, Any]:
    """What each plot draws, from the published raw data (and the calibration tests' input)."""
    from modelval.behaviour.benchmark import ModelMetadata, benchmark_table
    from modelval.behaviour.conditions import compare_by_condition, humans_by_condition
    from modelval.behaviour.consistency import kappa_matrix
    from modelval.behaviour.humans import compare_with_humans, load_human_panel
    from modelval.behaviour.paired import compare_paired
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.behaviour.trials import read_trials
    from modelval.metrics.binary import binary_reliability_bins
    from modelval.metrics.calibration import reliability_bins
    from modelval.metrics.estimators import smooth_reliability_curve

    rng = np.random.default_rng(0)
    conf = np.concatenate([rng.uniform(0.3, 1, 200), [1.0, 1.0, 0.0]])
    correct = rng.uniform(size=conf.size) < conf * 0.8
    p = rng.uniform(size=(300, 5))
    y = rng.uniform(size=p.shape) < p
    resnet, vgg = (read_trials(modelval_reference_dir / name) for name in (RESNET, VGG))
    edges = read_trials(modelval_reference_dir / VGG_EDGES)
    panels = {d: load_human_panel(modelval_reference_dir, d) for d in ("cue-conflict", "edges")}
    comparisons = {"VGG-16": {"edges": compare_with_humans(edges, panels["edges"], n_bootstrap=0)}}
    parametric = {d: load_human_panel(model_vs_human_raw_data, d) for d in ("eidolonI", "contrast")}
    lines = {
        d: {"subject-01": compare_by_condition(panel.observers["subject-01"], panel, subject="subject-01")}
        for d, panel in parametric.items()
    }
    return {
        "bins": reliability_bins(conf, correct, 10),
        "curve": smooth_reliability_curve(conf, correct),
        "label_bins": [binary_reliability_bins(p[:, k], y[:, k], 10) for k in range(5)],
        "shape_bias": compute_shape_bias(resnet, n_bootstrap=0),
        "resnet": resnet,
        "edges": edges,
        "panels": panels,
        "comparisons": comparisons,
        "matrix": kappa_matrix(panels["edges"].observers),
        "paired": compare_paired(resnet, vgg, dataset="cue-conflict", names=("ResNet-50", "VGG-16"), n_bootstrap=0),
        "lines": lines,
        "humans": {d: humans_by_condition(panel) for d, panel in parametric.items()},
        "benchmark": benchmark_table(
            {"ResNet-50": {"cue-conflict": resnet}, "VGG-16": {"cue-conflict": vgg}},
            {"cue-conflict": panels["cue-conflict"]},
            n_bootstrap=50,
            metadata={
                "ResNet-50": ModelMetadata(25_557_032, 1_281_167, "ImageNet-1k", "supervised"),
                "VGG-16": ModelMetadata(138_357_544, 1_281_167, "ImageNet-1k", "supervised"),
            },
        ),
    }


@pytest.fixture(scope="module")
def card(tmp_path_factory, modelval_data_root: Path):
    """The protocol-sensitivity card of an untrained network on two real stimuli per category."""
    import modelval

    folder = tmp_path_factory.mktemp("card")
    (folder / "nets.py").write_text(NETS)
    subset = folder / "stimuli"
    for category in sorted(p for p in modelval_data_root.iterdir() if p.is_dir()):
        (subset / category.name).mkdir(parents=True)
        for image in sorted(category.glob("*.png"))[:2]:
            (subset / category.name / image.name).symlink_to(image)
    return modelval.sensitivity(
        f"{folder / 'nets.py'}:untrained", data_root=subset, allow_modified_stimuli=True, device="cpu",
        bootstrap=50, permutations=50, progress=False,
    )  # fmt: skip


#: name -> draw(data, **where): one call of the plot with the data it needs
ONE_PANEL: dict[str, Callable[..., Any]] = {
    "plot_reliability": lambda d, **w: modelval.figures.plot_reliability(d["bins"], **w),
    "plot_confidence_histogram": lambda d, **w: modelval.figures.plot_confidence_histogram(d["bins"], **w),
    "plot_ece_vs_temperature": lambda d, **w: modelval.figures.plot_ece_vs_temperature(
        [0.5, 1, 1.5, 2], [0.2, 0.1, 0.05, 0.08], fitted=1.4, **w
    ),
    "plot_smooth_reliability": lambda d, **w: modelval.figures.plot_smooth_reliability(d["curve"], **w),
    "plot_per_category": lambda d, **w: modelval.figures.plot_per_category({"ResNet-50": d["shape_bias"]}, **w),
    "plot_shape_bias_figure": lambda d, **w: modelval.figures.plot_shape_bias_figure(
        {"ResNet-50": d["resnet"]}, d["panels"]["cue-conflict"], **w
    ),
    "plot_shape_bias_boxplot": lambda d, **w: modelval.figures.plot_shape_bias_boxplot(
        {"ResNet-50": d["resnet"]}, d["panels"]["cue-conflict"], **w
    ),
    "plot_accuracy_by_dataset": lambda d, **w: modelval.figures.plot_accuracy_by_dataset(
        {"VGG-16": {"edges": d["edges"]}}, d["panels"], **w
    ),
    "plot_error_consistency": lambda d, **w: modelval.figures.plot_error_consistency(d["comparisons"], **w),
    "plot_kappa_matrix": lambda d, **w: modelval.figures.plot_kappa_matrix(d["matrix"], dataset="edges", **w),
    "plot_condition_accuracy": lambda d, **w: modelval.figures.plot_condition_accuracy(
        "eidolonI", d["lines"]["eidolonI"], d["humans"]["eidolonI"], **w
    ),
    "plot_condition_kappa": lambda d, **w: modelval.figures.plot_condition_kappa(
        "eidolonI", d["lines"]["eidolonI"], d["humans"]["eidolonI"], **w
    ),
    "plot_sensitivity_card": lambda d, **w: modelval.figures.plot_sensitivity_card(d["card"], **w),
    "plot_benchmark_ranks": lambda d, **w: modelval.figures.plot_benchmark_ranks(d["benchmark"], **w),
    "plot_benchmark_scale": lambda d, **w: modelval.figures.plot_benchmark_scale(d["benchmark"], **w),
    "plot_prompt_search": lambda d, **w: modelval.figures.plot_prompt_search(
        [PromptSearchRow("internvl", "Describe the shape.", 0.384, 0.822)], measured={"mine": (0.6, 0.8)}, **w
    ),
}
#: name -> (panels it draws, draw(data, **where))
SEVERAL_PANELS: dict[str, tuple[int, Callable[..., Any]]] = {
    "plot_multilabel_reliability": (
        5,
        lambda d, **w: modelval.figures.plot_multilabel_reliability(d["label_bins"], list("abcde"), **w),
    ),
    "plot_paired_categories": (2, lambda d, **w: modelval.figures.plot_paired_categories(d["paired"], **w)),
    "plot_human_likeness": (
        3,
        lambda d, **w: modelval.figures.plot_human_likeness(d["comparisons"], d["panels"], **w),
    ),
    "plot_condition_panels": (
        2,
        lambda d, **w: modelval.figures.plot_condition_panels(
            "eidolonI", d["lines"]["eidolonI"], d["humans"]["eidolonI"], **w
        ),
    ),
    "plot_condition_grid": (
        2,
        lambda d, **w: modelval.figures.plot_condition_grid("accuracy", d["lines"], d["humans"], **w),
    ),
}


def test_every_public_plot_is_covered():
    plots = {name for name in modelval.figures.__all__ if name.startswith("plot_")}
    assert plots == set(ONE_PANEL) | set(SEVERAL_PANELS)


@pytest.fixture
def nothing_written(tmp_path, monkeypatch):
    """Run in an empty folder where any savefig fails: a plot must write nothing, anywhere."""
    monkeypatch.chdir(tmp_path)

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"a plot function wrote a file: savefig{args}")

    monkeypatch.setattr(Figure, "savefig", refuse)
    yield
    assert list(tmp_path.iterdir()) == []


def _data(name: str, data: dict[str, Any], request: pytest.FixtureRequest) -> dict[str, Any]:
    if name == "plot_sensitivity_card":
        return {**data, "card": request.getfixturevalue("card")}
    return data


@pytest.mark.parametrize("name", sorted(ONE_PANEL))
def test_draws_into_the_callers_axes(name, data, request, nothing_written):
    data = _data(name, data, request)
    fig, (mine, ax) = plt.subplots(1, 2)
    mine.plot([0, 1], [1, 0])  # the caller's other panel stays as it was
    fig.suptitle("my figure")
    before = plt.get_fignums()
    returned = ONE_PANEL[name](data, ax=ax)
    assert returned is fig is ax.figure
    assert plt.get_fignums() == before  # no figure of its own
    assert ax.has_data() or ax.images  # it drew into ax
    assert len(mine.lines) == 1 and not mine.get_title()
    assert fig.get_suptitle() == "my figure" and not fig.legends and len(fig.texts) == 1  # the caller's figure
    assert plt.fignum_exists(fig.number)  # left open for the caller
    plt.close(fig)


@pytest.mark.parametrize("name", sorted(ONE_PANEL))
def test_draws_a_new_figure_without_axes(name, data, request, nothing_written):
    data = _data(name, data, request)
    before = set(plt.get_fignums())
    fig = ONE_PANEL[name](data)
    assert isinstance(fig, Figure)
    assert set(plt.get_fignums()) == before | {fig.number}  # one new figure, open
    assert fig.axes[0].has_data() or fig.axes[0].images
    plt.close(fig)


@pytest.mark.parametrize("name", sorted(SEVERAL_PANELS))
def test_several_panels_draw_into_the_callers_axes(name, data, nothing_written):
    count, draw = SEVERAL_PANELS[name]
    fig, axes = plt.subplots(1, count + 1)
    fig.suptitle("my figure")
    before = plt.get_fignums()
    assert draw(data, axes=axes) is fig
    assert plt.get_fignums() == before and plt.fignum_exists(fig.number)
    assert all(ax.has_data() for ax in axes[:count])
    # nothing over or under the caller's figure (a title or legend of a new figure moves into the panels)
    assert fig.get_suptitle() == "my figure" and not fig.legends and len(fig.texts) == 1  # the title itself
    plt.close(fig)
    fig = draw(data)  # and a new figure without them
    assert isinstance(fig, Figure) and plt.fignum_exists(fig.number) and fig.axes[0].has_data()
    plt.close(fig)


@pytest.mark.parametrize("name", sorted(SEVERAL_PANELS))
def test_several_panels_refuse_too_few_axes_and_take_no_ax(name, data, nothing_written):
    count, draw = SEVERAL_PANELS[name]
    fig, ax = plt.subplots()
    message = rf"^{name} draws {count} panel\(s\): axes= needs {count} Axes, got 1$"
    with pytest.raises(InputValidationError, match=message):
        draw(data, axes=[ax])
    with pytest.raises(TypeError, match="ax"):
        draw(data, ax=ax)
    plt.close(fig)


def test_reliability_panels_in_the_callers_axes(data, nothing_written):
    from modelval.figures import plot_reliability, plot_smooth_reliability

    fig, (top, bottom) = plt.subplots(2, 1)
    assert plot_reliability(data["bins"], ax=top, histogram_ax=bottom, title="panel") is fig
    assert top.get_title().startswith("panel\nECE ") and bottom.get_ylabel() == "share of examples"
    shares = [patch.get_height() for patch in bottom.patches]
    assert sum(shares) == pytest.approx(1.0) and len(shares) == 10  # one bar per bin
    assert plot_smooth_reliability(data["curve"], ax=top, density_ax=bottom) is fig
    assert bottom.get_ylabel() == "density"
    for plot, extra in ((plot_reliability, "histogram"), (plot_smooth_reliability, "density")):
        what = data["bins"] if extra == "histogram" else data["curve"]
        with pytest.raises(InputValidationError, match=f"{extra}=True with ax= needs {extra}_ax="):
            plot(what, ax=top, **{extra: True})
        with pytest.raises(InputValidationError, match=f"{extra}_ax= goes with ax="):
            plot(what, **{f"{extra}_ax": bottom})
        with pytest.raises(InputValidationError, match=f"{extra}_ax= given but {extra}=False"):
            plot(what, ax=top, **{f"{extra}_ax": bottom, extra: False})
    plt.close(fig)


def test_new_reliability_figures_have_the_panel_below_unless_asked_not_to(data, nothing_written):
    from modelval.figures import plot_reliability, plot_smooth_reliability

    for plot, what in ((plot_reliability, data["bins"]), (plot_smooth_reliability, data["curve"])):
        two = plot(what)
        assert len(two.axes) == 2 and tuple(two.get_size_inches()) == (5, 7)
        one = plot(what, **{"histogram" if plot is plot_reliability else "density": False})
        assert len(one.axes) == 1 and tuple(one.get_size_inches()) == (5, 5)
        assert one.axes[0].get_xlabel() in ("confidence",)
        plt.close(two)
        plt.close(one)


def test_the_card_in_the_callers_axes_names_the_rows_left_out_in_its_x_label(request, nothing_written):
    from modelval.figures import plot_sensitivity_card

    card = request.getfixturevalue("card")
    same = [row for row in card.variants if not row.is_effect]
    fig, (ax, _) = plt.subplots(1, 2)
    plot_sensitivity_card(card, ax=ax)
    assert len(ax.get_yticklabels()) == len(card.variants) - len(same)
    assert not fig.texts  # nothing written over the caller's figure
    if same:
        assert "not shown, equal to an earlier row: " + same[0].variant.label in ax.get_xlabel()
    own = plot_sensitivity_card(card)
    assert bool(own.texts) == bool(same)  # a figure of its own: the note under it
    plt.close(fig)
    plt.close(own)
