"""The benchmark table's figures: each observer's ranks with their intervals, and a measure against its scale."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.figures.style import HUMAN_COLOUR, REPORT_SAVE, new_axes, observer_styles, pyplot, save

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_benchmark_ranks(table: Any, *, ax: Axes | None = None) -> Figure:
    """Draw each observer's rank in each measure of the benchmark table with its 95% rank interval.

    One column per measure (OOD accuracy, accuracy difference, observed and error consistency) and the mean
    rank; per observer its rank (marker) and the 2.5 and 97.5 percentiles of its ranks over the bootstrap
    resamples (bar). Overlapping bars: the data do not order those observers in that measure.

    Parameters
    ----------
    table
        A :class:`~modelval.behaviour.benchmark.BenchmarkTable` with its ``uncertainty`` (``n_bootstrap`` > 0).
    ax
        Axes to draw into; ``None``: a new figure of 8 x 4 inches (the legend right of the axes).

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.benchmark import benchmark_table
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_benchmark_ranks
    >>> files = {"ResNet-50": "style-transfer-512-nomask-experiment_resnet50_session-1.csv",
    ...          "VGG-16": "style-transfer-512-nomask-experiment_vgg16_session-1.csv"}
    >>> observers = {label: {"cue-conflict": read_trials(REFERENCE / name)} for label, name in files.items()}
    >>> table = benchmark_table(observers, {"cue-conflict": load_human_panel(REFERENCE, "cue-conflict")},
    ...                         n_bootstrap=100)
    >>> fig, ax = plt.subplots()
    >>> _ = plot_benchmark_ranks(table, ax=ax)
    >>> [tick.get_text() for tick in ax.get_xticklabels()][-1], ax.get_ylabel()
    ('mean rank', 'rank (1 = best)')
    >>> plt.close(fig)
    """
    from modelval.behaviour.benchmark import METRICS

    band = table.uncertainty
    if band is None or not band.rank_intervals:
        from modelval.errors import InputValidationError

        raise InputValidationError("the rank figure needs the table's rank intervals: build it with n_bootstrap > 0")
    fig, ax = new_axes(ax, (8.0, 4.0))
    ranks = table.ranks()
    columns = [*METRICS, "mean_rank"]
    labels = list(band.rank_intervals)
    styles = observer_styles(table.observers)  # by name: as in the table's other figures
    width = 0.7 / max(len(labels), 1)
    for index, label in enumerate(labels):
        colour, marker = styles[label]
        x = np.arange(len(columns)) - 0.35 + width * (index + 0.5)
        y = [ranks[label][m] for m in columns]
        low = [y[k] - band.rank_intervals[label][m][0] for k, m in enumerate(columns)]
        high = [band.rank_intervals[label][m][1] - y[k] for k, m in enumerate(columns)]
        ax.errorbar(x, y, yerr=[low, high], fmt=marker, color=colour, capsize=3, label=label)
    ax.set_xticks(np.arange(len(columns)), [m.replace("_", " ") for m in columns], rotation=20, ha="right")
    ax.set_ylabel("rank (1 = best)")
    ax.set_ylim(len(labels) + 0.5, 0.5)
    ax.set_yticks(range(1, len(labels) + 1))
    ax.set_title(f"Ranks with 95% intervals ({band.n_bootstrap} bootstrap resamples)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


#: Where Lonnqvist et al. (ICML 2025) find models' error consistency near the humans': about 5 B training images.
LONNQVIST_IMAGES = 5e9
#: Axis labels of :func:`plot_benchmark_scale`.
SCALE_LABELS = {"parameters": "parameters", "training_images": "training images (pre-training set)"}
MEASURE_LABELS = {
    "ood_accuracy": "OOD accuracy",
    "accuracy_difference": "accuracy difference",
    "observed_consistency": "observed consistency",
    "error_consistency": "error consistency (kappa)",
}


def plot_benchmark_scale(
    table: Any, *, measure: str = "error_consistency", scale: str = "training_images", ax: Axes | None = None
) -> Figure:
    """Draw one benchmark measure against the observers' scale (parameters or training images, log axis).

    One point per complete observer whose metadata gives the scale (its aggregate over the table's
    datasets, with its 95% bootstrap interval when the table has one); the humans' value (every pair of
    observers) as a dashed line with its interval as a band. Lonnqvist et al. (ICML 2025) find models near
    the humans only at about 5 billion training images: on the training-images axis a dotted line marks it.

    Parameters
    ----------
    table
        A :class:`~modelval.behaviour.benchmark.BenchmarkTable` with ``metadata``
        (:func:`modelval.api.benchmark.benchmark` fills it; ``benchmark_table(..., metadata=...)``).
    measure
        ``"ood_accuracy"``, ``"accuracy_difference"``, ``"observed_consistency"`` or ``"error_consistency"``.
    scale
        ``"training_images"`` or ``"parameters"``.
    ax
        Axes to draw into; ``None``: a new figure of 5 x 4 inches.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed (:func:`modelval.figures.save`).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.behaviour.benchmark import ModelMetadata, benchmark_table
    >>> from modelval.behaviour.humans import load_human_panel
    >>> from modelval.behaviour.trials import read_trials
    >>> from modelval.figures import plot_benchmark_scale
    >>> trials = read_trials(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> table = benchmark_table({"ResNet-50": {"cue-conflict": trials}},
    ...                         {"cue-conflict": load_human_panel(REFERENCE, "cue-conflict")},
    ...                         metadata={"ResNet-50": ModelMetadata(25_557_032, 1_281_167, "ImageNet-1k")})
    >>> fig, ax = plt.subplots()
    >>> _ = plot_benchmark_scale(table, ax=ax)
    >>> ax.get_xscale(), ax.get_xlabel()
    ('log', 'training images (pre-training set)')
    >>> plt.close(fig)
    """
    from modelval.behaviour.benchmark import METRICS, SCALES
    from modelval.errors import InputValidationError

    if measure not in METRICS:
        raise InputValidationError(f"measure is one of {', '.join(METRICS)}, got {measure!r}")
    if scale not in SCALES:
        raise InputValidationError(f"scale is one of {', '.join(SCALES)}, got {scale!r}")
    points = [
        (label, found.value(scale), table.aggregate(label)[measure])
        for label, found in table.metadata.items()
        if found.value(scale) and table.complete(label)
    ]
    if not points:
        raise InputValidationError(f"no observer of the table has its {scale.replace('_', ' ')} in its metadata")
    band = table.uncertainty
    fig, ax = new_axes(ax, (5.0, 4.0))
    styles = observer_styles(table.observers)  # by name: as in the table's other figures
    for (label, _x, y), shown in zip(points, _dodged([x for _, x, _ in points]), strict=True):
        colour, marker = styles[label]
        found = band.intervals.get(label, {}).get("aggregate", {}).get(measure) if band else None
        yerr = [[y - found[0]], [found[1] - y]] if found else None
        ax.errorbar([shown], [y], yerr=yerr, fmt=marker, color=colour, capsize=3, label=label)
    human = table.human_aggregate()[measure]
    ax.axhline(human, color=HUMAN_COLOUR, linestyle="--", linewidth=1, label="humans (every pair)")
    found = band.intervals.get("humans", {}).get("aggregate", {}).get(measure) if band else None
    if found:
        ax.axhspan(found[0], found[1], color=HUMAN_COLOUR, alpha=0.12, linewidth=0)
    ax.set_xscale("log")
    xs = [x for _, x, _ in points]
    if scale == "training_images":
        xs.append(LONNQVIST_IMAGES)
        ax.axvline(LONNQVIST_IMAGES, color="grey", linestyle=":", linewidth=1, label="~5 B images (Lonnqvist et al.)")
    ax.set_xlim(min(xs) / 4, max(xs) * 4)
    shared = len({x for _, x, _ in points}) < len(points)
    ax.set_xlabel(SCALE_LABELS[scale] + ("\n(observers at the same scale spread sideways)" if shared else ""))
    ax.set_ylabel(MEASURE_LABELS[measure])
    ax.set_title(f"{MEASURE_LABELS[measure]} against {SCALE_LABELS[scale].split(' (')[0]}", fontsize=10)
    ax.legend(fontsize=7, loc="best", frameon=False)
    return fig


def write_scale_figure(table: Any, folder: str | Path) -> list[Path]:
    """``benchmark-scale.png`` (and PDF): OOD accuracy and error consistency against training images and, beside
    them, against parameters, for the scales some observer's metadata gives; nothing when none does.

    Parameters
    ----------
    table
        A :class:`~modelval.behaviour.benchmark.BenchmarkTable`.
    folder
        Where the figure goes.
    """
    scales = [s for s in ("training_images", "parameters") if any(m.value(s) for m in table.metadata.values())]
    shown = [label for label in table.metadata if table.complete(label)]
    if not scales or not shown:
        return []
    if len(shown) == 1:  # one point per panel shows no trend: one model's values beside the humans', its scale named
        fig, axes = pyplot().subplots(1, 2, figsize=(7.0, 3.6))
        for ax, measure in zip(axes, ("ood_accuracy", "error_consistency"), strict=True):
            _one_observer(table, shown[0], measure, ax)
        fig.suptitle("one model beside the humans (one point shows no trend with scale)", fontsize=10)
    else:
        fig, axes = pyplot().subplots(len(scales), 2, figsize=(10.0, 4.0 * len(scales)), squeeze=False)
        for row, scale in enumerate(scales):
            for column, measure in enumerate(("ood_accuracy", "error_consistency")):
                plot_benchmark_scale(table, measure=measure, scale=scale, ax=axes[row][column])
    fig.tight_layout()
    return save(fig, Path(folder) / "benchmark-scale.png", pdf=True, **REPORT_SAVE)


def _dodged(xs: list[float]) -> list[float]:
    """Positions on a log axis: observers at the same scale 0.15 decades apart (at most 0.6 in all), centred on it,
    so none hides another (the scale is exact only for a lone observer; the x label says so)."""
    shown = []
    for index, x in enumerate(xs):
        same = [i for i, other in enumerate(xs) if other == x]
        rank = same.index(index)
        step = min(0.15, 0.6 / max(len(same) - 1, 1))
        shown.append(x * 10 ** ((rank - (len(same) - 1) / 2) * step) if len(same) > 1 else x)
    return shown


def _one_observer(table: Any, label: str, measure: str, ax: Any) -> None:
    """One observer's aggregate with its interval beside the humans' band; its scale in the tick label."""
    from modelval.behaviour.benchmark_text import _count

    colour, marker = observer_styles(table.observers)[label]
    value = table.aggregate(label)[measure]
    band = table.uncertainty
    found = band.intervals.get(label, {}).get("aggregate", {}).get(measure) if band else None
    yerr = [[value - found[0]], [found[1] - value]] if found else None
    ax.errorbar([0], [value], yerr=yerr, fmt=marker, color=colour, capsize=4, markersize=8, label=label)
    human = table.human_aggregate()[measure]
    ax.axhline(human, color=HUMAN_COLOUR, linestyle="--", linewidth=1, label="humans (every pair)")
    found = band.intervals.get("humans", {}).get("aggregate", {}).get(measure) if band else None
    if found:
        ax.axhspan(found[0], found[1], color=HUMAN_COLOUR, alpha=0.12, linewidth=0)
    meta = table.metadata[label]
    scale = ", ".join(
        f"{_count(meta.value(name))} {text}"
        for name, text in (("training_images", "training images"), ("parameters", "parameters"))
        if meta.value(name)
    )
    ax.set_xticks([0], [f"{label}\n{scale}"], fontsize=8)
    ax.set_xlim(-1, 1)
    ax.set_ylabel(MEASURE_LABELS[measure])
    ax.set_title(MEASURE_LABELS[measure], fontsize=9)
    ax.legend(fontsize=7, loc="best", frameon=False)
