"""Figures: every plot modelval draws, each ``plot_*(..., ax=None) -> Figure``, and :func:`save`.

Shape bias per category (:mod:`~modelval.figures.shape_bias`), the protocol-sensitivity card
(:mod:`~modelval.figures.sensitivity`), the comparison with humans (:mod:`~modelval.figures.humans`,
:mod:`~modelval.figures.accuracy`, :mod:`~modelval.figures.consistency`, :mod:`~modelval.figures.conditions`),
the benchmark table (:mod:`~modelval.figures.benchmark`) and calibration (:mod:`~modelval.figures.calibration`),
in one style (:mod:`~modelval.figures.style`).

Each ``plot_*`` draws into the caller's ``ax`` when given (a figure of several panels: ``axes``), else into a
new figure, and returns the matplotlib Figure, neither written nor closed; in the caller's axes it sets no
figure title, figure legend or layout, so a notebook can compose panels::

    fig, (left, right) = plt.subplots(1, 2, layout="constrained")
    plot_reliability(bins, ax=left)
    plot_per_category({"ResNet-50": result}, ax=right)
    save(fig, "panels.png")  # or fig.savefig(...); save writes atomically and closes the figure

The ``write_*`` functions write the set of figures of a report folder. matplotlib loads on first use; no
figure module picks a backend.
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

_EXPORTS = {
    "plot_confidence_histogram": "modelval.figures.calibration",
    "plot_ece_vs_temperature": "modelval.figures.calibration",
    "plot_multilabel_reliability": "modelval.figures.calibration",
    "plot_reliability": "modelval.figures.calibration",
    "plot_smooth_reliability": "modelval.figures.calibration",
    "plot_accuracy_by_dataset": "modelval.figures.accuracy",
    "plot_error_consistency": "modelval.figures.consistency",
    "plot_human_likeness": "modelval.figures.consistency",
    "plot_kappa_matrix": "modelval.figures.consistency",
    "plot_benchmark_ranks": "modelval.figures.benchmark",
    "plot_benchmark_scale": "modelval.figures.benchmark",
    "write_scale_figure": "modelval.figures.benchmark",
    "plot_condition_accuracy": "modelval.figures.conditions",
    "plot_condition_grid": "modelval.figures.conditions",
    "plot_condition_kappa": "modelval.figures.conditions",
    "plot_condition_panels": "modelval.figures.conditions",
    "write_condition_figures": "modelval.figures.conditions",
    "plot_paired_categories": "modelval.figures.humans",
    "plot_shape_bias_boxplot": "modelval.figures.humans",
    "plot_shape_bias_figure": "modelval.figures.humans",
    "write_human_figures": "modelval.figures.humans",
    "plot_sensitivity_card": "modelval.figures.sensitivity",
    "plot_per_category": "modelval.figures.shape_bias",
    "plot_prompt_search": "modelval.figures.shape_bias",
    "save": "modelval.figures.style",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
