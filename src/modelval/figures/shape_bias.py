"""The per-category shape-bias figure, in model-vs-human's orientation."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.shape_bias import ShapeBiasResult
from modelval.figures.style import new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from modelval.behaviour.answers import PromptSearchRow

#: The resolution the commands and the validation report write this figure at (``save(fig, path, dpi=DPI)``).
DPI = 120


def _complement(x: ArrayLike) -> np.ndarray:
    """Fraction of 'shape' decisions on the secondary axis: 1 - fraction of 'texture' decisions."""
    return 1 - np.asarray(x)


def plot_per_category(
    results: Mapping[str, ShapeBiasResult],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    unmapped: Sequence[str] = (),
) -> Figure:
    """Draw the shape bias per category of one or more results, in model-vs-human's orientation.

    As upstream's ``plot_shape_bias_matrixplot``: the categories run down the y axis, each with its number of
    conflict stimuli; the bottom x axis is the fraction of *texture* decisions and the top axis the fraction of
    *shape* decisions among shape + texture hits. A dashed vertical line marks each result's overall value.

    Parameters
    ----------
    results
        Label (the legend's text) -> shape bias, e.g. from
        :func:`~modelval.behaviour.shape_bias.compute_shape_bias`; the first gives the stimulus counts.
    ax
        Axes to draw into; ``None``: a new figure of 6.5 x 7 inches.
    title
        The title; default "Shape bias per shape category" followed by the label of a single result (the model).
    unmapped
        Categories the model's head cannot answer: no point is drawn for them (not 0), and their label says
        "unmapped".

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.decisions import read_decisions
    >>> from modelval.behaviour.shape_bias import compute_shape_bias
    >>> from modelval.figures import plot_per_category
    >>> decisions = read_decisions(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> result = compute_shape_bias(decisions, n_bootstrap=0)
    >>> fig, ax = plt.subplots()
    >>> _ = plot_per_category({"ResNet-50": result}, ax=ax)
    >>> len(ax.collections[0].get_offsets()), ax.get_yticklabels()[0].get_text()
    (16, 'airplane (75)')
    >>> plt.close(fig)
    """
    own = ax is None
    fig, ax = new_axes(ax, (6.5, 7))
    markers = "osD^v<>ph*"
    positions = range(len(CATEGORIES))
    for number, (label, result) in enumerate(results.items()):
        # an unmapped category has no shape bias (the head cannot answer it): no point, not 0
        values = [math.nan if c in unmapped else 1 - result.per_category[c].shape_bias for c in CATEGORIES]
        colour = f"C{number % 10}"
        ax.scatter(values, positions, marker=markers[number % len(markers)], color=colour, label=label, zorder=3)
        ax.axvline(1 - result.shape_bias, color=colour, linestyle="--", linewidth=1, alpha=0.8)
    # each category with its number of conflict stimuli (every answer: shape, texture or other)
    first = next(iter(results.values()), None)
    labels = [
        f"{c} ({first.per_category[c].shape_hits + first.per_category[c].texture_hits + first.per_category[c].other})"
        if first is not None
        else c
        for c in CATEGORIES
    ]
    labels = [f"{label}, unmapped" if c in unmapped else label for c, label in zip(CATEGORIES, labels, strict=True)]
    ax.set_yticks(list(positions), labels)
    ax.invert_yaxis()
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("fraction of 'texture' decisions")
    top = ax.secondary_xaxis("top", functions=(_complement, _complement))
    top.set_xlabel("fraction of 'shape' decisions")
    ax.grid(axis="x", alpha=0.3)
    if title is None:
        names = list(results)
        title = "Shape bias per shape category" + (f"\n{names[0]}" if len(names) == 1 else "")
    ax.set_title(title, pad=30)
    # below the axes, never over a point (inside, at "lower right", it covered truck, the last category)
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.09), fontsize=8, frameon=False, ncol=min(2, max(1, len(results)))
    )
    if own:
        fig.tight_layout()
    return fig


def plot_prompt_search(
    rows: Sequence[PromptSearchRow],
    *,
    ax: Axes | None = None,
    title: str = "Prompts: cue-conflict accuracy against shape bias",
    measured: Mapping[str, tuple[float, float]] | None = None,
) -> Figure:
    """Accuracy against shape bias, one point per prompt, one colour per model (Gavrikov et al.'s prompt search).

    Parameters
    ----------
    rows
        The published table's rows (:func:`modelval.prompt_search`) or any rows with ``model``, ``accuracy`` and
        ``shape_bias``.
    ax
        Axes to draw into; ``None``: a new figure of 6.5 x 5 inches.
    title
        The title.
    measured
        Prompt name -> ``(shape bias, accuracy)`` of your own run (a prompt sweep), drawn as labelled crosses.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    Two prompts of a published search and one prompt of your own sweep:

    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.answers import PromptSearchRow
    >>> from modelval.figures import plot_prompt_search
    >>> rows = [PromptSearchRow("internvl", "Describe the shape.", 0.384, 0.822),
    ...         PromptSearchRow("internvl", "Describe the image.", 0.756, 0.732)]
    >>> fig, ax = plt.subplots()
    >>> _ = plot_prompt_search(rows, measured={"mine": (0.6, 0.8)}, ax=ax)
    >>> [len(points.get_offsets()) for points in ax.collections]
    [2, 1]
    >>> plt.close(fig)
    """
    fig, ax = new_axes(ax, (6.5, 5.0))
    models = sorted({row.model for row in rows})
    for model in models:
        mine = [row for row in rows if row.model == model]
        ax.scatter([r.shape_bias for r in mine], [r.accuracy for r in mine], s=14, alpha=0.6, label=model)
    for name, (bias, accuracy) in (measured or {}).items():
        ax.scatter([bias], [accuracy], marker="x", s=60, color="black")
        ax.annotate(name, (bias, accuracy), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("shape bias (shape hits / (shape + texture hits))")
    ax.set_ylabel("cue-conflict accuracy ((shape + texture hits) / conflict stimuli)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(title)
    return fig
