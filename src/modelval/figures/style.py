"""What the human-comparison figures share: colours and markers, dataset names, sources, saving.

Every figure function takes ``ax=None`` (or draws its own axes) and returns the matplotlib Figure;
:func:`save_figure` writes it as PNG and PDF. matplotlib is imported inside the functions and no
backend is chosen here (the command line sets ``MPLBACKEND=Agg``), so nothing else pays for it.

**Sources.** A label alone ("VGG-16") can stand for different published runs: texture-vs-shape keeps
one VGG-16 cue-conflict run in ``style-transfer-512-nomask-experiment-trained-CNNs/`` (shape bias
9.2%) and another in ``style-transfer-512-nomask-experiment/`` (the paper's main figure, 17.2%), and
its edge and silhouette runs in the main experiment folders. Figures therefore carry a footnote that
names, for every observer and experiment, the file its points come from.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HUMAN_COLOUR = "#c0392b"
MODEL_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f")
MODEL_MARKERS = ("o", "s", "^", "v", "P", "X", "<", ">")
DATASET_LABELS = {
    "cue-conflict": "cue-conflict\n(shape = correct)",
    "edges": "edges",
    "filled-silhouettes": "filled\nsilhouettes",
    # model-vs-human's further datasets (NeurIPS 2021)
    "colour": "colour",
    "contrast": "contrast",
    "high-pass": "high-pass",
    "low-pass": "low-pass",
    "phase-scrambling": "phase\nscrambling",
    "power-equalisation": "power\nequalisation",
    "false-colour": "false\ncolour",
    "rotation": "rotation",
    "eidolonI": "eidolon I",
    "eidolonII": "eidolon II",
    "eidolonIII": "eidolon III",
    "uniform-noise": "uniform\nnoise",
    "sketch": "sketch",
    "stylized": "stylized",
}
#: How the human observers are drawn: all their trials pooled (model-vs-human), or the mean over observers.
HUMAN_MODES = ("pooled", "mean")

#: observer label -> dataset -> where its decisions come from (a published path or a file name)
Sources = Mapping[str, Mapping[str, str]]


def pyplot() -> Any:
    import matplotlib.pyplot as plt

    return plt


def style(index: int) -> tuple[str, str]:
    return MODEL_COLOURS[index % len(MODEL_COLOURS)], MODEL_MARKERS[index % len(MODEL_MARKERS)]


def new_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, Any]:
    """``(figure, axes)``: the given axes and its figure, or a new figure of ``figsize``."""
    if ax is not None:
        return ax.figure, ax
    fig, ax = pyplot().subplots(figsize=figsize)
    return fig, ax


def save_figure(fig: Any, path: str | Path) -> list[Path]:
    """Write ``fig`` as ``path`` (PNG) and its ``.pdf`` sibling, close it, and return both paths."""
    from modelval.atomic import save_figure as save_atomically

    path = Path(path)
    png, pdf = path.with_suffix(".png"), path.with_suffix(".pdf")
    try:
        return [save_atomically(fig, png, dpi=130, bbox_inches="tight"), save_atomically(fig, pdf, bbox_inches="tight")]
    finally:
        pyplot().close(fig)


def sources_note(sources: Sources | None, datasets: list[str] | None = None) -> str:
    """The footnote naming each observer's file per experiment (empty without sources)."""
    if not sources:
        return ""
    lines = []
    for label, per_dataset in sources.items():
        parts = [
            f"{dataset}: {where}" for dataset, where in per_dataset.items() if datasets is None or dataset in datasets
        ]
        if parts:
            lines.append(f"{label} — " + "; ".join(parts))
    if not lines:
        return ""
    wrapped = [textwrap.fill(line, width=120, subsequent_indent="    ") for line in lines]
    return "Sources: " + "\n".join(wrapped)


def add_sources(fig: Any, sources: Sources | None, datasets: list[str] | None = None) -> None:
    """Put the sources footnote under everything already drawn (call it last; ``bbox_inches="tight"``
    keeps it when saving)."""
    note = sources_note(sources, datasets)
    if not note:
        return
    # below the lowest artist (a legend under the axes may reach below the figure's own area)
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    x, y = box.x0 / fig.get_figwidth(), box.y0 / fig.get_figheight()
    fig.text(x, y - 0.01, note, fontsize=6.5, va="top", ha="left", color="#333333")
