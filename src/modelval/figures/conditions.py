"""model-vs-human's per-condition line plots: accuracy and error consistency against the distortion level.

As ``modelvshuman/plotting/plot.py`` draws them (``plot_accuracy`` and ``plot_error_consistency_lineplot``
through ``x_y_plot``): one line per observer over the conditions of a parametric dataset, in model-vs-human's
order and with its plotting labels and axis label; the humans as the reference (red diamonds: their accuracy
over their pooled trials, and their mutual kappa: each human against the others, averaged); a dotted line at
chance (1/16 for accuracy, kappa 0). Conditions that model-vs-human's benchmark leaves out are shaded, so a
reader sees which levels the table averages.

- :func:`plot_condition_accuracy`, :func:`plot_condition_kappa`: one dataset, one metric (``ax=None``).
- :func:`plot_condition_panels`: both side by side for one dataset.
- :func:`plot_condition_grid`: one metric for every parametric dataset, a panel each.
- :func:`write_condition_figures`: all of them for a benchmark table or a set of comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelval.behaviour.conditions import ConditionComparison, HumanCondition
from modelval.behaviour.experiments import BENCHMARK_DATASETS, experiment
from modelval.figures.style import HUMAN_COLOUR, new_axes, pyplot, save_figure, style

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
        values = {row.condition: getattr(row, metric) for row in humans}
        ax.plot(
            x,
            [values.get(c.value, math.nan) for c in entry.conditions],
            marker="D",
            color=HUMAN_COLOUR,
            markersize=8,
            markeredgecolor="black",
            markeredgewidth=0.4,
            linewidth=1.5,
            label="humans" + (" (mutual kappa: each vs the others)" if metric != "accuracy" else ""),
            zorder=4,
        )
    for index, (name, rows) in enumerate(lines.items()):
        colour, marker = style((styles or {}).get(name, index))
        values = {row.condition: getattr(row, metric) for row in rows}
        ax.plot(
            x,
            [values.get(c.value, math.nan) for c in entry.conditions],
            marker=marker,
            color=colour,
            markersize=7,
            markeredgecolor="black",
            markeredgewidth=0.4,
            linewidth=1.2,
            label=name,
            zorder=3,
        )
    ax.axhline(chance, color="grey", linestyle=":", linewidth=1.2, zorder=1)
    ax.set_xticks(x, [c.label for c in entry.conditions])
    ax.set_xlim(-0.5, len(x) - 0.5)
    margin = 0.01 * (limits[1] - limits[0])
    ax.set_ylim(limits[0] - margin, limits[1] + margin)
    ax.set_xlabel(entry.xlabel)
    ax.set_ylabel(label)
    ax.set_title(dataset, fontsize=11)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if legend:
        ax.legend(fontsize=7.5, frameon=False, loc="best")
    return fig


def plot_condition_accuracy(
    dataset: str,
    lines: Lines,
    humans: Sequence[HumanCondition] | None = None,
    *,
    styles: Mapping[str, int] | None = None,
    ax: Any = None,
) -> Any:
    """Accuracy per condition of each observer, the humans' as the reference; returns the Figure."""
    return _draw(dataset, "accuracy", lines, humans, ax, styles, legend=True)


def plot_condition_kappa(
    dataset: str,
    lines: Lines,
    humans: Sequence[HumanCondition] | None = None,
    *,
    styles: Mapping[str, int] | None = None,
    ax: Any = None,
) -> Any:
    """Mean kappa with the humans per condition of each observer, the humans' mutual kappa as the reference."""
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
) -> Any:
    """Accuracy and error consistency against the condition, side by side, for one dataset."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(11.0, 4.4))
    plot_condition_accuracy(dataset, lines, humans, styles=styles, ax=left)
    plot_condition_kappa(dataset, lines, humans, styles=styles, ax=right)
    right.get_legend().remove()
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
) -> Any:
    """One panel per parametric dataset (model-vs-human's order) of ``metric`` against the condition."""
    datasets = [d for d in BENCHMARK_DATASETS if d in lines and experiment(d).parametric]
    columns = min(4, max(1, len(datasets)))
    rows = math.ceil(len(datasets) / columns)
    fig, axes = pyplot().subplots(rows, columns, figsize=(4.2 * columns, 3.5 * rows), squeeze=False)
    for ax, dataset in zip(axes.flat, datasets, strict=False):
        _draw(dataset, metric, lines[dataset], humans.get(dataset), ax, styles, legend=False)
        ax.xaxis.label.set_size(8)
        ax.yaxis.label.set_size(8)
        ax.tick_params(labelsize=7.5)
    for ax in list(axes.flat)[len(datasets) :]:
        ax.set_visible(False)
    found: dict[str, Any] = {}  # every observer once, also one that covers only some datasets
    for ax in axes.flat:
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(name, handle)
    handles, labels = list(found.values()), list(found)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, -0.01),
        ncol=min(5, len(labels)),
        frameon=False,
        fontsize=8.5,
    )
    name = "Accuracy" if metric == "accuracy" else "Error consistency with the humans"
    fig.suptitle(f"{name} per condition (model-vs-human's parametric datasets)", fontsize=12)
    fig.text(0.5, -0.05, _NOTE, ha="center", fontsize=8, color="#333333")
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return fig


def write_condition_figures(table: Any, folder: str | Path) -> list[Path]:
    """The line plots of every parametric dataset of a :class:`~modelval.behaviour.benchmark.BenchmarkTable`:
    ``conditions-<dataset>.png`` (both metrics) and the two grids, as PNG and PDF."""
    lines: dict[str, dict[str, Sequence[ConditionComparison]]] = {}
    humans: dict[str, Sequence[HumanCondition]] = {}
    for dataset in table.datasets:
        if not experiment(dataset).parametric:
            continue
        lines[dataset] = {label: per[dataset].per_condition for label, per in table.observers.items() if dataset in per}
        humans[dataset] = table.humans[dataset].per_condition
    return write_lines(lines, humans, folder, styles={label: i for i, label in enumerate(table.observers)})


def write_lines(
    lines: Mapping[str, Lines],
    humans: Mapping[str, Sequence[HumanCondition]],
    folder: str | Path,
    *,
    styles: Mapping[str, int] | None = None,
) -> list[Path]:
    """``conditions-<dataset>.png`` per parametric dataset in ``lines``, and the grids when there are several."""
    out = Path(folder)
    written: list[Path] = []
    parametric = [d for d in lines if experiment(d).parametric]
    for dataset in parametric:
        figure = plot_condition_panels(dataset, lines[dataset], humans.get(dataset), styles=styles)
        written += save_figure(figure, out / f"conditions-{dataset}.png")
    if len(parametric) > 1:
        for metric, name in (("accuracy", "accuracy"), ("error_consistency", "error-consistency")):
            figure = plot_condition_grid(metric, lines, humans, styles=styles)
            written += save_figure(figure, out / f"conditions-{name}.png")
    return written
