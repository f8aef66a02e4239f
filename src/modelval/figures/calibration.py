"""PNG plots for calibration: reliability diagram, smooth reliability diagram, confidence histogram, ECE vs T,
and the per-label reliability diagrams of multilabel scores.

The y-axis says what the bins measure (``ReliabilityBins.target``): "accuracy" for top-1 confidences,
"fraction of positives" for binary positive-class probabilities, whose x-axis is then the predicted
probability of the positive class.

Kept apart from :mod:`modelval.metrics.calibration` so the metrics import no matplotlib. These functions never
choose a matplotlib backend (that is process-wide, the caller's choice): without a display matplotlib picks
Agg by itself, and the ``modelval`` command line sets ``MPLBACKEND=Agg`` unless it is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelval.atomic import save_figure
from modelval.errors import InputValidationError
from modelval.metrics.calibration import ReliabilityBins
from modelval.metrics.estimators import SmoothReliabilityCurve


def figure_path(path: str | Path, default_name: str) -> Path:
    """Where a figure really goes: into ``path`` when it is a folder, with ``.png`` when no suffix is given.

    matplotlib itself appends ``.png`` to a suffix-less name, so the path a command reports would not
    be the file it wrote.
    """
    path = Path(path)
    if path.is_dir():
        path = path / default_name
    return path if path.suffix else path.with_suffix(".png")


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def _axis_labels(target: str) -> tuple[str, str]:
    """(x label, y label) for bins or curves of this target."""
    if target == "accuracy":
        return "confidence", "accuracy"
    return "predicted probability of the positive class", target


def _finite_bins(bins: ReliabilityBins) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # The torchmetrics convention's hidden bin [1, 1] has zero width; draw it as a thin bar at 1.0.
    lo = bins.edges[:, 0]
    width = np.maximum(bins.edges[:, 1] - lo, 0.01)
    lo = np.where(bins.edges[:, 1] - bins.edges[:, 0] > 0, lo, 1.0 - width)
    return lo, width, bins.counts, bins.counts > 0


def reliability_diagram(
    bins: ReliabilityBins,
    path: str | Path,
    *,
    title: str = "Reliability diagram",
    histogram: bool = True,
    ece_interval: Sequence[float] | None = None,
) -> Path:
    """Accuracy bars per bin with their Wilson 95% intervals, the gap to the mean confidence shaded,
    the diagonal, ECE/MCE annotated (with ``ece_interval``, the ECE's bootstrap interval too).
    Binary positive-class bins (``bins.target == "fraction of positives"``) draw the fraction of
    positives against the predicted probability, and say so on the axes.

    With ``histogram=True`` a second panel shows the share of examples per bin (the confidence
    histogram of Guo et al., Fig. 1, top row).
    """
    plt = _pyplot()
    path = Path(path)
    lo, width, counts, nonempty = _finite_bins(bins)
    if histogram:
        fig, (ax, hax) = plt.subplots(2, 1, figsize=(5, 7), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    else:
        fig, ax = plt.subplots(figsize=(5, 5))
        hax = None
    acc = np.where(nonempty, bins.accuracy, 0.0)
    conf = np.where(nonempty, bins.confidence, 0.0)
    xlabel, ylabel = _axis_labels(bins.target)
    ax.bar(lo, acc, width=width, align="edge", color="tab:blue", edgecolor="black", label=ylabel)
    bottom = np.minimum(acc, conf)
    ax.bar(
        lo[nonempty],
        np.abs(acc - conf)[nonempty],
        bottom=bottom[nonempty],
        width=width[nonempty],
        align="edge",
        color="tab:red",
        alpha=0.35,
        hatch="//",
        edgecolor="tab:red",
        label="gap",
    )
    low, high = bins.accuracy_interval()
    centres = lo + width / 2
    ax.errorbar(
        centres[nonempty],
        acc[nonempty],
        yerr=np.vstack([acc - low, high - acc])[:, nonempty],
        fmt="none",
        ecolor="black",
        elinewidth=1,
        capsize=2,
        label="95% Wilson interval",
    )
    ax.plot([0, 1], [0, 1], linestyle="--", color="gray", label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel(ylabel)
    # The numbers go in the title: a box inside the axes would hide the error bars of low-confidence bins.
    ece_text = f"ECE {bins.ece * 100:.2f}%"
    if ece_interval is not None:
        ece_text += f" [{ece_interval[0] * 100:.2f}, {ece_interval[1] * 100:.2f}]"
    ax.set_title(f"{title}\n{ece_text} · MCE {bins.mce * 100:.2f}% · N {bins.total}", fontsize="medium")
    ax.legend(loc="upper left", fontsize="small")
    if hax is not None:
        hax.bar(lo, counts / max(bins.total, 1), width=width, align="edge", color="tab:gray", edgecolor="black")
        hax.set_ylabel("share of examples")
        hax.set_xlabel(xlabel)
    else:
        ax.set_xlabel(xlabel)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def confidence_histogram(bins: ReliabilityBins, path: str | Path, *, title: str = "Confidence histogram") -> Path:
    """Share of examples per confidence bin, with mean accuracy and mean confidence as vertical lines."""
    plt = _pyplot()
    path = Path(path)
    lo, width, counts, nonempty = _finite_bins(bins)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(lo, counts / bins.total, width=width, align="edge", color="tab:blue", edgecolor="black")
    mean_acc = float(np.sum(bins.accuracy[nonempty] * counts[nonempty]) / bins.total)
    mean_conf = float(np.sum(bins.confidence[nonempty] * counts[nonempty]) / bins.total)
    ax.axvline(mean_acc, color="black", linestyle="--", label=f"accuracy {mean_acc:.3f}")
    ax.axvline(mean_conf, color="tab:red", linestyle=":", label=f"avg. confidence {mean_conf:.3f}")
    ax.set_xlim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share of examples")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def ece_vs_temperature(
    temperatures: Sequence[float], eces: Sequence[float], path: str | Path, *, fitted: float | None = None
) -> Path:
    """ECE (in %) against the temperature, optionally marking a fitted temperature."""
    if len(temperatures) != len(eces) or not temperatures:
        raise InputValidationError(
            f"need one ECE per temperature, got {len(temperatures)} temperatures and {len(eces)} ECE values"
        )
    plt = _pyplot()
    path = Path(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(list(temperatures), [e * 100 for e in eces], marker="o", color="purple")
    if fitted is not None:
        ax.axvline(fitted, color="gray", linestyle="--", label=f"fitted T = {fitted:.3f}")
        ax.legend()
    ax.set_xlabel("temperature T")
    ax.set_ylabel("ECE (%)")
    ax.set_title("ECE vs temperature")
    ax.grid(True)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def smooth_reliability_diagram(
    curve: SmoothReliabilityCurve,
    path: str | Path,
    *,
    title: str = "Smooth reliability diagram",
    target: str = "accuracy",
) -> Path:
    """The smooth reliability diagram of Blasiok & Nakkiran (2023), as ``relplot.rel_diagram`` draws it.

    The kernel-smoothed accuracy against the confidence, with a band whose thickness follows the
    density of the confidences (thin where few predictions lie, so the eye is not drawn to regions
    without data), the diagonal, and smooth ECE and the kernel width annotated. A second panel shows
    the density itself. ``target="fraction of positives"`` labels the axes for binary positive-class
    probabilities.
    """
    xlabel, ylabel = _axis_labels(target)
    plt = _pyplot()
    path = Path(path)
    fig, (ax, dax) = plt.subplots(2, 1, figsize=(5, 7), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    peak = float(curve.density.max()) or 1.0
    half = 0.02 * curve.density / peak  # band half-width: up to 0.02 accuracy units at the densest point
    ax.fill_between(
        curve.x, curve.accuracy - half, curve.accuracy + half, color="tab:red", alpha=0.6, linewidth=0,
        label=f"smoothed {ylabel} (width: density)",
    )  # fmt: skip
    ax.plot(curve.x, curve.accuracy, color="darkred", linewidth=1)
    ax.plot([0, 1], [0, 1], linestyle="--", color="gray", label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel(ylabel)
    ax.set_title(
        f"{title}\nsmooth ECE {curve.smooth_ece * 100:.2f}% · kernel width {curve.sigma:.3f}", fontsize="medium"
    )
    ax.legend(loc="upper left", fontsize="small")
    dax.fill_between(curve.x, 0, curve.density, color="tab:gray", alpha=0.7)
    dax.set_ylabel("density")
    dax.set_xlabel(xlabel)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def multilabel_reliability_diagram(
    label_bins: Sequence[ReliabilityBins],
    names: Sequence[str],
    path: str | Path,
    *,
    title: str = "Per-label reliability",
    summary: dict[str, Any] | None = None,
    columns: int = 4,
) -> Path:
    """One small reliability diagram per label (fraction of positives against the predicted probability).

    Each panel: the fraction of positives per bin with its Wilson 95% interval, the diagonal, and the
    label's name, ECE and number of positives in its title; ``summary`` (e.g. ``{"macro ECE": 0.05,
    "micro ECE": 0.04}``) goes into the figure title. Labels beyond 24 are left out, and the title says
    how many are shown.
    """
    if len(label_bins) != len(names) or not label_bins:
        raise InputValidationError(f"need one name per label's bins, got {len(label_bins)} bins and {len(names)} names")
    plt = _pyplot()
    path = Path(path)
    shown = min(len(label_bins), 24)
    cols = min(columns, shown)
    rows = -(-shown // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.2 * cols, 3.0 * rows + 0.8), sharex=True, sharey=True, squeeze=False
    )
    for k, ax in enumerate(axes.flat):
        if k >= shown:
            ax.axis("off")
            continue
        bins = label_bins[k]
        lo, width, _, nonempty = _finite_bins(bins)
        frac = np.where(nonempty, bins.accuracy, 0.0)
        ax.bar(lo, frac, width=width, align="edge", color="tab:blue", edgecolor="black", linewidth=0.5)
        low, high = bins.accuracy_interval()
        centres = lo + width / 2
        ax.errorbar(
            centres[nonempty],
            frac[nonempty],
            yerr=np.vstack([frac - low, high - frac])[:, nonempty],
            fmt="none",
            ecolor="black",
            elinewidth=0.8,
            capsize=1.5,
        )
        ax.plot([0, 1], [0, 1], linestyle="--", color="gray", linewidth=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        positives = int(bins.correct.sum())
        ax.set_title(f"{names[k]}: ECE {bins.ece * 100:.1f}%, {positives} pos.", fontsize="small")
        if k % cols == 0:
            ax.set_ylabel("fraction of positives")
        if k >= shown - cols:
            ax.set_xlabel("predicted probability")
    heading = title
    if summary:
        heading += "\n" + " · ".join(f"{name} {value * 100:.2f}%" for name, value in summary.items())
    if shown < len(label_bins):
        heading += f" (first {shown} of {len(label_bins)} labels)"
    fig.suptitle(heading, fontsize="medium")
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path
