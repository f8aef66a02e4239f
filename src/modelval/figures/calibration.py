"""Calibration figures: the reliability diagram, the smooth reliability diagram, the confidence histogram, ECE
against the temperature, and the per-label reliability diagrams of multilabel scores.

The y-axis says what the bins measure (``ReliabilityBins.target``): "accuracy" for top-1 confidences,
"fraction of positives" for binary positive-class probabilities, whose x-axis is then the predicted
probability of the positive class.

Kept apart from :mod:`modelval.metrics.calibration` so the metrics import no matplotlib. Each ``plot_*``
draws into the caller's axes when given, else into a new figure, and returns the Figure; none writes a file
or chooses a backend. :func:`modelval.figures.save` writes one (the commands use ``dpi=DPI``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.errors import InputValidationError
from modelval.figures.style import axes_for, new_axes, pyplot
from modelval.metrics.calibration import ReliabilityBins
from modelval.metrics.estimators import SmoothReliabilityCurve

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: The resolution the commands write the calibration figures at (``save(fig, path, dpi=DPI)``).
DPI = 100


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


def _wilson_bars(
    ax: Any, bins: ReliabilityBins, values: np.ndarray, centres: np.ndarray, nonempty: np.ndarray, **kwargs: Any
) -> None:
    """The 95% Wilson interval of each non-empty bin's accuracy, as error bars."""
    low, high = bins.accuracy_interval()
    yerr = np.vstack([values - low, high - values])[:, nonempty]
    ax.errorbar(centres[nonempty], values[nonempty], yerr=yerr, fmt="none", ecolor="black", **kwargs)


