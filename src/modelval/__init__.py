"""modelval: validation of image classifiers.

Shape bias on the cue-conflict stimuli of Geirhos et al. (ICLR 2019), calibration and
imbalance-aware metrics. The code is organised in wings, each a package named after its concept:

- :mod:`modelval.cli`: the command line;
- :mod:`modelval.validation`: expected values, the runner, diagnosis, baselines, reports, the audit;
- :mod:`modelval.evaluation`: a model over a stimulus set -> per-image decisions;
- :mod:`modelval.behaviour`: categories, decisions, shape bias;
- :mod:`modelval.datasets`: stimulus folders, manifests, downloads, the decode cache;
- :mod:`modelval.models`: the registry, model sources and checkpoints;
- :mod:`modelval.metrics`: calibration, temperature, classification, imbalance, artifacts, plots
  (stands alone);
- the shared ground: :mod:`modelval.download`, :mod:`modelval.preprocessing`,
  :mod:`modelval.errors`, :mod:`modelval.paths`, :mod:`modelval.runtime`.

The public entry points are re-exported here and load on first use, so ``import modelval`` stays
light (no torchvision, no model code, no matplotlib).
"""

from __future__ import annotations

import importlib
from typing import Any

from modelval.errors import ModelvalError
from modelval.preprocessing import PreprocessConfig

__version__ = "0.1.0"

#: public name -> the module that defines it
_LAZY = {
    "CATEGORIES": "modelval.behaviour",
    "compute_shape_bias": "modelval.behaviour",
    "read_decisions": "modelval.behaviour",
    "write_decisions": "modelval.behaviour",
    "discover_stimuli": "modelval.datasets",
    "download_stimuli": "modelval.datasets",
    "verify_stimuli": "modelval.datasets",
    "StimulusSet": "modelval.evaluation",
    "Evaluation": "modelval.evaluation",
    "evaluate": "modelval.evaluation",
    "load_model": "modelval.models",
    "list_models": "modelval.models",
    "get_entry": "modelval.models",
    "ValidationRunner": "modelval.validation",
    "expected_calibration_error": "modelval.metrics",
    "reliability_bins": "modelval.metrics",
    "fit_temperature": "modelval.metrics",
    "precision_recall_f1": "modelval.metrics",
    "reweighted_accuracy": "modelval.metrics",
}

__all__ = ["ModelvalError", "PreprocessConfig", "__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'modelval' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
