"""model-vs-human's per-condition line plots: accuracy and error consistency against the distortion level.

As ``modelvshuman/plotting/plot.py`` draws them (``plot_accuracy`` and ``plot_error_consistency_lineplot``
through ``x_y_plot``): one line per observer over the conditions of a parametric dataset, in model-vs-human's
order and with its plotting labels and axis label; the humans as the reference (red diamonds: their accuracy
over their pooled trials, and their mutual kappa: each human against the others, averaged); a dotted line at
chance (1/16 for accuracy, kappa 0). Conditions that model-vs-human's benchmark leaves out are shaded, so a
reader sees which levels the table averages.

- :func:`plot_condition_accuracy`, :func:`plot_condition_kappa`: one dataset, one metric (``ax=None``).
- :func:`plot_condition_panels`: both side by side for one dataset (``axes=None``, two).
- :func:`plot_condition_grid`: one metric for every parametric dataset, a panel each (``axes=None``).
- :func:`write_condition_figures`, :func:`write_lines`: all of them for a benchmark table or a set of
  comparisons, written with :func:`~modelval.figures.save` (PNG and PDF).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.behaviour.conditions import ConditionComparison, HumanCondition
from modelval.behaviour.experiments import BENCHMARK_DATASETS, experiment
from modelval.figures.style import HUMAN_COLOUR, REPORT_SAVE, axes_for, new_axes, pyplot, save, style, style_indices

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: observer label -> its per-condition comparisons on one dataset
Lines = Mapping[str, Sequence[ConditionComparison]]
METRICS = {
    "accuracy": ("Classification accuracy (16 classes)", (0.0, 1.0), 1 / 16),
    "error_consistency": ("Error consistency with the humans (kappa)", (-0.2, 1.0), 0.0),
}


def _draw(
    dataset: str,
    metric: str,
    lines: Lines,
    humans: Sequence[HumanCondition] | None,
    ax: Any,
    styles: Mapping[str, int] | None,
    legend: bool,
) -> Any:
    entry = experiment(dataset)
    label, limits, chance = METRICS[metric]
    fig, ax = new_axes(ax, (5.6, 4.4))
    x = np.arange(len(entry.conditions))
    for i, condition in enumerate(entry.conditions):
        if condition.value in entry.excluded:
            ax.axvspan(i - 0.5, i + 0.5, color="#d9d9d9", alpha=0.5, linewidth=0, zorder=0)
    if humans:
        mutual = " (mutual kappa: each vs the others)" if metric != "accuracy" else ""
        kwargs = {"marker": "D", "color": HUMAN_COLOUR, "markersize": 8, "linewidth": 1.5, "zorder": 4}
        _line(ax, entry.conditions, humans, metric, label="humans" + mutual, **kwargs)
    indices = styles or style_indices(lines)  # by name: the same style in every figure
    for index, (name, rows) in enumerate(lines.items()):
        colour, marker = style(indices.get(name, index))
        kwargs = {"marker": marker, "color": colour, "markersize": 7, "linewidth": 1.2, "zorder": 3}
        _line(ax, entry.conditions, rows, metric, label=name, **kwargs)
    ax.axhline(chance, color="grey", linestyle=":", linewidth=1.2, zorder=1)
    ax.set_xticks(x, [c.label for c in entry.conditions])
    ax.set_xlim(-0.5, len(x) - 0.5)
    margin = 0.01 * (limits[1] - limits[0])
    ax.set_ylim(limits[0] - margin, limits[1] + margin)
    ax.set_xlabel(entry.xlabel)
    ax.set_ylabel(label)
    ax.set_title(dataset, fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)
    if legend:
        ax.legend(fontsize=7.5, frameon=False, loc="best")
    return fig


def _line(ax: Any, conditions: Sequence[Any], rows: Sequence[Any], metric: str, **kwargs: Any) -> None:
    values = {row.condition: getattr(row, metric) for row in rows}
    y = [values.get(c.value, math.nan) for c in conditions]
    ax.plot(np.arange(len(conditions)), y, markeredgecolor="black", markeredgewidth=0.4, **kwargs)


def plot_condition_accuracy(
    dataset: str,
    lines: Lines,
    humans: Sequence[HumanCondition] | None = None,
    *,
    styles: Mapping[str, int] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Draw each observer's accuracy against the condition of one dataset, with the humans' as the reference.

    Parameters
    ----------
    dataset
        A parametric dataset of model-vs-human (e.g. ``"eidolonI"``).
    lines
        Label -> that observer's per-condition comparisons
        (:func:`~modelval.behaviour.conditions.compare_by_condition`).
    humans
        The humans per condition (:func:`~modelval.behaviour.conditions.humans_by_condition`); ``None``: none.
    styles
        Label -> index of its colour and marker, to keep an observer's look across figures.
    ax
        Axes to draw into; ``None``: a new figure of 5.6 x 4.4 inches.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.conditions import compare_by_condition, humans_by_condition
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.figures import plot_condition_accuracy
    >>> panel = load_human_panel(MODEL_VS_HUMAN, "eidolonI")
    >>> lines = {"subject-01": compare_by_condition(panel.observers["subject-01"], panel, subject="subject-01")}
    >>> fig, ax = plt.subplots()
    >>> _ = plot_condition_accuracy("eidolonI", lines, humans_by_condition(panel), ax=ax)
    >>> len(ax.lines), [tick.get_text() for tick in ax.get_xticklabels()]  # humans, subject-01, chance
    (3, ['0', '1', '2', '3', '4', '5', '6', '7'])
    >>> plt.close(fig)
    """
    return _draw(dataset, "accuracy", lines, humans, ax, styles, legend=True)


