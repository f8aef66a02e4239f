"""The per-category shape-bias figure, in model-vs-human's orientation."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from modelval.atomic import save_figure
from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.shape_bias import ShapeBiasResult


def _complement(x: ArrayLike) -> np.ndarray:
    """Fraction of 'shape' decisions on the secondary axis: 1 - fraction of 'texture' decisions."""
    return 1 - np.asarray(x)


def plot_per_category(
    results: dict[str, ShapeBiasResult],
    path: str | os.PathLike[str],
    *,
    title: str = "Shape bias per shape category",
    unmapped: Sequence[str] = (),
) -> Path:
    """Per-category shape bias in model-vs-human's orientation (``plot_shape_bias_matrixplot``).

    Categories run down the y axis, each with its number of conflict stimuli; the bottom x axis is the
    fraction of *texture* decisions and the top axis the fraction of *shape* decisions among shape+texture
    hits, as upstream. A vertical line marks each model's overall value.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 7))
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
    ax.set_title(title, pad=30)
    ax.legend(loc="lower right", fontsize=8, frameon=True)
    fig.tight_layout()
    try:
        return save_figure(fig, path, dpi=120)
    finally:
        plt.close(fig)

