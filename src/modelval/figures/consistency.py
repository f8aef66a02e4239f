"""Trial-by-trial comparison with humans, drawn: error consistency, its bound, all pairs, and the benchmark views.

- :func:`plot_error_consistency`: each model's mean kappa with the humans and its 95% interval, the
  most its accuracy allows (kappa_max, a black bar), and the humans' *mutual* kappa as a band (each
  human against the other humans): how much humans agree, not a level a model of lower accuracy could reach.
- :func:`plot_kappa_matrix`: model-vs-human's matrix of every pair of observers, humans and models
  (``plot_error_consistency`` / ``get_raw_matrix`` upstream), annotated with the values.
- :func:`plot_human_likeness`: model-vs-human's three benchmark views side by side: accuracy
  difference (mean squared difference to each human; lower is more human-like), observed consistency
  and error consistency (higher is more human-like), with the humans' own values (each human against
  the others, averaged) as the reference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.behaviour.benchmark import DatasetScores
from modelval.behaviour.consistency import KappaMatrix
from modelval.behaviour.experiments import DATASET_NAMES
from modelval.behaviour.humans import HumanAgreement, HumanComparison, HumanPanel, compare_with_humans
from modelval.figures.style import (
    DATASET_LABELS,
    HUMAN_COLOUR,
    Sources,
    add_sources,
    axes_for,
    new_axes,
    pyplot,
    style,
    style_indices,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _agreements(results: Mapping[str, Mapping[str, HumanComparison]]) -> dict[str, HumanAgreement]:
    """The humans' mutual kappa per experiment, from a comparison that left no human out."""
    found: dict[str, HumanAgreement] = {}
    for per_dataset in results.values():
        for dataset, result in per_dataset.items():
            # a human observer's reference leaves that human out; prefer one that leaves nobody out
            if result.excluded_self is None or dataset not in found:
                found[dataset] = result.agreement
    return found


