"""What every figure shares: :func:`save`, and the human-comparison figures' colours, markers, dataset names
and sources.

Every ``plot_*`` function of :mod:`modelval.figures` draws into the caller's ``ax`` (or, for a figure of several
panels, ``axes``) when given, else into a new figure, and returns the matplotlib Figure; it never writes a file,
never closes the figure and never chooses a backend (that is process-wide, the caller's choice: without a display
matplotlib picks Agg by itself, and the command line sets ``MPLBACKEND=Agg``). In the caller's axes it leaves
the rest of the caller's figure alone: no figure title, figure legend or layout change (a figure's title or
legend moves into the panels), so several plots compose into one figure; only the sources footnote of the
human-comparison figures is figure text. :func:`save` writes a figure atomically and closes it. matplotlib is
imported inside the functions, so nothing else pays for it.

**Sources.** A label alone ("VGG-16") can stand for different published runs: texture-vs-shape keeps
one VGG-16 cue-conflict run in ``style-transfer-512-nomask-experiment-trained-CNNs/`` (shape bias
9.2%) and another in ``style-transfer-512-nomask-experiment/`` (the paper's main figure, 17.2%), and
its edge and silhouette runs in the main experiment folders. Figures therefore carry a footnote that
names, for every observer and experiment, the file its points come from.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.errors import InputValidationError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: How the report folders' human-comparison figures are written: ``save(fig, path, pdf=True, **REPORT_SAVE)``.
REPORT_SAVE: dict[str, Any] = {"dpi": 130, "bbox_inches": "tight"}
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
    """``(colour, marker)`` of the observer at ``index``.

    Parameters
    ----------
    index
        The observer's index (colours and markers cycle).
    """
    return MODEL_COLOURS[index % len(MODEL_COLOURS)], MODEL_MARKERS[index % len(MODEL_MARKERS)]


def style_indices(names: Iterable[str]) -> dict[str, int]:
    """Each observer's style index (:func:`style`), by name: the one assignment every figure uses.

    The names are sorted (case-folded), so an observer gets the same colour and marker in every figure drawn from
    the same observers, whatever order each figure lists them in; a figure that draws only some of them passes
    them all (a report's every observer), so a subset keeps its styles too.

    Parameters
    ----------
    names
        Every observer's name (duplicates count once).
    """
    return {name: index for index, name in enumerate(sorted(set(names), key=lambda n: (n.casefold(), n)))}


def observer_styles(names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """``name -> (colour, marker)`` of every observer, as :func:`style_indices` assigns them.

    Parameters
    ----------
    names
        Every observer's name (duplicates count once).
    """
    return {name: style(index) for name, index in style_indices(names).items()}


def new_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, Any]:
    """``(figure, axes)``: the given axes and its figure, or a new figure of ``figsize``.

    Parameters
    ----------
    ax
        The caller's axes, or ``None``.
    figsize
        The size of a new figure, in inches.
    """
    if ax is not None:
        return ax.figure, ax
    fig, ax = pyplot().subplots(figsize=figsize)
    return fig, ax


def axes_for(axes: Any, count: int, what: str) -> list[Any]:
    """The caller's ``axes`` of a figure of several panels, flattened, refused in one line when fewer than ``count``.

    Parameters
    ----------
    axes
        The caller's axes (an array or a list).
    count
        How many panels are drawn.
    what
        The plot's name, for the error.
    """
    flat = list(np.asarray(axes, dtype=object).flat)
    if len(flat) < count:
        raise InputValidationError(f"{what} draws {count} panel(s): axes= needs {count} Axes, got {len(flat)}")
    return flat


def save(
    fig: Figure,
    path: str | os.PathLike[str],
    *,
    pdf: bool = False,
    dpi: float | None = None,
    bbox_inches: str | None = None,
) -> list[Path]:
    """Write a figure to ``path`` atomically, in the format its suffix names, and close it.

    The file appears whole or not at all (:func:`modelval.atomic.save_figure`: a temporary file beside it,
    renamed into place), under exactly the name given; the suffix picks the format (``.png``, ``.pdf``,
    ``.svg``, any format matplotlib writes; a name without a suffix is written as PNG under that name). With
    ``pdf=True`` the figure is also written as the ``.pdf`` sibling of ``path``, what report folders get. The
    figure is closed afterwards (also when a write fails), so a loop of figures does not pile up in pyplot.

    Parameters
    ----------
    fig
        The matplotlib Figure, e.g. what a ``plot_*`` function returned.
    path
        The file to write; its suffix names the format.
    pdf
        Also write ``path`` with the suffix ``.pdf`` (nothing more when ``path`` is a PDF already).
    dpi
        Dots per inch of raster output (and of the raster parts of a PDF or SVG); ``None``: matplotlib's
        ``savefig.dpi`` (the figure's own dpi unless configured).
    bbox_inches
        ``"tight"`` crops the page to what is drawn (and keeps text outside the axes, such as a footnote);
        ``None``: the whole figure.

    Returns
    -------
    list of Path
        The files written: ``[path]``, or ``[path, its .pdf sibling]`` with ``pdf=True``.

    Raises
    ------
    DataError
        A suffix that names no format matplotlib writes (one line), or a file that cannot be written;
        nothing is left behind.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.figures import save
    >>> fig, ax = plt.subplots()
    >>> _ = ax.bar(["shape", "texture"], [0.22, 0.78])
    >>> written = save(fig, FOLDER / "bars.png", pdf=True, dpi=100)
    >>> [path.name for path in written], plt.fignum_exists(fig.number)
    (['bars.png', 'bars.pdf'], False)
    >>> sorted(path.name for path in FOLDER.iterdir())
    ['bars.pdf', 'bars.png']
    """
    from modelval.atomic import save_figure

    target = Path(path)
    options: dict[str, Any] = {}
    if dpi is not None:
        options["dpi"] = dpi
    if bbox_inches is not None:
        options["bbox_inches"] = bbox_inches
    try:
        written = [save_figure(fig, target, **options)]
        sibling = target.with_suffix(".pdf")
        if pdf and sibling != target:
            written.append(save_figure(fig, sibling, **options))
        return written
    finally:
        pyplot().close(fig)


def _sources_note(sources: Sources | None, datasets: list[str] | None = None) -> str:
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
    """Put the sources footnote under everything already drawn (call it last; ``bbox_inches="tight"`` keeps it when
    saving).

    Parameters
    ----------
    fig
        The figure.
    sources
        Where the data came from; ``None``: no footnote.
    datasets
        The datasets shown (default: all of ``sources``).
    """
    note = _sources_note(sources, datasets)
    if not note:
        return
    # below the lowest artist (a legend under the axes may reach below the figure's own area)
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    x, y = box.x0 / fig.get_figwidth(), box.y0 / fig.get_figheight()
    fig.text(x, y - 0.01, note, fontsize=6.5, va="top", ha="left", color="#333333")
