"""The protocol-sensitivity card as a figure: each variant's paired change of the shape bias."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from modelval.atomic import save_figure
from modelval.behaviour.sensitivity import FACTORS, REFERENCE, SensitivityCard, format_p


def plot_card(card: SensitivityCard, path: Any = None, *, ax: Any = None) -> Any:
    """Paired Δ per variant with its 95% interval and p; rows equal to an earlier row are left out (and
    named in the footnote). Returns the Figure; with ``path`` it is also written (PNG or PDF by suffix)."""
    import matplotlib.pyplot as plt

    rows = [row for row in card.variants if row.is_effect]
    same = [row for row in card.variants if not row.is_effect]
    colours = {factor: f"C{i}" for i, factor in enumerate(FACTORS)}
    if ax is None:
        fig, ax = plt.subplots(figsize=(8.4, 0.5 * len(rows) + 2.4))
    else:
        fig = ax.figure
    for i, row in enumerate(rows):
        delta = row.delta * 100
        low, high = (v * 100 for v in row.delta_ci95)
        xerr = None if math.isnan(low) else [[delta - low], [high - delta]]
        ax.errorbar(delta, i, xerr=xerr, fmt="o", color=colours[row.variant.factor], capsize=3)
        ax.annotate(f"p = {format_p(row.p)}", (1.0, i), xycoords=("axes fraction", "data"), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)  # fmt: skip
    ax.axvline(0, color="black", linewidth=1)
    labels = [
        row.variant.label + ("" if row.variant.baseline == REFERENCE else f"\nvs {row.variant.baseline}")
        for row in rows
    ]
    ax.set_yticks(np.arange(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    reference = card.reference.result
    ax.set_xlabel(
        "paired change of shape bias, variant − baseline (percentage points)\n"
        f"bars: paired bootstrap 95% CI ({card.resampling} resampled); p: paired permutation test"
    )
    ax.set_title(
        f"{card.model}: protocol sensitivity (reference {reference.shape_bias:.1%})\nranking: {card.ranking_text()}",
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)
    if same:
        names = ", ".join(f"{row.variant.label} (= {row.same_as})" for row in same)
        fig.text(0.01, 0.005, "not shown, equal to an earlier row: " + names, fontsize=7, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.06 if same else 0, 0.93, 1))
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig

