"""Judgement: what a measured number means against what was published or recorded.

Expected values with their sources, the sanity gate (is this a working classifier at all?) and its early
probe, regression baselines, the diagnosis of a mismatch, and the report rows every table is made of.
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

_EXPORTS = {
    "baseline_from_evaluation": "modelval.judgement.baseline_file",
    "compare_to_baseline": "modelval.judgement.baseline",
    "load_baseline": "modelval.judgement.baseline_file",
    "save_baseline": "modelval.judgement.baseline_file",
    "diagnose": "modelval.judgement.diagnosis",
    "ExpectedShapeBias": "modelval.judgement.expected",
    "expected_for": "modelval.judgement.expected",
    "load_expected": "modelval.judgement.expected",
    "ReportRow": "modelval.judgement.rows",
    "format_comparison": "modelval.judgement.rows",
    "format_report": "modelval.judgement.rows",
    "Sanity": "modelval.judgement.sanity",
    "sanity_check": "modelval.judgement.sanity",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