def plot_error_consistency(
    results: Mapping[str, Mapping[str, HumanComparison]],
    agreements: Mapping[str, HumanAgreement] | None = None,
    *,
    sources: Sources | None = None,
    title: str = "Error consistency with humans (Cohen's kappa)",
    ax: Axes | None = None,
) -> Figure:
    """Draw each model's error consistency with the humans per experiment, against the humans' own.

    Per experiment: each model's mean kappa with the human observers and its 95% interval, the most a model of
    its accuracy can reach (kappa_max, a black bar), and the humans' mutual kappa (band: lowest to highest
    human's mean kappa with the others; line: the mean over pairs): how much humans agree, not a level a model
    of lower accuracy could reach. An experiment a model was not run on reads "n/a".

    Parameters
    ----------
    results
        Label -> dataset -> that observer's comparison with the humans
        (:func:`~modelval.behaviour.humans.compare_with_humans`).
    agreements
        Dataset -> the humans' mutual kappa; ``None``: taken from ``results``.
    sources
        Label -> dataset -> the file its trials come from, for a footnote under the figure.
    title
        The title.
    ax
        Axes to draw into; ``None``: a new figure 4.8 inches high, 2.4 inches per experiment wide.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.humans import compare_with_humans, load_human_panel
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_error_consistency
    >>> vgg = read_trials(REFERENCE / "edge-experiment_vgg_session_1.csv")
    >>> result = compare_with_humans(vgg, load_human_panel(REFERENCE, "edges"), n_bootstrap=0)
    >>> fig, ax = plt.subplots()
    >>> _ = plot_error_consistency({"VGG-16": {"edges": result}}, ax=ax)
    >>> kappa = ax.containers[0].lines[0].get_ydata()[0]  # the model's marker, with its interval
    >>> bool(kappa == result.error_consistency), [float(y) for y in ax.get_ylim()]
    (True, [-0.2, 1.0])
    >>> plt.close(fig)
    """
    agreements = dict(agreements) if agreements is not None else _agreements(results)
    datasets = [d for d in DATASET_NAMES if d in agreements]
    x = np.arange(len(datasets))
    fig, ax = new_axes(ax, (max(4.2, 2.4 * len(datasets) + 1.8), 4.8))
    for i, dataset in enumerate(datasets):
        agreement = agreements[dataset]
        low, high = agreement.range
        ax.fill_between(
            [x[i] - 0.4, x[i] + 0.4],
            low,
            high,
            color=HUMAN_COLOUR,
            alpha=0.18,
            linewidth=0,
            label="humans' mutual kappa: each human vs the others (lowest to highest)" if i == 0 else None,
        )
        ax.plot(
            [x[i] - 0.4, x[i] + 0.4],
            [agreement.mean] * 2,
            color=HUMAN_COLOUR,
            linewidth=2,
            label="humans' mutual kappa: mean over pairs (not a ceiling for models)" if i == 0 else None,
        )
    count = max(len(results), 1)
    offsets = (np.arange(count) - (count - 1) / 2) * min(0.18, 0.6 / count)
    bound_labelled = False
    indices = style_indices(results)  # by name: the same style in every figure
    for index, (label, per_dataset) in enumerate(results.items()):
        colour, marker = style(indices[label])
        first = True
        for i, dataset in enumerate(datasets):
            if dataset not in per_dataset:
                ax.text(x[i] + offsets[index], -0.15, "n/a", ha="center", fontsize=7, color=colour, rotation=90)
                continue
            result = per_dataset[dataset]
            low, high = result.ci95
            kappa = result.error_consistency
            yerr = None if math.isnan(low) else [[kappa - low], [high - kappa]]
            ax.errorbar(x[i] + offsets[index], kappa, yerr=yerr, fmt=marker, color=colour, markeredgecolor="black",
                        markersize=7, capsize=3, label=label if first else None)  # fmt: skip
            ax.plot(
                x[i] + offsets[index],
                result.kappa_max,
                marker="_",
                markersize=14,
                markeredgewidth=2.2,
                color="black",
                linestyle="none",
                label=None if bound_labelled else "kappa_max: the most a model of its accuracy can reach",
            )
            bound_labelled = True
            first = False
    ax.axhline(0, color="grey", linestyle=":", linewidth=1.2, label="chance agreement (kappa = 0)")
    ax.set_xticks(x, [DATASET_LABELS[d] for d in datasets])
    ax.set_xlim(-0.6, len(datasets) - 0.4)
    ax.set_ylim(-0.2, 1)
    ax.set_ylabel("Error consistency (kappa)")
    ax.set_title(title, fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    intervals = sorted({_interval_note(r) for per in results.values() for r in per.values()})
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False, fontsize=8.5,
              title="markers: mean kappa with the humans; bars: 95% bootstrap CI\n" + "\n".join(intervals),
        title_fontsize=7.5)  # fmt: skip
    add_sources(fig, sources, datasets)
    return fig


def _interval_note(result: HumanComparison) -> str:
    observers = "observers resampled" if result.resample_observers else "observers fixed"
    return f"{result.dataset}: {result.resampling} resampled, {observers}"


