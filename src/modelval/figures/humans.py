"""The figures researchers publish next to humans, drawn as the papers draw them.

- :func:`plot_shape_bias_figure`: model-vs-human's shape-bias matrix plot (Geirhos et al., ICLR 2019,
  Fig. 4): one row per shape category, the bottom axis the fraction of *texture* decisions and the top
  axis the fraction of *shape* decisions (``modelvshuman/plotting/plot.py``,
  ``plot_shape_bias_matrixplot``). The humans are pooled over all their trials, as upstream pools the
  observers of "humans" (``humans_mode="mean"`` draws the mean over observers instead); the categories
  are ordered by the humans (most shape-biased at the bottom, as upstream), and every row says how many
  conflict stimuli it has and on how many shape or texture decisions each point rests.
- :func:`plot_shape_bias_boxplot`: upstream's box plot: per observer, the spread of its 16
  per-category shape biases.
- :func:`plot_paired_categories`: ``modelval compare``'s figure: per category the values of A and B,
  and A − B with its 95% interval and Holm-adjusted exact test.
- :func:`write_human_figures`: all figures of ``modelval humans`` with several observers, including accuracy
  (:mod:`modelval.figures.accuracy`) and error consistency
  (:mod:`modelval.figures.consistency`).

Every ``plot_*`` function draws into the caller's ``ax`` (``plot_paired_categories``: ``axes``, two panels) or a
new figure and returns the Figure; :func:`write_human_figures` writes them with :func:`~modelval.figures.save`
(PNG and PDF).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.consistency import kappa_matrix
from modelval.behaviour.decisions import Decision
from modelval.behaviour.humans import HumanComparison, HumanPanel
from modelval.behaviour.paired import PairedComparison
from modelval.behaviour.shape_bias import ShapeBiasResult, compute_shape_bias
from modelval.figures.style import (
    HUMAN_COLOUR,
    HUMAN_MODES,
    REPORT_SAVE,
    Sources,
    add_sources,
    axes_for,
    new_axes,
    pyplot,
    save,
    style,
    style_indices,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "HumanShapeBias",
    "plot_paired_categories",
    "plot_shape_bias_boxplot",
    "plot_shape_bias_figure",
    "write_human_figures",
]


def _shape_bias_of(trials: Sequence[Decision]) -> ShapeBiasResult:
    """Shape bias (overall and per category) of cue-conflict trials, without a bootstrap."""
    return compute_shape_bias(trials, n_bootstrap=0)


class HumanShapeBias:
    """The humans' shape bias, overall and per category, pooled over their trials or averaged over observers."""

    def __init__(self, panel: HumanPanel, mode: str = "pooled") -> None:
        if mode not in HUMAN_MODES:
            raise ValueError(f"humans_mode must be one of {HUMAN_MODES}, got {mode!r}")
        self.mode = mode
        self.observers = {name: _shape_bias_of(trials) for name, trials in sorted(panel.observers.items())}
        pooled = compute_shape_bias([d for trials in panel.observers.values() for d in trials], n_bootstrap=0)
        self.decisions = {
            c: pooled.per_category[c].shape_hits + pooled.per_category[c].texture_hits for c in CATEGORIES
        }
        if mode == "pooled":
            self.overall = pooled.shape_bias
            self.per_category = {c: pooled.per_category[c].shape_bias for c in CATEGORIES}
        else:
            self.overall = float(np.mean([r.shape_bias for r in self.observers.values()]))
            with np.errstate(invalid="ignore"):
                self.per_category = {
                    c: float(np.nanmean([r.per_category[c].shape_bias for r in self.observers.values()]))
                    for c in CATEGORIES
                }

    @property
    def label(self) -> str:
        how = "all trials pooled" if self.mode == "pooled" else "mean over observers"
        return f"humans, {len(self.observers)} observers, {how} ({self.overall:.1%})"


def _human_shape_bias(panel: HumanPanel, mode: str = "pooled") -> HumanShapeBias:
    return HumanShapeBias(panel, mode)


def _category_order(humans: HumanShapeBias | None) -> list[str]:
    """Categories by the humans' fraction of texture decisions, lowest first (drawn at the bottom, as upstream);
    ties and the no-humans case alphabetical."""
    if humans is None:
        return list(CATEGORIES)
    return sorted(CATEGORIES, key=lambda c: (1 - humans.per_category[c], c))


