"""The validation runner: a models file (or the registry) as a matrix of cases, each run through the front
door (:func:`modelval.api.run_model`) and judged, serially or on Ray, with the reports it writes.

A shell above the front door: ``modelval validate`` and the pytest plugin drive it.
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

_EXPORTS = {
    "ValidationCase": "modelval.runner.cases",
    "build_cases": "modelval.runner.cases",
    "build_user_cases": "modelval.runner.cases",
    "ValidationRunner": "modelval.runner.matrix",
    "read_models_file": "modelval.runner.models_file",
    "write_validation_reports": "modelval.runner.reports",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
