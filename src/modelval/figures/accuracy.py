"""Accuracy by experiment, models against humans (16-class accuracy; cue-conflict: the shape is correct).

Each model is a bar with its Wilson 95% interval over the images (the images taken as independent);
the humans are a bar at their accuracy over all trials pooled, as model-vs-human pools the observers
of "humans" (``humans_mode="mean"``: the mean over observers), with each observer as a dot. The dots
are the observers themselves, not an interval. An experiment a model was not run on reads "n/a", not
an empty slot that looks like 0%.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from modelval.behaviour.accuracy import wilson_interval
from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.consistency import ObserverVectors
from modelval.behaviour.decisions import Decision
from modelval.behaviour.experiments import DATASET_NAMES
from modelval.behaviour.humans import HumanPanel
from modelval.figures.style import (
    DATASET_LABELS,
    HUMAN_COLOUR,
    HUMAN_MODES,
    Sources,
    add_sources,
    new_axes,
    style,
    style_indices,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def human_accuracy(panel: HumanPanel, mode: str = "pooled", na_handling: str = "wrong") -> tuple[float, list[float]]:
    """(the humans' accuracy: all trials pooled or the mean over observers, each observer's accuracy).

    Parameters
    ----------
    panel
        The human observers.
    mode
        "pooled" (all trials together) or "mean" (over observers).
    na_handling
        How a "na" answer counts (:func:`~modelval.behaviour.consistency.check_na_handling`).
    """
    if mode not in HUMAN_MODES:
        raise ValueError(f"humans_mode must be one of {HUMAN_MODES}, got {mode!r}")
    vectors = list(panel.vectors().values())
    each = [v.accuracy(na_handling) for v in vectors]
    if mode == "mean":
        return float(np.mean(each)), each
    correct = sum(int(v.correct[v.answered].sum() if na_handling == "exclude" else v.correct.sum()) for v in vectors)
    trials = sum(int(v.answered.sum() if na_handling == "exclude" else v.correct.size) for v in vectors)
    return correct / trials, each


def _model_accuracy(trials: Sequence[Decision]) -> tuple[float, tuple[float, float], int]:
    """(accuracy, Wilson 95% interval, images) of one observer's trials."""
    vector = ObserverVectors.of(trials, [t.image for t in trials])
    correct, images = int(vector.correct.sum()), int(vector.correct.size)
    return correct / images, wilson_interval(correct, images), images


def plot_accuracy_by_dataset(
    models: Mapping[str, Mapping[str, Sequence[Decision]]],
    panels: Mapping[str, HumanPanel],
    *,
    humans_mode: str = "pooled",
    na_handling: str = "wrong",
    sources: Sources | None = None,
    title: str = "Accuracy by experiment: models vs humans",
    ax: Axes | None = None,
) -> Figure:
    """Draw the 16-class accuracy per experiment of each model, next to the humans'.

    Each model is a bar with its Wilson 95% interval over the images; the humans are a bar at their accuracy
    over all trials pooled (``humans_mode="mean"``: the mean over observers) with each observer as a dot (the
    observers themselves, not an interval). An experiment a model was not run on reads "n/a". A dotted line
    marks chance (1/16).

    Parameters
    ----------
    models
        Label -> dataset -> that observer's trials on the dataset.
    panels
        Dataset -> its human panel (:func:`~modelval.behaviour.humans.load_human_panel`).
    humans_mode
        ``"pooled"`` (all trials, as model-vs-human) or ``"mean"`` (the mean over observers).
    na_handling
        How the humans' "na" answers count: ``"wrong"`` or ``"exclude"``.
    sources
        Label -> dataset -> the file its trials come from, for a footnote under the figure.
    title
        The first line of the title.
    ax
        Axes to draw into; ``None``: a new figure 4.8 inches high, wider with more experiments and models.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_accuracy_by_dataset
    >>> vgg = read_trials(REFERENCE / "edge-experiment_vgg_session_1.csv")
    >>> fig, ax = plt.subplots()
    >>> _ = plot_accuracy_by_dataset({"VGG-16": {"edges": vgg}}, {"edges": load_human_panel(REFERENCE, "edges")}, ax=ax)
    >>> [tick.get_text() for tick in ax.get_xticklabels()], [text.get_text() for text in ax.texts]  # humans, VGG-16
    (['edges'], ['87%', '24%'])
    >>> plt.close(fig)
    """
    datasets = [d for d in DATASET_NAMES if d in panels or any(d in v for v in models.values())]
    x = np.arange(len(datasets))
    fig, ax = new_axes(ax, (max(6.4, 0.5 * len(datasets) * (len(models) + 1) + 2.0), 4.8))
    width = 0.8 / (len(models) + 1)
    offsets = (np.arange(len(models) + 1) - len(models) / 2) * width
    for i, dataset in enumerate(datasets):
        if dataset not in panels:
            ax.text(x[i] + offsets[0], 0.02, "n/a", ha="center", va="bottom", fontsize=8, color="grey", rotation=90)
            continue
        value, each = human_accuracy(panels[dataset], humans_mode, na_handling)
        ax.bar(x[i] + offsets[0], value, width * 0.9, color=HUMAN_COLOUR, alpha=0.75,
               label=f"humans ({'all trials pooled' if humans_mode == 'pooled' else 'mean of observers'})"
               if i == 0 else None)  # fmt: skip
        jitter = np.linspace(-width * 0.25, width * 0.25, len(each))
        ax.scatter(x[i] + offsets[0] + jitter, each, s=10, color="black", alpha=0.45, zorder=3,
                   label="each human observer (not an interval)" if i == 0 else None)  # fmt: skip
        ax.text(x[i] + offsets[0], 0.03, f"{value:.0%}", ha="center", fontsize=7, color="white", fontweight="bold")
    for index, (label, per_dataset) in enumerate(models.items()):
        colour, _ = style(style_indices(models)[label])  # by name: the same colour in every figure
        labelled = False
        for i, dataset in enumerate(datasets):
            position = x[i] + offsets[index + 1]
            if dataset not in per_dataset:
                ax.text(position, 0.02, "n/a", ha="center", va="bottom", fontsize=8, color=colour, rotation=90)
                continue
            value, (low, high), _ = _model_accuracy(per_dataset[dataset])
            ax.bar(position, value, width * 0.9, color=colour, label=None if labelled else label)
            ax.errorbar(position, value, yerr=[[value - low], [high - value]], color="black", capsize=3, linewidth=1)
            ax.text(position, high + 0.015, f"{value:.0%}", ha="center", fontsize=7)
            labelled = True
    ax.axhline(1 / len(CATEGORIES), color="grey", linestyle=":", linewidth=1.2, label="chance (1/16)")
    ax.set_xticks(x, [DATASET_LABELS[d] for d in datasets])
    ax.set_xlim(-0.5, len(datasets) - 0.5)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("16-class accuracy")
    ax.set_title(title + "\nmodels: Wilson 95% interval over images; n/a: not run on that experiment", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False, fontsize=8.5)
    add_sources(fig, sources, datasets)
    return fig
