"""Validation: expected values with their sources, the runner, diagnosis, baselines, reports and the audit.

The wing on top of :mod:`modelval.evaluation`: it decides whether a model's shape bias matches what
was published, explains a mismatch (calculation, preprocessing or model source), guards against
regressions with baselines, and writes the reports.
"""

from modelval.validation.baseline import baseline_from_evaluation, compare_to_baseline, load_baseline, save_baseline
from modelval.validation.diagnosis import diagnose
from modelval.validation.expected import ExpectedShapeBias, expected_for, load_expected
from modelval.validation.human_figures import (
    plot_accuracy_by_dataset,
    plot_error_consistency,
    plot_shape_bias_figure,
    write_human_figures,
)
from modelval.validation.reports import ReportRow, format_comparison, format_report, write_validation_reports
from modelval.validation.runner import ValidationCase, ValidationRunner, build_cases

__all__ = [
    "ExpectedShapeBias",
    "ReportRow",
    "ValidationCase",
    "ValidationRunner",
    "baseline_from_evaluation",
    "build_cases",
    "compare_to_baseline",
    "diagnose",
    "expected_for",
    "format_comparison",
    "format_report",
    "load_baseline",
    "load_expected",
    "plot_accuracy_by_dataset",
    "plot_error_consistency",
    "plot_shape_bias_figure",
    "save_baseline",
    "write_human_figures",
    "write_validation_reports",
]