def plot_shape_bias_figure(
    models: Mapping[str, Sequence[Decision]],
    humans: HumanPanel | None,
    *,
    humans_mode: str = "pooled",
    sources: Sources | None = None,
    styles: Mapping[str, int] | None = None,
    title: str = "Shape bias on cue-conflict images",
    ax: Axes | None = None,
) -> Figure:
    """Draw model-vs-human's shape-bias matrix plot: per category, the fraction of texture and shape decisions.

    As ``plot_shape_bias_matrixplot`` upstream (Geirhos et al., ICLR 2019, Fig. 4): one row per shape category,
    the bottom axis the fraction of *texture* decisions and the top axis the fraction of *shape* decisions.
    The humans (red diamonds, each observer faint behind them) are pooled over all their trials, as upstream
    pools the observers of "humans", and order the rows (most shape-biased at the bottom); each model is a
    marker per row and a dashed line at its overall value. The left labels give each category's conflict
    stimuli, the right ones the shape + texture decisions behind each point; the legend sits under the axes.

    Parameters
    ----------
    models
        Label -> that observer's cue-conflict trials (:func:`~modelval.behaviour.trials.read_trials`).
    humans
        The human panel (:func:`~modelval.behaviour.humans.load_human_panel`), or ``None`` for models alone
        (rows then in the categories' order).
    humans_mode
        ``"pooled"`` (all trials, as upstream) or ``"mean"`` (the mean over observers).
    sources
        Label -> dataset -> the file its trials come from, for a footnote under the figure.
    styles
        Label -> index of its colour and marker, to keep a model's look across figures.
    title
        The title.
    ax
        Axes to draw into; ``None``: a new figure of 7.6 x 8 inches.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_shape_bias_figure
    >>> resnet = read_trials(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> fig, ax = plt.subplots()
    >>> _ = plot_shape_bias_figure({"ResNet-50": resnet}, load_human_panel(REFERENCE, "cue-conflict"), ax=ax)
    >>> [text.get_text() for text in ax.get_legend().get_texts()][1]
    'ResNet-50 (22.1% shape bias)'
    >>> plt.close(fig)
    """
    fig, ax = new_axes(ax, (7.6, 8.0))
    reference = _human_shape_bias(humans, humans_mode) if humans is not None else None
    order = _category_order(reference)
    rows = np.arange(len(order))
    counts: dict[str, list[int]] = {c: [] for c in order}
    for i in range(len(order) - 1):
        ax.axhline(i + 0.5, color="grey", linestyle=":", alpha=0.4, linewidth=0.8)
    if reference is not None:
        for result in reference.observers.values():
            values = [1 - result.per_category[c].shape_bias for c in order]
            ax.scatter(values, rows, s=14, color=HUMAN_COLOUR, alpha=0.2, marker="D", linewidths=0, zorder=2)
        ax.scatter(
            [1 - reference.per_category[c] for c in order], rows, s=60, color=HUMAN_COLOUR, marker="D",
            edgecolor="black", linewidths=0.5, zorder=4, label=reference.label + "; faint: each observer",
        )  # fmt: skip
        ax.axvline(1 - reference.overall, color=HUMAN_COLOUR, linewidth=1.6, zorder=1)
        for c in order:
            counts[c].append(reference.decisions[c])
    # a small vertical offset per model, so equal values (e.g. two models at 0) do not hide each other
    shifts = (np.arange(len(models)) - (len(models) - 1) / 2) * min(0.22, 0.5 / max(len(models), 1))
    conflicts: dict[str, int] = {}
    for index, (label, trials) in enumerate(models.items()):
        colour, marker = style((styles or style_indices(models)).get(label, index))
        result = _shape_bias_of(trials)
        ax.scatter(
            [1 - result.per_category[c].shape_bias for c in order], rows + shifts[index], s=46, color=colour,
            marker=marker, edgecolor="black", linewidths=0.4, zorder=3,
            label=f"{label} ({result.shape_bias:.1%} shape bias)",
        )  # fmt: skip
        ax.axvline(1 - result.shape_bias, color=colour, linewidth=1.4, linestyle="--", zorder=1)
        for c in order:
            counts[c].append(result.per_category[c].shape_hits + result.per_category[c].texture_hits)
            conflicts[c] = _stimuli(result, c)
    if not conflicts and reference is not None:
        first = next(iter(reference.observers.values()))
        conflicts = {c: _stimuli(first, c) for c in order}
    ax.set_yticks(rows, [f"{c} ({conflicts.get(c, 0)})" for c in order])
    ax.set_ylim(-0.5, len(order) - 0.5)
    ax.set_xlim(0, 1)
    ax.set_xticks(np.arange(0, 1.01, 0.1))
    ax.set_ylabel("shape category (conflict stimuli)")
    ax.set_xlabel("Fraction of 'texture' decisions")
    top = ax.secondary_xaxis("top", functions=(_complement, _complement))
    top.set_xticks(np.arange(0, 1.01, 0.1))
    top.set_xlabel("Fraction of 'shape' decisions")
    right = ax.secondary_yaxis("right")
    right.set_yticks(rows, [" | ".join(str(n) for n in counts[c]) for c in order], fontsize=7)
    who = (["humans"] if reference is not None else []) + list(models)
    right.set_ylabel("shape + texture decisions behind each point\n(" + " | ".join(who) + ")", fontsize=8)
    ax.set_title(title, fontsize=11, pad=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=1, frameon=False, fontsize=8.5,
              title="lines: overall values (shape + texture decisions pooled)", title_fontsize=8.5)  # fmt: skip
    add_sources(fig, sources, ["cue-conflict"])
    return fig


