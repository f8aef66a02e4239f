"""The calibration card of predictions (``calibration_card``) and of a model's 16-category decisions on a
stimulus set (``model_calibration_card``), as ``modelval calibration`` computes them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.api.pipeline import run_model
from modelval.api.recording import JSONResult

if TYPE_CHECKING:
    import numpy as np

    from modelval.preprocessing import PreprocessConfig


class CalibrationCard(dict[str, Any], JSONResult):
    """The calibration card: every calibration number of one set of predictions (a JSON-ready dict)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def calibration_card(
    labels: np.ndarray | Any,
    *,
    logits: np.ndarray | Any | None = None,
    probs: np.ndarray | Any | None = None,
    task: str | None = None,
    **card_options: Any,
) -> CalibrationCard:
    """The calibration card of predictions: every calibration number of one set of labels and scores.

    Top-label ECE, MCE and RMS calibration error over equal-width bins (``n_bins``, the binning ``convention``),
    the debiased L2 error, smooth ECE, classwise ECE, Brier score and NLL, accuracy, with bootstrap 95% intervals
    (``n_bootstrap`` resamples); binary and multilabel inputs get their own estimators. The task is detected from
    the shapes and ranges unless given, and the card says which and how (an ambiguous input is refused with the
    reason).

    Parameters
    ----------
    labels
        The true labels: class indices (multiclass), 0/1 (binary), or a 0/1 matrix (multilabel).
    logits
        Raw scores (one of ``logits`` and ``probs``).
    probs
        Probabilities (one of ``logits`` and ``probs``).
    task
        ``None`` (detect), ``"binary"``, ``"multiclass"`` or ``"multilabel"`` (``--task``).
    **card_options
        The options of :func:`modelval.metrics.card.calibration_card`: ``n_bins``, ``convention``,
        ``n_bootstrap``, ``seed``, ``stratify``, ...

    Returns
    -------
    CalibrationCard
        A JSON-ready dict (``modelval calibration --json``) with its ``provenance``.

    Examples
    --------
    >>> import numpy as np, modelval
    >>> probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.6, 0.4]])
    >>> card = modelval.calibration_card(np.array([0, 1, 1, 0]), probs=probs, n_bins=2, n_bootstrap=0)
    >>> card["task"], card["accuracy"], round(card["ece"], 4)
    ('multiclass', 1.0, 0.275)
    >>> card = modelval.calibration_card(np.array([1, 1, 1, 0]), probs=np.array([0.2, 0.7, 0.9, 0.4]), n_bins=2,
    ...                                  n_bootstrap=0)
    >>> card["task"], round(card["ece"], 4), round(card["top_label_ece"], 4)
    ('binary', 0.2, 0.0)
    """
    from modelval.metrics.card import calibration_card as card
    from modelval.records.provenance import environment

    result = CalibrationCard(card(labels, logits=logits, probs=probs, task=task, **card_options))
    result["provenance"] = environment()
    return result


#: What a model's calibration card scores: its 16-category probabilities, normalized per image.
MODEL_PROBABILITIES = (
    "the 16 category scores of each image (the aggregation, default mean, of each category's ImageNet-class "
    "probabilities) divided by their sum; the label is the image's category (on cue-conflict: its shape)"
)


def model_calibration_card(
    model: Any,
    *,
    n_bins: int | str = 15,
    convention: str = "default",
    n_bootstrap: int = 1000,
    stratify: bool = False,
    preprocess: PreprocessConfig | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    **settings: Any,
) -> CalibrationCard:
    """The calibration card of a model's 16-category decisions on a stimulus set (``modelval calibration --model``).

    The model runs through :func:`run_model` (a model whose outputs are in the output cache needs no forward
    pass); the card scores each image's 16 category scores (the aggregation, default mean, of each category's
    ImageNet-class probabilities) divided by their sum, against the image's category (on cue-conflict: its
    shape).

    Parameters
    ----------
    model
        A registry name or spec, or an ``nn.Module`` with ``preprocess``.
    n_bins
        Equal-width bins of the binned estimators, or ``"auto"``.
    convention
        The binning convention (``"default"``, ``"torchmetrics"``, ...; :data:`modelval.metrics.CONVENTIONS`).
    n_bootstrap
        Bootstrap resamples of the intervals (0: none).
    stratify
        Resample within each class.
    preprocess
        The preprocessing of an ``nn.Module`` (see :func:`shape_bias`).
    options
        How the model is evaluated; ``options.seed`` seeds the bootstrap.
    model_options
        How the model is loaded and where it runs.
    **settings
        Single fields of ``options`` or ``model_options``.

    Returns
    -------
    CalibrationCard
        The card, with ``model``, ``probabilities`` (what was scored), ``output_cache`` and ``provenance``.

    Examples
    --------
    The bundled EfficientNet-Lite0 on ``SUBSET`` (two stimuli per category): on cue-conflict images the label is
    the shape, which the model names on only 4 of the 32:

    >>> import modelval
    >>> card = modelval.api.model_calibration_card("efficientnet_lite0", data_root=SUBSET,
    ...                                            allow_modified_stimuli=True, n_bins=5, n_bootstrap=0)
    >>> card["task"], card["n"], card["accuracy"], round(card["ece"], 4)
    ('multiclass', 32, 0.125, 0.4189)
    """
    import numpy as np

    from modelval.behaviour.categories import CATEGORIES

    options, model_options = resolve_options(options, model_options, settings)
    run = run_model(model, preprocess=preprocess, options=options, model_options=model_options)
    scores = run.evaluation.category_probabilities.astype(np.float64)
    probabilities = scores / scores.sum(axis=1, keepdims=True)
    labels = np.array([CATEGORIES.index(stimulus.shape) for stimulus in run.evaluation.stimuli])
    card = calibration_card(
        labels, probs=probabilities, n_bins=n_bins, convention=convention, n_bootstrap=n_bootstrap,
        seed=options.seed, stratify=stratify, task="multiclass",
    )  # fmt: skip
    card["model"] = run.model
    card["probabilities"] = MODEL_PROBABILITIES
    card["output_cache"] = run.evaluation.output_cache
    card["provenance"] = run.provenance()
    return card
