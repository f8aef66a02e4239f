"""The protocol-sensitivity card as a figure: each variant's paired change of the shape bias."""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

import numpy as np

from modelval.behaviour.sensitivity import FACTORS, REFERENCE, SensitivityCard, format_p
from modelval.figures.style import new_axes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The resolution ``modelval sensitivity --out`` writes the card at (``save(fig, path, dpi=DPI)``).
DPI = 120


def plot_sensitivity_card(card: SensitivityCard, *, ax: Axes | None = None) -> Figure:
    """Draw the protocol-sensitivity card: each variant's paired change of the shape bias, with its interval and p.

    One row per protocol variant (a factor of the evaluation protocol changed from the baseline): the paired
    change of the shape bias in percentage points with its paired-bootstrap 95% interval, coloured by factor,
    and the paired permutation test's p at the right. Rows whose decisions equal an earlier row's are left out
    and named in a note (under the figure, or in the x label when drawn into the caller's ``ax``). The title
    names the model, its reference shape bias and the factors' ranking.

    Parameters
    ----------
    card
        The card, from :func:`modelval.sensitivity` (``api.protocol``).
    ax
        Axes to draw into; ``None``: a new figure, 8.4 inches wide and 0.5 inch per row.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import modelval
    >>> from modelval.figures import plot_sensitivity_card
    >>> card = modelval.sensitivity("efficientnet_lite0", data_root=SUBSET, allow_modified_stimuli=True,
    ...                             bootstrap=50, permutations=50)
    >>> fig, ax = plt.subplots()
    >>> _ = plot_sensitivity_card(card, ax=ax)
    >>> len(ax.get_yticklabels()), len(card.variants)  # a row equal to an earlier row is named, not drawn
    (5, 12)
    >>> ax.get_title().splitlines()[0]
    'efficientnet_lite0: protocol sensitivity (reference 16.7%)'
    >>> plt.close(fig)
    """
    rows = [row for row in card.variants if row.is_effect]
    same = [row for row in card.variants if not row.is_effect]
    colours = {factor: f"C{i}" for i, factor in enumerate(FACTORS)}
    own = ax is None
    fig, ax = new_axes(ax, (8.4, 0.5 * len(rows) + 2.4))
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
    xlabel = (
        "paired change of shape bias, variant − baseline (percentage points)\n"
        f"bars: paired bootstrap 95% CI ({card.resampling} resampled); p: paired permutation test"
    )
    note = "not shown, equal to an earlier row: " + ", ".join(f"{row.variant.label} (= {row.same_as})" for row in same)
    if own or not same:
        ax.set_xlabel(xlabel)
    else:  # in the caller's axes the note is part of the x label, not text over their figure
        ax.set_xlabel(xlabel + "\n" + textwrap.fill(note, 100), fontsize=9)
    ax.set_title(
        f"{card.model}: protocol sensitivity (reference {reference.shape_bias:.1%})\nranking: {card.ranking_text()}",
        fontsize=10,
    )
    ax.grid(axis="x", alpha=0.3)
    if own:  # the caller's figure keeps its own layout
        if same:
            fig.text(0.01, 0.005, note, fontsize=7, wrap=True, va="bottom")
        fig.tight_layout(rect=(0, 0.06 if same else 0, 0.93, 1))
    return fig