def _complement(x: Any) -> Any:
    """The top axis's fraction of 'shape' decisions from the bottom axis's fraction of 'texture' decisions."""
    return 1 - x


def _stimuli(result: ShapeBiasResult, category: str) -> int:
    """Conflict stimuli of ``category`` (every answer: shape, texture or other)."""
    row = result.per_category[category]
    return row.shape_hits + row.texture_hits + row.other


def plot_shape_bias_boxplot(
    models: Mapping[str, Sequence[Decision]],
    humans: HumanPanel | None,
    *,
    humans_mode: str = "pooled",
    sources: Sources | None = None,
    styles: Mapping[str, int] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Draw model-vs-human's box plot of the shape bias: per observer, the spread of its 16 per-category values.

    One box per observer (the humans first, as ``humans_mode`` says), with each category's shape bias as a dot;
    a category without shape or texture decisions has no value and is left out.

    Parameters
    ----------
    models
        Label -> that observer's cue-conflict trials.
    humans
        The human panel, or ``None`` for models alone.
    humans_mode
        ``"pooled"`` (all trials) or ``"mean"`` (the mean over observers).
    sources
        Label -> dataset -> the file its trials come from, for a footnote under the figure.
    styles
        Label -> index of its colour, to keep a model's look across figures.
    ax
        Axes to draw into; ``None``: a new figure 4.2 inches high, 1.1 inch per box wide.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_shape_bias_boxplot
    >>> resnet = read_trials(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> fig, ax = plt.subplots()
    >>> _ = plot_shape_bias_boxplot({"ResNet-50": resnet}, load_human_panel(REFERENCE, "cue-conflict"), ax=ax)
    >>> [tick.get_text() for tick in ax.get_xticklabels()], len(ax.collections[-1].get_offsets())
    (['humans (pooled)', 'ResNet-50'], 16)
    >>> plt.close(fig)
    """
    fig, ax = new_axes(ax, (max(4.0, 1.1 * (len(models) + 1) + 1.5), 4.2))
    data, labels, colours = [], [], []
    if humans is not None:
        reference = _human_shape_bias(humans, humans_mode)
        data.append([v for v in reference.per_category.values() if not math.isnan(v)])
        labels.append(f"humans\n({humans_mode})")
        colours.append(HUMAN_COLOUR)
    for index, (label, trials) in enumerate(models.items()):
        result = _shape_bias_of(trials)
        data.append([r.shape_bias for r in result.per_category.values() if not math.isnan(r.shape_bias)])
        labels.append(label)
        colours.append(style((styles or style_indices(models)).get(label, index))[0])
    boxes = ax.boxplot(data, patch_artist=True, showfliers=False, widths=0.6, medianprops={"color": "black"})
    for patch, colour in zip(boxes["boxes"], colours, strict=True):
        patch.set(facecolor=colour, alpha=0.55, edgecolor=colour)
    for i, values in enumerate(data, start=1):
        ax.scatter(np.full(len(values), i) + np.linspace(-0.12, 0.12, len(values)), values, s=9, color="black",
                   alpha=0.5, zorder=3)  # fmt: skip
    ax.set_xticks(np.arange(1, len(labels) + 1), [textwrap.fill(label, 16) for label in labels], fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("shape bias per category")
    ax.set_title("Shape bias of the 16 categories (box: quartiles; dots: categories)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    add_sources(fig, sources, ["cue-conflict"])
    return fig


def plot_paired_categories(result: PairedComparison, *, axes: Any = None) -> Figure:
    """Draw ``modelval compare``'s figure: per category the values of A and B, and A − B with its interval.

    Left: A and B per category (the overall values in the legend). Right: A − B per category with its paired
    bootstrap 95% interval, filled where the Holm-adjusted exact test gives p < 0.05, and that p at the right.
    The heading gives the overall difference, its interval and the permutation test: the figure's title of a
    new figure, the left panel's title in the caller's axes.

    Two panels side by side, so it takes ``axes`` (a pair), not ``ax``.

    Parameters
    ----------
    result
        The comparison, from :func:`modelval.compare` or :func:`~modelval.behaviour.paired.compare_paired`.
    axes
        Two axes (values, differences) of the caller's figure (the right panel's rows are aligned with the
        left's); ``None``: a new figure of 10 x 6.6 inches.

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
    >>> from modelval.behaviour.paired import compare_paired
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_paired_categories
    >>> a = read_trials(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> b = read_trials(REFERENCE / "style-transfer-512-nomask-experiment_vgg16_session-1.csv")
    >>> result = compare_paired(a, b, dataset="cue-conflict", names=("ResNet-50", "VGG-16"), n_bootstrap=0)
    >>> fig, axes = plt.subplots(1, 2, sharey=True)
    >>> _ = plot_paired_categories(result, axes=axes)
    >>> len(axes[0].get_yticklabels()), [text.get_text() for text in axes[0].get_legend().get_texts()]
    (16, ['ResNet-50 (22.1%)', 'VGG-16 (9.2%)'])
    >>> plt.close(fig)
    """
    categories = list(result.per_category)
    rows = np.arange(len(categories))
    own = axes is None
    if axes is None:
        fig, (left, right) = pyplot().subplots(1, 2, figsize=(10.0, 6.6), sharey=True)
    else:
        left, right = axes_for(axes, 2, "plot_paired_categories")[:2]
        fig = left.figure
    for index, key in enumerate(("a", "b")):
        colour, marker = style(index)
        values = [getattr(result.per_category[c], key) for c in categories]
        left.scatter(
            values,
            rows + (index - 0.5) * 0.24,
            s=42,
            color=colour,
            marker=marker,
            edgecolor="black",
            linewidths=0.4,
            label=f"{result.names[index]} ({[result.value_a, result.value_b][index]:.1%})",
        )
    left.set_yticks(rows, [f"{c} (n={result.per_category[c].images})" for c in categories])
    left.set_ylim(len(categories) - 0.5, -0.5)
    left.set_xlim(-0.02, 1.02)
    left.set_xlabel(result.statistic.replace("_", " "))
    left.grid(axis="x", alpha=0.3)
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False, fontsize=8.5)
    for i, category in enumerate(categories):
        row = result.per_category[category]
        low, high = row.ci95
        xerr = None if math.isnan(low) else [[row.difference - low], [high - row.difference]]
        significant = not math.isnan(row.p_holm) and row.p_holm < 0.05
        right.errorbar(row.difference, i, xerr=xerr, fmt="o", color="black" if significant else "grey", capsize=3,
                       markerfacecolor="black" if significant else "white")  # fmt: skip
        p_text = "n/a" if math.isnan(row.p_holm) else f"{row.p_holm:.2g}"
        right.annotate(f"Holm p {p_text}", (1.0, i), xycoords=("axes fraction", "data"), xytext=(4, 0),
                       textcoords="offset points", va="center", fontsize=7)  # fmt: skip
    right.axvline(0, color="black", linewidth=1)
    right.set_xlim(-1.02, 1.02)
    if not own:  # the caller's axes share no y axis: the rows of both panels must still line up
        right.set_ylim(left.get_ylim())
        right.set_yticks(rows, [])
    right.set_xlabel("A − B per category, paired bootstrap 95% CI\nfilled: Holm-adjusted exact test p < 0.05")
    right.grid(axis="x", alpha=0.3)
    low, high = result.ci95
    heading = (
        f"{result.dataset}: {result.statistic.replace('_', ' ')} A − B = {result.difference:+.1%} "
        f"[{low:+.1%}, {high:+.1%}] ({result.resampling} resampled), permutation p = {result.test.p:.2g}"
    )
    if own:
        fig.suptitle(heading, fontsize=10)
        fig.tight_layout()
    else:  # nothing over the caller's figure
        left.set_title(heading, loc="left", fontsize=9)
    return fig


def write_human_figures(
    models: Mapping[str, Mapping[str, Sequence[Decision]]],
    panels: Mapping[str, HumanPanel],
    comparisons: Mapping[str, Mapping[str, HumanComparison]],
    out_dir: str | Path,
    *,
    sources: Sources | None = None,
    humans_mode: str = "pooled",
    na_handling: str = "wrong",
) -> list[Path]:
    """Every figure for ``models[label][dataset] -> trials`` into ``out_dir`` (PNG and PDF each).

    shape-bias (matrix plot) and shape-bias-boxplot (cue-conflict), accuracy-by-dataset,
    error-consistency (datasets without conditions; those with conditions have model-vs-human's line plots,
    :mod:`modelval.figures.conditions`), human-likeness (accuracy difference, observed and error
    consistency; within each condition where there are conditions) and one error-consistency matrix of all
    observers per experiment.

    Parameters
    ----------
    models
        Label -> dataset -> that model's trials.
    panels
        Dataset -> its human observers.
    comparisons
        Label -> dataset -> the model's comparison with the humans.
    out_dir
        Where the figures go.
    sources
        Where the data came from, for the footnote.
    humans_mode
        "pooled" or "mean" (:func:`~modelval.figures.accuracy.human_accuracy`).
    na_handling
        How a "na" answer counts.
    """
    from modelval.behaviour.benchmark import score_humans, score_observer
    from modelval.behaviour.experiments import experiment
    from modelval.figures.accuracy import plot_accuracy_by_dataset
    from modelval.figures.consistency import (
        plot_error_consistency,
        plot_human_likeness,
        plot_kappa_matrix,
    )

    out = Path(out_dir)
    written: list[Path] = []
    conflicts = next((d for per in models.values() for d in per if experiment(d).has_conflicts), "")
    cue = {label: d[conflicts] for label, d in models.items() if conflicts in d}
    if cue:
        panel = panels.get(conflicts)
        styles = style_indices(models)  # the same colour in every figure
        figure = plot_shape_bias_figure(cue, panel, humans_mode=humans_mode, sources=sources, styles=styles)
        written += save(figure, out / "shape-bias.png", pdf=True, **REPORT_SAVE)
        figure = plot_shape_bias_boxplot(cue, panel, humans_mode=humans_mode, sources=sources, styles=styles)
        written += save(figure, out / "shape-bias-boxplot.png", pdf=True, **REPORT_SAVE)
    figure = plot_accuracy_by_dataset(models, panels, humans_mode=humans_mode, sources=sources, na_handling=na_handling)
    written += save(figure, out / "accuracy-by-dataset.png", pdf=True, **REPORT_SAVE)
    # On a dataset with conditions, kappa over the pooled trials also counts the accuracy differences between the
    # conditions; model-vs-human compares within each condition: those datasets get their own line plots
    # (condition_figures) and the benchmark's per-condition values in the human-likeness views.
    parametric = {d for d in panels if experiment(d).parametric}
    pooled = {label: {d: r for d, r in per.items() if d not in parametric} for label, per in comparisons.items()}
    if any(pooled.values()):
        figure = plot_error_consistency(pooled, sources=sources)
        written += save(figure, out / "error-consistency.png", pdf=True, **REPORT_SAVE)
    within = {
        label: {
            d: score_observer(trials, panels[d], na_handling=na_handling)
            for d, trials in per.items()
            if d in parametric
        }
        for label, per in models.items()
    }
    humans = {d: score_humans(panels[d], na_handling=na_handling) for d in parametric}
    figure = plot_human_likeness(
        comparisons, panels, na_handling=na_handling, sources=sources, per_condition=within, humans_per_condition=humans
    )
    written += save(figure, out / "human-likeness.png", pdf=True, **REPORT_SAVE)
    for dataset, panel in panels.items():
        observers = {**panel.observers, **{label: d[dataset] for label, d in models.items() if dataset in d}}
        matrix = kappa_matrix(observers, na_handling=na_handling)
        figure = plot_kappa_matrix(matrix, humans=list(panel.observers), dataset=dataset, sources=sources)
        written += save(figure, out / f"error-consistency-matrix-{dataset}.png", pdf=True, **REPORT_SAVE)
    return written