def plot_kappa_matrix(
    matrix: KappaMatrix,
    *,
    humans: list[str] | None = None,
    dataset: str = "",
    sources: Sources | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Draw the error consistency of every pair of observers as a heatmap, humans and models alike.

    As model-vs-human's ``get_raw_matrix`` plot: a diverging colour map centred at 0, each cell annotated with
    its kappa, each observer's accuracy in brackets, the humans' names in red and the models' in blue, and a
    colour bar next to the axes.

    Parameters
    ----------
    matrix
        The pairwise kappas (:func:`~modelval.behaviour.consistency.kappa_matrix`).
    humans
        The names in ``matrix`` that are human observers (drawn red).
    dataset
        The experiment, for the title and the footnote.
    sources
        Label -> dataset -> the file its trials come from, for a footnote under the figure.
    ax
        Axes to draw into; ``None``: a new figure, 0.55 inch per observer.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.consistency import kappa_matrix
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.figures import plot_kappa_matrix
    >>> panel = load_human_panel(REFERENCE, "edges")
    >>> fig, ax = plt.subplots()
    >>> _ = plot_kappa_matrix(kappa_matrix(panel.observers), humans=list(panel.observers), dataset="edges", ax=ax)
    >>> len(ax.texts), ax.texts[0].get_text()  # 10 x 10 cells, each human agreeing fully with itself
    (100, '1.00')
    >>> plt.close(fig)
    """
    n = len(matrix.names)
    fig, ax = new_axes(ax, (0.55 * n + 3.2, 0.55 * n + 2.2))
    image = ax.imshow(matrix.kappa, cmap="RdBu_r", vmin=-1, vmax=1)
    for i in range(n):
        for j in range(n):
            value = matrix.kappa[i, j]
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6.5,
                    color="white" if abs(value) > 0.6 else "black")  # fmt: skip
    humans = humans or []
    labels = [f"{name} ({matrix.accuracy[k]:.0%})" for k, name in enumerate(matrix.names)]
    ax.set_xticks(np.arange(n), labels, rotation=60, ha="right", fontsize=7.5)
    ax.set_yticks(np.arange(n), labels, fontsize=7.5)
    for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
        for tick, name in zip(ticks, matrix.names, strict=True):
            tick.set_color(HUMAN_COLOUR if name in humans else "#1f3a93")
    colourbar = fig.colorbar(image, ax=ax, shrink=0.7)
    colourbar.set_label("error consistency (kappa)")
    ax.set_title(
        f"Error consistency of every pair of observers{': ' + dataset if dataset else ''}\n"
        f"(accuracy in brackets; red: humans, blue: models; 'na' {matrix.na_handling})",
        fontsize=9.5,
    )
    add_sources(fig, sources, [dataset] if dataset else None)
    return fig


def _human_reference(panel: HumanPanel, na_handling: str = "wrong") -> dict[str, float]:
    """The humans' own values of the benchmark views: each human against the other humans, averaged."""
    each = [
        compare_with_humans(trials, panel, subject=name, n_bootstrap=0, na_handling=na_handling)
        for name, trials in sorted(panel.observers.items())
    ]
    return {
        "accuracy_difference": float(np.mean([c.accuracy_difference for c in each])),
        "observed_consistency": float(np.mean([c.observed_consistency for c in each])),
        "error_consistency": float(np.mean([c.error_consistency for c in each])),
    }


VIEWS = (
    ("accuracy_difference", "accuracy difference\n(mean squared, to each human) ↓"),
    ("observed_consistency", "observed consistency\n(trials both right or both wrong) ↑"),
    ("error_consistency", "error consistency (kappa) ↑"),
)


def plot_human_likeness(
    results: Mapping[str, Mapping[str, HumanComparison]],
    panels: Mapping[str, HumanPanel] | None = None,
    *,
    na_handling: str = "wrong",
    sources: Sources | None = None,
    per_condition: Mapping[str, Mapping[str, DatasetScores]] | None = None,
    humans_per_condition: Mapping[str, DatasetScores] | None = None,
    axes: Any = None,
) -> Figure:
    """Draw model-vs-human's three benchmark views per experiment: models as markers, humans as red diamonds.

    Side by side: the accuracy difference (mean squared difference to each human; lower is more human-like),
    the observed consistency and the error consistency (higher is more human-like), with the humans' own values
    (each human against the others, averaged) as the reference. On a dataset with conditions,
    ``per_condition[label][dataset]`` and ``humans_per_condition[dataset]`` (:mod:`modelval.behaviour.benchmark`)
    give model-vs-human's values, the mean over its kept conditions of the values within each condition; those
    datasets are starred. Without them every value pools the trials.

    Three panels with one legend, so it takes ``axes`` (three), not ``ax``.

    Parameters
    ----------
    results
        Label -> dataset -> that observer's comparison with the humans.
    panels
        Dataset -> its human panel, for the humans' reference values; ``None``: no humans drawn.
    na_handling
        How the humans' "na" answers count: ``"wrong"`` or ``"exclude"``.
    sources
        Label -> dataset -> the file its trials come from, for a footnote under the figure.
    per_condition
        Label -> dataset -> model-vs-human's per-condition scores, for datasets with conditions.
    humans_per_condition
        Dataset -> the humans' per-condition scores.
    axes
        Three axes of the caller's figure (the first panel gets the legend; no figure title); ``None``: a new
        figure 4.2 inches high with a title, the legend under the panels.

    Returns
    -------
    matplotlib.figure.Figure
        The figure of ``axes``, or the new figure; neither saved nor closed.

    Raises
    ------
    InputValidationError
        ``axes`` with fewer than three axes.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.humans import compare_with_humans, load_human_panel
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_human_likeness
    >>> panel = load_human_panel(REFERENCE, "edges")
    >>> vgg = read_trials(REFERENCE / "edge-experiment_vgg_session_1.csv")
    >>> result = compare_with_humans(vgg, panel, n_bootstrap=0)
    >>> fig, axes = plt.subplots(1, 3)
    >>> _ = plot_human_likeness({"VGG-16": {"edges": result}}, {"edges": panel}, axes=axes)
    >>> [len(ax.lines) for ax in axes], [float(y) for y in axes[2].get_ylim()]  # humans, VGG-16; kappa 0
    ([2, 2, 3], [-0.2, 1.0])
    >>> plt.close(fig)
    """
    datasets = [d for d in DATASET_NAMES if any(d in per for per in results.values())]
    own = axes is None
    if axes is None:
        fig, axes = pyplot().subplots(1, 3, figsize=(max(9.0, 3.2 * len(datasets) + 3.0), 4.2))
    else:
        axes = axes_for(axes, 3, "plot_human_likeness")[:3]
        fig = axes[0].figure
    x = np.arange(len(datasets))
    humans = {d: _human_reference(panels[d], na_handling) for d in datasets if panels and d in panels}
    for dataset, scores in (humans_per_condition or {}).items():
        humans[dataset] = {key: scores.value(key) for key, _ in VIEWS}
    within = {d for per in (per_condition or {}).values() for d in per} | set(humans_per_condition or {})
    count = max(len(results), 1)
    offsets = (np.arange(count) - (count - 1) / 2) * min(0.15, 0.5 / count)
    for ax, (key, label) in zip(axes, VIEWS, strict=True):
        for i, dataset in enumerate(datasets):
            if dataset in humans:
                ax.plot(x[i], humans[dataset][key], marker="D", color=HUMAN_COLOUR, markersize=8,
                        markeredgecolor="black", linestyle="none",
                        label="humans (each vs the others, mean)" if i == 0 else None)  # fmt: skip
        for index, (name, per_dataset) in enumerate(results.items()):
            colour, marker = style(style_indices(results)[name])
            mine = (per_condition or {}).get(name, {})
            values = [
                mine[d].value(key) if d in mine else getattr(per_dataset[d], key) if d in per_dataset else math.nan
                for d in datasets
            ]
            ax.plot(x + offsets[index], values, marker=marker, color=colour, markeredgecolor="black", linestyle="none",
                    markersize=7, label=name)  # fmt: skip
        ax.set_xticks(x, [DATASET_LABELS[d] + ("*" if d in within else "") for d in datasets], fontsize=8)
        ax.set_xlim(-0.6, len(datasets) - 0.4)
        ax.set_title(label, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylim(0, 1)
    axes[2].set_ylim(-0.2, 1)
    axes[2].axhline(0, color="grey", linestyle=":", linewidth=1)
    handles, labels = axes[0].get_legend_handles_labels()
    starred = "* within each condition, averaged over model-vs-human's benchmark conditions"
    if not own:  # nothing over or under the caller's figure: the legend (and what * means) in the first panel
        axes[0].legend(handles, labels, fontsize=7.5, title=starred.replace(", ", ",\n") if within else None,
                       title_fontsize=7)  # fmt: skip
        add_sources(fig, sources, datasets)
        return fig
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(labels)), frameon=False,
               fontsize=8.5)  # fmt: skip
    title = "How human-like are the errors? (model-vs-human's benchmark views)"
    if within:
        title += "\n" + starred
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    add_sources(fig, sources, datasets)
    return fig