def _panel_pair(
    what: str, ax: Axes | None, second_ax: Axes | None, second: bool | None, second_name: str
) -> tuple[Figure, Any, Any, bool]:
    """``(figure, main axes, second panel's axes or None, whether the figure is new)`` of a diagram with an
    optional panel below it: a new figure of one or two panels, or the caller's ``ax`` (and ``<second>_ax``)."""
    flag, axes_name = second_name, f"{second_name}_ax"
    if ax is None:
        if second_ax is not None:
            raise InputValidationError(f"{what}: {axes_name}= goes with ax= (the diagram's own axes)")
        if second is False:
            fig, main = pyplot().subplots(figsize=(5, 5))
            return fig, main, None, True
        fig, (main, lower) = pyplot().subplots(2, 1, figsize=(5, 7), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
        return fig, main, lower, True
    if second is True and second_ax is None:
        raise InputValidationError(
            f"{what}: {flag}=True with ax= needs {axes_name}= for that panel "
            f"(or leave {flag} out for the diagram alone)"
        )
    if second is False and second_ax is not None:
        raise InputValidationError(f"{what}: {axes_name}= given but {flag}=False")
    return ax.figure, ax, second_ax, False  # type: ignore[return-value]  # a SubFigure's axes draw the same way


def plot_reliability(
    bins: ReliabilityBins,
    *,
    ax: Axes | None = None,
    histogram: bool | None = None,
    histogram_ax: Axes | None = None,
    title: str = "Reliability diagram",
    ece_interval: Sequence[float] | None = None,
) -> Figure:
    """Draw the reliability diagram of binned confidences, with the share of examples per bin below it.

    Accuracy bars per bin with their Wilson 95% intervals, the gap to the mean confidence shaded, the
    diagonal, and ECE/MCE and the number of examples in the title (with ``ece_interval``, the ECE's
    bootstrap interval too). Binary positive-class bins (``bins.target == "fraction of positives"``) draw
    the fraction of positives against the predicted probability, and say so on the axes. The panel below
    is the confidence histogram of Guo et al. (2017, Fig. 1, top row): the share of examples per bin.

    Parameters
    ----------
    bins
        The bins, from :func:`~modelval.metrics.calibration.reliability_bins` or
        :func:`~modelval.metrics.binary.binary_reliability_bins`.
    ax
        Axes to draw the diagram into (a panel of the caller's figure); ``None``: a new figure, 5 x 7 inches
        with the histogram panel, 5 x 5 without.
    histogram
        Draw the share-of-examples panel. ``None`` (default): below the diagram in a new figure; with ``ax``,
        only when ``histogram_ax`` is given. ``True`` with ``ax`` needs ``histogram_ax``.
    histogram_ax
        Axes for the share-of-examples panel, next to ``ax``.
    title
        The first line of the title (the numbers follow on the second).
    ece_interval
        ``(low, high)`` of the ECE, shown after it.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn into: ``ax.figure`` when ``ax`` is given, else a new one. It is neither saved nor
        closed (:func:`modelval.figures.save` does both).

    Raises
    ------
    InputValidationError
        ``histogram=True`` with ``ax`` but without ``histogram_ax``, ``histogram_ax`` without ``ax``, or
        ``histogram_ax`` with ``histogram=False``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.figures import plot_reliability
    >>> from modelval.metrics.calibration import reliability_bins
    >>> bins = reliability_bins([0.3, 0.55, 0.6, 0.8, 0.9, 0.95], [0, 1, 0, 1, 1, 1], 5)
    >>> fig, ax = plt.subplots()
    >>> plot_reliability(bins, ax=ax, title="toy") is fig
    True
    >>> len(ax.patches), ax.get_title().splitlines()[1]  # 5 accuracy bars + 4 gaps of the non-empty bins
    (9, 'ECE 13.33% · MCE 30.00% · N 6')
    >>> plt.close(fig)
    """
    fig, ax, hax, own = _panel_pair("plot_reliability", ax, histogram_ax, histogram, "histogram")
    lo, width, counts, nonempty = _finite_bins(bins)
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
    _wilson_bars(ax, bins, acc, lo + width / 2, nonempty, elinewidth=1, capsize=2, label="95% Wilson interval")
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
        hax.set_xlim(0, 1)
        hax.set_ylabel("share of examples")
        hax.set_xlabel(xlabel)
    if hax is None or not own:  # the caller's panels may not share the x axis: each gets its label
        ax.set_xlabel(xlabel)
    if own:
        fig.tight_layout()
    return fig


def plot_confidence_histogram(
    bins: ReliabilityBins, *, ax: Axes | None = None, title: str = "Confidence histogram"
) -> Figure:
    """Draw the share of examples per confidence bin, with the mean accuracy and mean confidence as lines.

    The gap between the two vertical lines is the overall over- or under-confidence (Guo et al. 2017, Fig. 1).

    Parameters
    ----------
    bins
        The bins, from :func:`~modelval.metrics.calibration.reliability_bins`.
    ax
        Axes to draw into; ``None``: a new figure of 5 x 3.5 inches.
    title
        The title.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.figures import plot_confidence_histogram
    >>> from modelval.metrics.calibration import reliability_bins
    >>> bins = reliability_bins([0.3, 0.55, 0.6, 0.8, 0.9, 0.95], [0, 1, 0, 1, 1, 1], 5)
    >>> fig, ax = plt.subplots()
    >>> _ = plot_confidence_histogram(bins, ax=ax)
    >>> len(ax.patches), [text.get_text() for text in ax.get_legend().get_texts()]
    (5, ['accuracy 0.667', 'avg. confidence 0.683'])
    >>> plt.close(fig)
    """
    own = ax is None
    fig, ax = new_axes(ax, (5, 3.5))
    lo, width, counts, nonempty = _finite_bins(bins)
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
    if own:
        fig.tight_layout()
    return fig


def plot_ece_vs_temperature(
    temperatures: Sequence[float],
    eces: Sequence[float],
    *,
    ax: Axes | None = None,
    fitted: float | None = None,
    title: str = "ECE vs temperature",
) -> Figure:
    """Draw the ECE (in %) against the temperature, optionally marking a fitted temperature.

    Parameters
    ----------
    temperatures
        The temperatures, one per point.
    eces
        The ECE (a fraction) at each temperature.
    ax
        Axes to draw into; ``None``: a new figure of 6 x 4 inches.
    fitted
        A fitted temperature, drawn as a dashed vertical line with its value in the legend.
    title
        The title.

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed.

    Raises
    ------
    InputValidationError
        No temperatures, or not one ECE per temperature.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.figures import plot_ece_vs_temperature
    >>> fig, ax = plt.subplots()
    >>> _ = plot_ece_vs_temperature([0.5, 1.0, 2.0], [0.12, 0.04, 0.09], ax=ax, fitted=1.1)
    >>> ax.lines[0].get_ydata().tolist(), ax.get_legend().get_texts()[0].get_text()
    ([12.0, 4.0, 9.0], 'fitted T = 1.100')
    >>> plt.close(fig)
    """
    if len(temperatures) != len(eces) or not len(temperatures):
        raise InputValidationError(
            f"need one ECE per temperature, got {len(temperatures)} temperatures and {len(eces)} ECE values"
        )
    own = ax is None
    fig, ax = new_axes(ax, (6, 4))
    ax.plot(list(temperatures), [e * 100 for e in eces], marker="o", color="purple")
    if fitted is not None:
        ax.axvline(fitted, color="gray", linestyle="--", label=f"fitted T = {fitted:.3f}")
        ax.legend()
    ax.set_xlabel("temperature T")
    ax.set_ylabel("ECE (%)")
    ax.set_title(title)
    ax.grid(True)
    if own:
        fig.tight_layout()
    return fig


def plot_smooth_reliability(
    curve: SmoothReliabilityCurve,
    *,
    ax: Axes | None = None,
    density: bool | None = None,
    density_ax: Axes | None = None,
    title: str = "Smooth reliability diagram",
    target: str = "accuracy",
) -> Figure:
    """Draw the smooth reliability diagram of Blasiok & Nakkiran (2023), as ``relplot.rel_diagram`` draws it.

    The kernel-smoothed accuracy against the confidence, with a band whose thickness follows the density of
    the confidences (thin where few predictions lie, so the eye is not drawn to regions without data), the
    diagonal, and smooth ECE and the kernel width in the title. The panel below shows the density itself.

    Parameters
    ----------
    curve
        The curve, from :func:`~modelval.metrics.estimators.smooth_reliability_curve` or
        :func:`~modelval.metrics.binary.binary_smooth_reliability_curve`.
    ax
        Axes to draw the diagram into; ``None``: a new figure, 5 x 7 inches with the density panel, 5 x 5
        without.
    density
        Draw the density panel. ``None`` (default): below the diagram in a new figure; with ``ax``, only when
        ``density_ax`` is given. ``True`` with ``ax`` needs ``density_ax``.
    density_ax
        Axes for the density panel, next to ``ax``.
    title
        The first line of the title (smooth ECE and the kernel width follow on the second).
    target
        What the curve measures: ``"accuracy"`` (top-1 confidences) or ``"fraction of positives"`` (binary
        positive-class probabilities; the axes say so).

    Returns
    -------
    matplotlib.figure.Figure
        ``ax.figure``, or the new figure; neither saved nor closed.

    Raises
    ------
    InputValidationError
        ``density=True`` with ``ax`` but without ``density_ax``, ``density_ax`` without ``ax``, or
        ``density_ax`` with ``density=False``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from modelval.figures import plot_smooth_reliability
    >>> from modelval.metrics.estimators import smooth_reliability_curve
    >>> rng = np.random.default_rng(0)
    >>> conf = rng.uniform(0.5, 1, 500)
    >>> curve = smooth_reliability_curve(conf, rng.uniform(size=500) < conf)
    >>> fig, ax = plt.subplots()
    >>> _ = plot_smooth_reliability(curve, ax=ax)
    >>> len(ax.lines[0].get_xdata()) == len(curve.x), ax.get_title().splitlines()[0]
    (True, 'Smooth reliability diagram')
    >>> plt.close(fig)
    """
    fig, ax, dax, own = _panel_pair("plot_smooth_reliability", ax, density_ax, density, "density")
    xlabel, ylabel = _axis_labels(target)
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
    if dax is not None:
        dax.fill_between(curve.x, 0, curve.density, color="tab:gray", alpha=0.7)
        dax.set_xlim(0, 1)
        dax.set_ylabel("density")
        dax.set_xlabel(xlabel)
    if dax is None or not own:
        ax.set_xlabel(xlabel)
    if own:
        fig.tight_layout()
    return fig


#: The most labels :func:`plot_multilabel_reliability` draws a panel for.
MAX_LABELS = 24


def plot_multilabel_reliability(
    label_bins: Sequence[ReliabilityBins],
    names: Sequence[str],
    *,
    axes: Any = None,
    title: str = "Per-label reliability",
    summary: dict[str, Any] | None = None,
    columns: int = 4,
) -> Figure:
    """Draw one small reliability diagram per label (fraction of positives against the predicted probability).

    Each panel: the fraction of positives per bin with its Wilson 95% interval, the diagonal, and the label's
    name, ECE and number of positives in its title. The heading (``title`` and ``summary``) is the figure's
    title of a new figure, and heads the first panel's title in the caller's axes. Labels beyond 24 are left
    out, and the heading says how many are shown.

    Parameters
    ----------
    label_bins
        Each label's bins, from :func:`~modelval.metrics.binary.binary_reliability_bins`.
    names
        The labels' names, one per bins.
    axes
        Axes for the panels (an array from ``plt.subplots`` or a list), at least one per label shown; those
        beyond are turned off. ``None``: a new figure of ``columns`` columns, 3.2 x 3.0 inches a panel.
    title
        The heading's first line.
    summary
        Averages for the heading, as fractions, e.g. ``{"macro ECE": 0.05, "micro ECE": 0.04}``.
    columns
        Panels per row of a new figure.

    Returns
    -------
    matplotlib.figure.Figure
        The figure of ``axes``, or the new figure; neither saved nor closed.

    Raises
    ------
    InputValidationError
        No labels, not one name per label's bins, or fewer ``axes`` than labels shown.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from modelval.figures import plot_multilabel_reliability
    >>> from modelval.metrics.binary import binary_reliability_bins
    >>> cat = binary_reliability_bins([0.1, 0.4, 0.7, 0.9], [0, 0, 1, 1], 5)
    >>> dog = binary_reliability_bins([0.2, 0.6, 0.8, 0.3], [0, 1, 0, 0], 5)
    >>> fig, axes = plt.subplots(1, 2)
    >>> _ = plot_multilabel_reliability([cat, dog], ["cat", "dog"], axes=axes)
    >>> [ax.get_title() for ax in axes]  # the heading tops the first panel
    ['Per-label reliability\\ncat: ECE 22.5%, 2 pos.', 'dog: ECE 42.5%, 1 pos.']
    >>> plt.close(fig)
    """
    if len(label_bins) != len(names) or not label_bins:
        raise InputValidationError(f"need one name per label's bins, got {len(label_bins)} bins and {len(names)} names")
    shown = min(len(label_bins), MAX_LABELS)
    own = axes is None
    if axes is None:
        cols = min(columns, shown)
        rows = -(-shown // cols)
        fig, grid = pyplot().subplots(
            rows, cols, figsize=(3.2 * cols, 3.0 * rows + 0.8), sharex=True, sharey=True, squeeze=False
        )
        panels = list(grid.flat)
    else:
        panels = axes_for(axes, shown, "plot_multilabel_reliability")
        fig = panels[0].figure
        grid = np.asarray(axes, dtype=object)
        cols = grid.shape[-1] if grid.ndim else 1  # a 2-D array's rows, or one row of a list
    for k, ax in enumerate(panels):
        if k >= shown:
            ax.axis("off")
            continue
        bins = label_bins[k]
        lo, width, _, nonempty = _finite_bins(bins)
        frac = np.where(nonempty, bins.accuracy, 0.0)
        ax.bar(lo, frac, width=width, align="edge", color="tab:blue", edgecolor="black", linewidth=0.5)
        _wilson_bars(ax, bins, frac, lo + width / 2, nonempty, elinewidth=0.8, capsize=1.5)
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
    if own:
        fig.suptitle(heading, fontsize="medium")
        fig.tight_layout()
    else:  # nothing over the caller's figure: the heading goes above the first panel's own title
        panels[0].set_title(f"{heading}\n{panels[0].get_title()}", fontsize="small")
    return fig
