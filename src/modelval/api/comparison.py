"""A paired comparison of two observers on the same images (``modelval compare A B``): is the difference real?

The interval and the test belong to the printed difference (the shape bias on cue-conflict, the accuracy
elsewhere); the McNemar test of the shape-decision rate is reported as what it is, another quantity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modelval.api.observers import ObserverTrials, observer_trials
from modelval.api.options import EvaluationOptions, ModelOptions, resolve_options
from modelval.api.recording import JSONResult

if TYPE_CHECKING:
    from modelval.behaviour.conditions import ConditionPair
    from modelval.behaviour.paired import PairedComparison


@dataclass
class ComparisonReport(JSONResult):
    """A - B on the same images: the paired difference with its interval and tests, per category and per
    condition, and what produced each side."""

    result: PairedComparison
    #: Per condition (distortion level): each observer's accuracy, A - B, the exact McNemar test, kappa.
    conditions: list[ConditionPair]
    a: ObserverTrials
    b: ObserverTrials
    names: tuple[str, str] = ("A", "B")
    #: Figures written by the caller (the command's ``--out`` / ``--report-dir``).
    figures: list[str] = field(default_factory=list)

    @property
    def difference(self) -> float:
        """A - B of the compared statistic (shape bias on cue-conflict, accuracy elsewhere)."""
        return self.result.difference

    def to_dict(self) -> dict[str, Any]:
        payload = self.result.to_dict()
        runs = {"a": self.a.run, "b": self.b.run}
        payload["output_cache"] = {side: run.evaluation.output_cache if run else None for side, run in runs.items()}
        payload["provenance"] = {"a": self.a.provenance, "b": self.b.provenance}
        payload["conditions"] = [row.to_dict() for row in self.conditions]
        payload["conditions_meaning"] = (
            "per condition (distortion level), the trials matched by short image name: each observer's accuracy, "
            "A - B, the exact McNemar test of that difference and the error consistency (kappa) between A and B"
        )
        if self.figures:
            payload["figures"] = list(self.figures)
        return payload


def compare(
    a: Any,
    b: Any,
    *,
    dataset: str | None = None,
    names: tuple[str | None, str | None] | None = None,
    options: EvaluationOptions | None = None,
    model_options: ModelOptions | None = None,
    **settings: Any,
) -> ComparisonReport:
    """The paired difference A - B of two observers on the same images, with its interval and tests.

    On cue-conflict the compared statistic is the shape bias (over the conflict images), elsewhere the
    16-class accuracy. The 95% interval is a paired percentile bootstrap (the same resamples for A and B;
    texture images resampled on cue-conflict unless ``options.resample`` says otherwise, images elsewhere);
    the p-value is a paired sign-flip permutation test of the same difference (``options.permutations``
    random sign flips with ``options.seed``, exact when there are few discordant images). Per category the
    difference has its interval and an exact permutation test, Holm-adjusted. The exact McNemar test is
    reported under its own name: on cue-conflict it tests the shape-decision rate, not the shape bias.

    Parameters
    ----------
    a
        A decision CSV (the published raw-data format) or a model (registry name, spec or ``nn.Module``;
        evaluated on ``dataset`` through the same pipeline as :func:`modelval.shape_bias`).
    b
        The second observer, as ``a``.
    dataset
        The experiment (default: read from the image names of a decision file, else ``options.dataset``).
    names
        The labels of A and B in the result (``None`` for one side, or no ``names``: that observer's own label,
        a decision file's ``subj`` column; ``A: ...`` / ``B: ...`` when the two are the same).
    options
        The protocol and the statistics: ``bootstrap`` resamples, ``seed``, ``resample`` unit, ``permutations``.
    model_options
        How a model observer is loaded (device, weights, label map).
    **settings
        Single fields of ``options`` or ``model_options`` (``bootstrap=0``, ``device="cuda"``, ...).

    Returns
    -------
    ComparisonReport
        ``.result`` (the :class:`~modelval.behaviour.paired.PairedComparison`), ``.conditions``, both sides'
        provenance; ``.to_dict()`` is ``modelval compare --json``.

    Examples
    --------
    The published VGG-16 against ResNet-50 on the cue-conflict images (``REFERENCE`` is texture-vs-shape's
    ``raw-data/`` folder): VGG-16's shape bias is lower, and the difference is far outside chance.

    >>> import modelval
    >>> report = modelval.compare(REFERENCE / "style-transfer-512-nomask-experiment_vgg16_session-1.csv",
    ...                           REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv",
    ...                           bootstrap=200, permutations=2000)
    >>> report.result.statistic, round(report.difference, 4), report.result.test.p < 0.01
    ('shape_bias', -0.1286, True)
    """
    from modelval.behaviour.conditions import paired_by_condition
    from modelval.behaviour.paired import compare_paired
    from modelval.errors import DataError

    options, model_options = resolve_options(options, model_options, settings)
    observed_a = observer_trials(a, dataset=dataset, options=options, model_options=model_options)
    observed_b = observer_trials(
        b,
        dataset=dataset or observed_a.dataset,
        options=options,
        model_options=model_options,
        # no --dataset given: B is read on A's experiment, and a mismatch says so (not a --dataset nobody gave)
        declared_by=None if dataset else f"A is from the {observed_a.dataset} experiment",
    )
    if observed_a.dataset != observed_b.dataset:
        raise DataError(
            f"A is from the {observed_a.dataset} experiment and B from {observed_b.dataset}; compare the same images"
        )
    given_a, given_b = names or (None, None)
    label_a, label_b = given_a or observed_a.label, given_b or observed_b.label
    if label_a == label_b:
        label_a, label_b = f"A: {label_a}", f"B: {label_b}"
    result = compare_paired(
        observed_a.trials,
        observed_b.trials,
        dataset=observed_a.dataset,
        names=(label_a, label_b),
        n_bootstrap=options.bootstrap,
        seed=options.seed,
        resample=options.resample,
        permutations=options.permutations,
    )
    conditions = paired_by_condition(observed_a.trials, observed_b.trials, observed_a.dataset, names=(label_a, label_b))
    return ComparisonReport(result, conditions, observed_a, observed_b, (label_a, label_b))
