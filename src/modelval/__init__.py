"""modelval: validation of image classifiers.

Shape bias on the cue-conflict stimuli of Geirhos et al. (ICLR 2019), calibration and
imbalance-aware metrics. The code is organised in wings, each a package named after its concept,
from the shells down to the ground (docs/architecture.md):

- the shells: :mod:`modelval.cli` (the command line), :mod:`modelval.runner` (the validation matrix behind
  ``modelval validate``) and :mod:`modelval.pytest_plugin`;
- :mod:`modelval.api`: the front door, one pipeline from a model to a number;
- :mod:`modelval.judgement`: expected values, the sanity gate, baselines, diagnosis, report rows;
- :mod:`modelval.figures`: every plot;
- :mod:`modelval.evaluation`: a model over a stimulus set -> per-image decisions;
- :mod:`modelval.datasets`: stimulus folders, manifests, downloads, the decoded stimuli;
- :mod:`modelval.records`: provenance, the output cache, the run store;
- :mod:`modelval.behaviour`, :mod:`modelval.models`, :mod:`modelval.metrics`: what answers mean, the
  model registry, calibration and classification metrics (stands alone);
- the ground: :mod:`modelval.download`, :mod:`modelval.preprocessing`, :mod:`modelval.errors`,
  :mod:`modelval.paths`, :mod:`modelval.runtime`, ...

The Python front door is :mod:`modelval.api` (``modelval.shape_bias(...)``, ``modelval.accuracy(...)``,
``modelval.compare_with_humans(...)``, ``modelval.sensitivity(...)``, ``modelval.calibration_card(...)``).
The public names are re-exported here, listed by ``dir(modelval)``, and load on first use, so
``import modelval`` stays light (no torch, torchvision or matplotlib)::

    >>> import modelval
    >>> "shape_bias" in dir(modelval)
    True
"""

from __future__ import annotations

from modelval.errors import ModelvalError
from modelval.lazy import lazy_exports
from modelval.preprocessing import PreprocessConfig

__version__ = "0.1.0"

#: public name -> the module that defines it
_LAZY = {
    "CATEGORIES": "modelval.behaviour",
    "compute_shape_bias": "modelval.behaviour",
    "read_decisions": "modelval.behaviour",
    "read_responses": "modelval.behaviour",
    "write_decisions": "modelval.behaviour",
    "discover_stimuli": "modelval.datasets",
    "download_stimuli": "modelval.datasets",
    "verify_stimuli": "modelval.datasets",
    "StimulusSet": "modelval.datasets",
    "Evaluation": "modelval.evaluation",
    "evaluate": "modelval.evaluation",
    "load_model": "modelval.models",
    "ZeroShotSettings": "modelval.models",
    "list_models": "modelval.models",
    "get_entry": "modelval.models",
    "ValidationRunner": "modelval.runner",
    "expected_calibration_error": "modelval.metrics",
    "reliability_bins": "modelval.metrics",
    "fit_temperature": "modelval.metrics",
    "precision_recall_f1": "modelval.metrics",
    "reweighted_accuracy": "modelval.metrics",
    # the front door
    "EvaluationOptions": "modelval.api",
    "ModelOptions": "modelval.api",
    "shape_bias": "modelval.api",
    "preprocess_diff": "modelval.api",
    "PreprocessDiff": "modelval.api",
    "Pipeline": "modelval.api",
    "shape_bias_of_decisions": "modelval.api",
    "vlm_shape_bias": "modelval.api",
    "prompt_search": "modelval.api",
    "accuracy": "modelval.api",
    "compare_with_humans": "modelval.api",
    "sensitivity": "modelval.api",
    "calibration_card": "modelval.api",
    "run_model": "modelval.api",
    "save_outputs": "modelval.api",
    "rescore": "modelval.api",
    "audit_preprocessing": "modelval.api",
    "compare": "modelval.api",
    "human_figures": "modelval.api",
    "ece_of_artifacts": "modelval.api",
    "prediction_metrics": "modelval.api",
    "recalibrate": "modelval.api",
    "reliability": "modelval.api",
}

__all__ = ["ModelvalError", "PreprocessConfig", "__version__", *sorted(_LAZY)]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
