"""Metrics: calibration (top-label, binary, multilabel), scaling and calibrators, classification and
imbalance-aware accuracy, per-example prediction files (JSONL) and trees of them.

This wing stands alone: pure functions on arrays (numpy, torch tensors or lists), thin stateful
wrappers, and the checks of their inputs (:mod:`modelval.metrics.validation`); it imports nothing of
modelval but the shared ground. Its figures (reliability diagrams, ECE against temperature) are in
:mod:`modelval.figures.calibration`. Names load on first use: importing this package imports no torch.
"""

from __future__ import annotations

from modelval.lazy import lazy_exports


def _from(module: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, f"modelval.metrics.{module}")


_EXPORTS = {
    **_from("binary", "binary_brier_score", "binary_calibration_error", "binary_calibration_intervals",
            "binary_debiased_l2_calibration_error", "binary_negative_log_likelihood", "binary_reliability_bins",
            "binary_smooth_ece", "binary_smooth_reliability_curve", "binary_top_label",
            "binary_top_label_calibration_error"),
    **_from("binary_calibrators", "BinaryCalibrator", "BinaryTemperatureScaling", "MultilabelCalibrator",
            "PlattScaling", "fit_binary_temperature", "fit_platt"),
    **_from("bootstrap", "BootstrapInterval", "accuracy_intervals", "calibration_intervals"),
    **_from("calibration", "CONVENTIONS", "CalibrationError", "ReliabilityBins", "expected_calibration_error",
            "maximum_calibration_error", "reliability_bins", "rms_calibration_error", "top1_confidences"),
    **_from("calibrators", "HistogramBinningCalibrator", "IsotonicCalibrator", "calibrate_top_label"),
    **_from("card", "calibration_card"),
    **_from("classification", "AVERAGES", "ClassificationReport", "confusion_matrix",
            "per_class_accuracy_from_confmat", "precision_recall_f1"),
    **_from("estimators", "auto_n_bins", "debiased_l2_calibration_error", "ece_at_bin_counts", "ece_by_group",
            "ece_sweep", "smooth_ece", "smooth_reliability_curve"),
    **_from("scoring", "brier_score", "classwise_calibration_error", "negative_log_likelihood"),
    **_from("imbalance", "balanced_accuracy", "load_class_weights", "load_train_counts", "per_class_accuracy",
            "reweighted_accuracy", "shot_accuracy", "shot_groups"),
    **_from("io", "PredictionFile", "read_predictions"),
    **_from("multilabel", "LabelCalibration", "MultilabelCalibration", "multilabel_calibration",
            "multilabel_calibration_error"),
    **_from("tasks", "TaskInput", "detect_task"),
    **_from("temperature", "LogitScaler", "ScalingFitWarning", "fit_scaling", "fit_temperature", "log_softmax",
            "softmax", "temperature_sweep"),
    "wilson_interval": "modelval.proportions",
}  # fmt: skip

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
