"""Figures: every plot modelval draws, each ``plot_*(..., ax=None) -> Figure`` or a writer of such figures.

Shape bias per category (:mod:`~modelval.figures.shape_bias`), the protocol-sensitivity card
(:mod:`~modelval.figures.sensitivity`), the comparison with humans (:mod:`~modelval.figures.humans`,
:mod:`~modelval.figures.accuracy`, :mod:`~modelval.figures.consistency`, :mod:`~modelval.figures.conditions`)
and calibration (:mod:`~modelval.figures.calibration`), in one style (:mod:`~modelval.figures.style`).
matplotlib loads on first use; no figure module picks a backend.
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

_EXPORTS = {
    "confidence_histogram": "modelval.figures.calibration",
    "ece_vs_temperature": "modelval.figures.calibration",
    "multilabel_reliability_diagram": "modelval.figures.calibration",
    "reliability_diagram": "modelval.figures.calibration",
    "smooth_reliability_diagram": "modelval.figures.calibration",
    "plot_accuracy_by_dataset": "modelval.figures.accuracy",
    "plot_error_consistency": "modelval.figures.consistency",
    "plot_human_likeness": "modelval.figures.consistency",
    "plot_kappa_matrix": "modelval.figures.consistency",
    "plot_condition_accuracy": "modelval.figures.conditions",
    "plot_condition_grid": "modelval.figures.conditions",
    "plot_condition_kappa": "modelval.figures.conditions",
    "plot_condition_panels": "modelval.figures.conditions",
    "write_condition_figures": "modelval.figures.conditions",
    "plot_paired_categories": "modelval.figures.humans",
    "plot_shape_bias_boxplot": "modelval.figures.humans",
    "plot_shape_bias_figure": "modelval.figures.humans",
    "write_human_figures": "modelval.figures.humans",
    "plot_card": "modelval.figures.sensitivity",
    "plot_per_category": "modelval.figures.shape_bias",
    "save": "modelval.figures.style",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
