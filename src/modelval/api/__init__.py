"""The Python front door: ``shape_bias``, ``accuracy``, ``compare_with_humans``, ``sensitivity``,
``calibration_card``, the options they take and the results they return.

Every command of the ``modelval`` command line is argparse -> these options -> these functions -> a
formatter, so Python and the command line run one pipeline. Re-exported at the top level
(``modelval.shape_bias``). Names load on first use: importing this package imports no torch.
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

_EXPORTS = {
    "EvaluationOptions": "modelval.api.options",
    "ModelOptions": "modelval.api.options",
    "ModelRun": "modelval.api.pipeline",
    "run_model": "modelval.api.pipeline",
    "AccuracyReport": "modelval.api.observers",
    "CalibrationCard": "modelval.api.calibration",
    "HumansReport": "modelval.api.humans",
    "ObserverTrials": "modelval.api.observers",
    "ShapeBiasReport": "modelval.api.cue_conflict",
    "accuracy": "modelval.api.observers",
    "calibration_card": "modelval.api.calibration",
    "model_calibration_card": "modelval.api.calibration",
    "compare_with_humans": "modelval.api.humans",
    "observer_trials": "modelval.api.observers",
    "HumanFiguresReport": "modelval.api.humans",
    "human_figures": "modelval.api.humans",
    "sensitivity": "modelval.api.protocol",
    "shape_bias": "modelval.api.cue_conflict",
    "shape_bias_of_decisions": "modelval.api.cue_conflict",
    "PromptSweepReport": "modelval.api.vlm",
    "prompt_search": "modelval.api.vlm",
    "vlm_shape_bias": "modelval.api.vlm",
    "RescoreReport": "modelval.api.saved_outputs",
    "SavedOutputs": "modelval.api.saved_outputs",
    "load_saved_outputs": "modelval.api.saved_outputs",
    "rescore": "modelval.api.saved_outputs",
    "save_outputs": "modelval.api.saved_outputs",
    "AuditReport": "modelval.api.audit",
    "audit_preprocessing": "modelval.api.audit",
    "ComparisonReport": "modelval.api.comparison",
    "compare": "modelval.api.comparison",
    "preprocess_diff": "modelval.api.preprocessing_diff",
    "PreprocessDiff": "modelval.judgement.preprocess_diff",
    "Pipeline": "modelval.evaluation.pipelines",
    "nightly_verdict": "modelval.api.recording",
    "nightly_report": "modelval.api.report",
    "NightlyReport": "modelval.api.report",
    "plan_trials": "modelval.api.benchmark",
    "ECEReport": "modelval.api.calibration",
    "PredictionMetricsReport": "modelval.api.calibration",
    "RecalibrationReport": "modelval.api.calibration",
    "ReliabilityReport": "modelval.api.calibration",
    "ece_of_artifacts": "modelval.api.calibration",
    "prediction_metrics": "modelval.api.calibration",
    "recalibrate": "modelval.api.calibration",
    "reliability": "modelval.api.calibration",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
