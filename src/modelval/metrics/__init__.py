"""Metrics: calibration (top-label, binary, multilabel), scaling and calibrators, classification and
imbalance-aware accuracy, per-example prediction files (JSONL).

This wing stands alone: pure functions on arrays (numpy, torch tensors or lists), thin stateful
wrappers, and input validation; it imports nothing of modelval but the shared ground. Its figures
(reliability diagrams, ECE against temperature) are in :mod:`modelval.figures.calibration`, the ECE of one
project's W&B artifact folders in :mod:`modelval.contrib.wandb_artifacts`.
"""

from modelval.metrics.binary import (
    binary_brier_score,
    binary_calibration_error,
    binary_calibration_intervals,
    binary_debiased_l2_calibration_error,
    binary_negative_log_likelihood,
    binary_reliability_bins,
    binary_smooth_ece,
    binary_smooth_reliability_curve,
    binary_top_label,
    binary_top_label_calibration_error,
)
from modelval.metrics.binary_calibrators import (
    BinaryCalibrator,
    BinaryTemperatureScaling,
    MultilabelCalibrator,
    PlattScaling,
    fit_binary_temperature,
    fit_platt,
)
from modelval.metrics.bootstrap import BootstrapInterval, accuracy_intervals, calibration_intervals
from modelval.metrics.calibration import (
    CONVENTIONS,
    CalibrationError,
    ReliabilityBins,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_bins,
    rms_calibration_error,
    top1_confidences,
)
from modelval.metrics.calibrators import HistogramBinningCalibrator, IsotonicCalibrator, calibrate_top_label
from modelval.metrics.card import calibration_card
from modelval.metrics.classification import (
    AVERAGES,
    ClassificationReport,
    confusion_matrix,
    per_class_accuracy_from_confmat,
    precision_recall_f1,
)
from modelval.metrics.estimators import (
    auto_n_bins,
    brier_score,
    classwise_calibration_error,
    debiased_l2_calibration_error,
    ece_at_bin_counts,
    ece_by_group,
    ece_sweep,
    negative_log_likelihood,
    smooth_ece,
    smooth_reliability_curve,
)
from modelval.metrics.imbalance import (
    balanced_accuracy,
    load_class_weights,
    load_train_counts,
    per_class_accuracy,
    reweighted_accuracy,
    shot_accuracy,
    shot_groups,
)
from modelval.metrics.intervals import wilson_interval
from modelval.metrics.io import PredictionFile, read_predictions
from modelval.metrics.multilabel import (
    LabelCalibration,
    MultilabelCalibration,
    multilabel_calibration,
    multilabel_calibration_error,
)
from modelval.metrics.tasks import TaskInput, detect_task
from modelval.metrics.temperature import (
    LogitScaler,
    ScalingFitWarning,
    fit_scaling,
    fit_temperature,
    log_softmax,
    softmax,
    temperature_sweep,
)

__all__ = [
    "AVERAGES",
    "CONVENTIONS",
    "BinaryCalibrator",
    "BinaryTemperatureScaling",
    "BootstrapInterval",
    "CalibrationError",
    "ClassificationReport",
    "HistogramBinningCalibrator",
    "IsotonicCalibrator",
    "LabelCalibration",
    "LogitScaler",
    "MultilabelCalibration",
    "MultilabelCalibrator",
    "PlattScaling",
    "PredictionFile",
    "ReliabilityBins",
    "ScalingFitWarning",
    "TaskInput",
    "accuracy_intervals",
    "auto_n_bins",
    "balanced_accuracy",
    "binary_brier_score",
    "binary_calibration_error",
    "binary_calibration_intervals",
    "binary_debiased_l2_calibration_error",
    "binary_negative_log_likelihood",
    "binary_reliability_bins",
    "binary_smooth_ece",
    "binary_smooth_reliability_curve",
    "binary_top_label",
    "binary_top_label_calibration_error",
    "brier_score",
    "calibrate_top_label",
    "calibration_card",
    "calibration_intervals",
    "classwise_calibration_error",
    "confusion_matrix",
    "debiased_l2_calibration_error",
    "detect_task",
    "ece_at_bin_counts",
    "ece_by_group",
    "ece_sweep",
    "expected_calibration_error",
    "fit_binary_temperature",
    "fit_platt",
    "fit_scaling",
    "fit_temperature",
    "load_class_weights",
    "load_train_counts",
    "log_softmax",
    "maximum_calibration_error",
    "multilabel_calibration",
    "multilabel_calibration_error",
    "negative_log_likelihood",
    "per_class_accuracy",
    "per_class_accuracy_from_confmat",
    "precision_recall_f1",
    "read_predictions",
    "reliability_bins",
    "reweighted_accuracy",
    "rms_calibration_error",
    "shot_accuracy",
    "shot_groups",
    "smooth_ece",
    "smooth_reliability_curve",
    "softmax",
    "temperature_sweep",
    "top1_confidences",
    "wilson_interval",
]