def plot_condition_kappa(
    dataset: str,
    lines: Lines,
    humans: Sequence[HumanCondition] | None = None,
    *,
    styles: Mapping[str, int] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Draw each observer's error consistency with the humans against the condition of one dataset.

    Parameters
    ----------
    dataset
        A parametric dataset of model-vs-human (e.g. ``"eidolonI"``).
    lines
        Label -> that observer's per-condition comparisons
        (:func:`~modelval.behaviour.conditions.compare_by_condition`).
    humans
        The humans per condition (:func:`~modelval.behaviour.conditions.humans_by_condition`); ``None``: none.
    styles
        Label -> index of its colour and marker, to keep an observer's look across figures.
    ax
        Axes to draw into; ``None``: a new figure of 5.6 x 4.4 inches.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.conditions import compare_by_condition, humans_by_condition
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.figures import plot_condition_kappa
    >>> panel = load_human_panel(MODEL_VS_HUMAN, "eidolonI")
    >>> lines = {"subject-01": compare_by_condition(panel.observers["subject-01"], panel, subject="subject-01")}
    >>> fig, ax = plt.subplots()
    >>> _ = plot_condition_kappa("eidolonI", lines, humans_by_condition(panel), ax=ax)
    >>> ax.get_ylabel(), len(ax.lines[1].get_ydata())  # subject-01's kappa in each of the 8 conditions
    ('Error consistency with the humans (kappa)', 8)
    >>> plt.close(fig)
    """
    return _draw(dataset, "error_consistency", lines, humans, ax, styles, legend=True)


_NOTE = (
    "humans (red): their accuracy over their pooled trials, and their mutual kappa (each against the others)\n"
    "shaded: conditions model-vs-human's benchmark leaves out (the undistorted control, or the humans' mean "
    "accuracy below 0.2); dotted: chance"
)


def plot_condition_panels(
    dataset: str,
    lines: Lines,
    humans: Sequence[HumanCondition] | None = None,
    *,
    styles: Mapping[str, int] | None = None,
    axes: Any = None,
) -> Figure:
    """Draw accuracy and error consistency against the condition of one dataset, side by side.

    :func:`plot_condition_accuracy` on the left (with the legend), :func:`plot_condition_kappa` on the right;
    a new figure also gets the dataset in its title and a note under it on what the humans and the shading are.

    Parameters
    ----------
    dataset
        A parametric dataset of model-vs-human.
    lines
        Label -> that observer's per-condition comparisons.
    humans
        The humans per condition; ``None``: none.
    styles
        Label -> index of its colour and marker.
    axes
        Two axes of the caller's figure (each panel titled with the dataset; no figure title or note); ``None``:
        a new figure of 11 x 4.4 inches with a title and the note under it.

    Returns
    -------
    matplotlib.figure.Figure
        The figure of ``axes``, or the new figure; neither saved nor closed.

    Raises
    ------
    InputValidationError
        ``axes`` with fewer than two axes.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.conditions import compare_by_condition, humans_by_condition
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.figures import plot_condition_panels
    >>> panel = load_human_panel(MODEL_VS_HUMAN, "eidolonI")
    >>> lines = {"subject-01": compare_by_condition(panel.observers["subject-01"], panel, subject="subject-01")}
    >>> fig, axes = plt.subplots(1, 2)
    >>> _ = plot_condition_panels("eidolonI", lines, humans_by_condition(panel), axes=axes)
    >>> [ax.get_title() for ax in axes], [ax.get_ylabel()[:14] for ax in axes]
    (['eidolonI', 'eidolonI'], ['Classification', 'Error consiste'])
    >>> plt.close(fig)
    """
    own = axes is None
    if axes is None:
        fig, (left, right) = pyplot().subplots(1, 2, figsize=(11.0, 4.4))
    else:
        left, right = axes_for(axes, 2, "plot_condition_panels")[:2]
        fig = left.figure
    plot_condition_accuracy(dataset, lines, humans, styles=styles, ax=left)
    plot_condition_kappa(dataset, lines, humans, styles=styles, ax=right)
    right.get_legend().remove()
    if own:  # the title, and the note under the figure (saved with bbox_inches="tight"): not on a caller's figure
        fig.suptitle(f"{dataset}: accuracy and error consistency per condition", fontsize=11)
        fig.text(0.5, -0.05, _NOTE, ha="center", fontsize=7.5, color="#333333")
        fig.tight_layout()
    return fig


def plot_condition_grid(
    metric: str,
    lines: Mapping[str, Lines],
    humans: Mapping[str, Sequence[HumanCondition]],
    *,
    styles: Mapping[str, int] | None = None,
    axes: Any = None,
) -> Figure:
    """Draw one metric against the condition for every parametric dataset, a panel each.

    The datasets in model-vs-human's order, each panel as :func:`plot_condition_accuracy` or
    :func:`plot_condition_kappa` draws it, with one legend for all panels (and, in a new figure, a title and
    a note under the panels).

    Parameters
    ----------
    metric
        ``"accuracy"`` or ``"error_consistency"``.
    lines
        Dataset -> label -> that observer's per-condition comparisons on the dataset.
    humans
        Dataset -> the humans per condition.
    styles
        Label -> index of its colour and marker.
    axes
        Axes of the caller's figure (an array from ``plt.subplots`` or a list), at least one per parametric
        dataset; those beyond are hidden. The first panel gets the legend (no figure title or note). ``None``:
        a new figure of up to 4 columns with a title, the legend and the note under the panels.

    Returns
    -------
    matplotlib.figure.Figure
        The figure of ``axes``, or the new figure; neither saved nor closed.

    Raises
    ------
    InputValidationError
        ``axes`` with fewer axes than parametric datasets.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.conditions import compare_by_condition, humans_by_condition
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.figures import plot_condition_grid
    >>> panels = {d: load_human_panel(MODEL_VS_HUMAN, d) for d in ("eidolonI", "contrast")}
    >>> lines = {d: {"subject-01": compare_by_condition(p.observers["subject-01"], p, subject="subject-01")}
    ...          for d, p in panels.items()}
    >>> humans = {d: humans_by_condition(p) for d, p in panels.items()}
    >>> fig, axes = plt.subplots(1, 3)
    >>> _ = plot_condition_grid("accuracy", lines, humans, axes=axes)
    >>> [ax.get_title() for ax in axes if ax.get_visible()]  # model-vs-human's order
    ['contrast', 'eidolonI']
    >>> plt.close(fig)
    """
    datasets = [d for d in BENCHMARK_DATASETS if d in lines and experiment(d).parametric]
    own = axes is None
    if axes is None:
        columns = min(4, max(1, len(datasets)))
        rows = math.ceil(len(datasets) / columns)
        fig, grid = pyplot().subplots(rows, columns, figsize=(4.2 * columns, 3.5 * rows), squeeze=False)
        panels = list(grid.flat)
    else:
        panels = axes_for(axes, len(datasets), "plot_condition_grid")
        fig = panels[0].figure
    for ax, dataset in zip(panels, datasets, strict=False):
        _draw(dataset, metric, lines[dataset], humans.get(dataset), ax, styles, legend=False)
        ax.xaxis.label.set_size(8)
        ax.yaxis.label.set_size(8)
        ax.tick_params(labelsize=7.5)
    for ax in panels[len(datasets) :]:
        ax.set_visible(False)
    found: dict[str, Any] = {}  # every observer once, also one that covers only some datasets
    for ax in panels:
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(name, handle)
    handles, labels = list(found.values()), list(found)
    if not own:  # nothing over or under the caller's figure: the legend in the first panel
        panels[0].legend(handles, labels, fontsize=7.5, frameon=False)
        return fig
    name = "Accuracy" if metric == "accuracy" else "Error consistency with the humans"
    fig.suptitle(f"{name} per condition (model-vs-human's parametric datasets)", fontsize=12)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, -0.01),
        ncol=min(5, len(labels)),
        frameon=False,
        fontsize=8.5,
    )
    fig.text(0.5, -0.05, _NOTE, ha="center", fontsize=8, color="#333333")
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return fig


def write_condition_figures(table: Any, folder: str | Path) -> list[Path]:
    """The line plots of every parametric dataset of a :class:`~modelval.behaviour.benchmark.BenchmarkTable`:
    ``conditions-<dataset>.png`` (both metrics) and the two grids, as PNG and PDF.

    Parameters
    ----------
    table
        A :class:`~modelval.behaviour.benchmark.BenchmarkTable`.
    folder
        Where the figures go.
    """
    lines: dict[str, dict[str, Sequence[ConditionComparison]]] = {}
    humans: dict[str, Sequence[HumanCondition]] = {}
    for dataset in table.datasets:
        if not experiment(dataset).parametric:
            continue
        lines[dataset] = {label: per[dataset].per_condition for label, per in table.observers.items() if dataset in per}
        humans[dataset] = table.humans[dataset].per_condition
    return write_lines(lines, humans, folder, styles=style_indices(table.observers))


def write_lines(
    lines: Mapping[str, Lines],
    humans: Mapping[str, Sequence[HumanCondition]],
    folder: str | Path,
    *,
    styles: Mapping[str, int] | None = None,
) -> list[Path]:
    """``conditions-<dataset>.png`` per parametric dataset in ``lines``, and the grids when there are several.

    Parameters
    ----------
    lines
        Dataset -> label -> that observer's per-condition comparisons.
    humans
        Dataset -> the humans per condition.
    folder
        Where the figures go.
    styles
        Label -> index of its colour and marker.
    """
    out = Path(folder)
    written: list[Path] = []
    parametric = [d for d in lines if experiment(d).parametric]
    for dataset in parametric:
        figure = plot_condition_panels(dataset, lines[dataset], humans.get(dataset), styles=styles)
        written += save(figure, out / f"conditions-{dataset}.png", pdf=True, **REPORT_SAVE)
    if len(parametric) > 1:
        for metric, name in (("accuracy", "accuracy"), ("error_consistency", "error-consistency")):
            figure = plot_condition_grid(metric, lines, humans, styles=styles)
            written += save(figure, out / f"conditions-{name}.png", pdf=True, **REPORT_SAVE)
    return written
