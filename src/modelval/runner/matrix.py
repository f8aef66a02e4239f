"""The shape-bias validation matrix: cases, a caching runner, and the judgement of each case.

A *case* is one registered model entry (a model from one source) under one normalization: the
model's own ("correct") or the other common one ("wrong": ImageNet mean/std for a 0.5/0.5 model and
vice versa). The runner evaluates each (entry, normalization) once per session and keeps report rows.
Judgement:

- correct normalization, published value: within the documented tolerance, else a diagnosis
  naming calculation, preprocessing or model source;
- correct normalization, committed baseline: at most a few decisions flipped;
- correct normalization, nothing published (DeiT): recorded as a finding, cross-source agreement is
  asserted separately;
- wrong normalization: the change must be *detected* (decisions differ), with the shape-bias and
  cue-conflict-accuracy deltas reported; no invented target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from modelval.behaviour.categories import CATEGORIES, LabelMap
from modelval.behaviour.decisions import by_stimulus, read_decisions
from modelval.datasets.stimulus_set import StimulusSet
from modelval.errors import ModelvalError
from modelval.evaluation import Evaluation, decision_flips, evaluate
from modelval.judgement.diagnosis import check_calculation, check_preprocessing, check_sources, diagnose
from modelval.judgement.expected import ExpectedShapeBias, deit_policy, expected_for
from modelval.judgement.rows import ReportRow, format_per_category
from modelval.judgement.sanity import VERDICT, sanity_check
from modelval.models import ModelEntry, list_models, load_model
from modelval.paths import package_data
from modelval.runner.cases import ValidationCase
from modelval.runner.models_file import UserModel

#: Decisions allowed to flip against a committed baseline. Float differences between CPUs/BLAS builds
#: can flip a near-tie or two; a preprocessing change flips hundreds (ImageNet instead of 0.5/0.5
#: normalization flips 405 for the bundled model).
MAX_BASELINE_FLIPS = 3
#: A "wrong" normalization must flip at least this many decisions to count as detected.
MIN_FLIPS_DETECTED = 1


def run_provenance(spec: str, source: str, evaluation: Evaluation) -> dict[str, object]:
    """The provenance record of one validation case's evaluation (docs/provenance.md)."""
    from modelval.records.provenance import environment

    return {**environment(), **evaluation.provenance, "model": {"spec": spec, "source": source}}


def record_case(row: ReportRow, evaluation: Evaluation) -> int | None:
    """Record a validation case in the run store, so a nightly can say what changed since the last."""
    from modelval.records.run_store import record_run

    summary = {**row.result.to_dict(), "verdict": row.final_verdict}
    summary.pop("per_category", None)
    decisions = {d.imagename: [d.shape, d.response] for d in evaluation.decisions}
    return record_run("validate", model=row.model, dataset="cue-conflict", summary=summary,
                      provenance=row.provenance, decisions=decisions, label=row.normalization)  # fmt: skip


@dataclass
class Judgement:
    passed: bool
    verdict: str
    message: str
    #: The report row of the case; ``None`` when the model could not be loaded or run (verdict "ERROR").
    row: ReportRow | None = None


#: The verdict of a case whose model could not be loaded or run (its error is the message).
ERROR_VERDICT = "ERROR"


@dataclass
class ValidationRunner:
    """Evaluates (entry, normalization) pairs once each and collects report rows."""

    stimuli: StimulusSet
    device: str = "cpu"
    checkpoint_dir: Path | None = None
    reference_csv: Path | None = None
    batch_size: int = 32
    evaluations: dict[tuple[str, str], Evaluation] = field(default_factory=dict)
    rows: list[ReportRow] = field(default_factory=list)
    #: The user's models (models file), by id; their entries once loaded.
    user_models: dict[str, UserModel] = field(default_factory=dict)
    user_entries: dict[str, ModelEntry] = field(default_factory=dict)
    label_maps: dict[str, LabelMap] = field(default_factory=dict)
    #: Record each case in the run store (``modelval runs``; off with $MODELVAL_NO_RUN_STORE).
    record: bool = True

    def _add_row(self, row: ReportRow, evaluation: Evaluation) -> None:
        """Keep the case's row for the reports, and record it in the run store (unless turned off)."""
        if self.record:
            row.run_id = record_case(row, evaluation)
        self.rows.append(row)

    def add_user_models(self, models: Iterable[UserModel]) -> None:
        for user in models:
            self.user_models[user.id] = user

    def resolve_normalization(self, model: str, normalization: str) -> str:
        """ "wrong" -> the other common normalization of the model's own (loaded) one."""
        if normalization != "wrong":
            return normalization
        own = self.evaluate(model, "model").config
        return "imagenet" if own.normalization_name != "imagenet" else "half"

    def _evaluate_user(self, user: UserModel, normalization: str) -> Evaluation:
        import dataclasses

        from modelval.behaviour.label_map import read_label_map

        label_map = None
        if user.label_map is not None:
            # Read once per model: its normalization cases share the map (and an error is reported once).
            if user.id not in self.label_maps:
                self.label_maps[user.id] = read_label_map(user.label_map)
            label_map = self.label_maps[user.id]
        overrides = user.overrides
        if normalization != "model":  # a forced normalization replaces the file's mean/std too
            overrides = dataclasses.replace(overrides, mean=None, std=None)
        loaded = load_model(
            user.spec, normalization=normalization, overrides=overrides, checkpoint=user.checkpoint,
            checkpoint_key=user.checkpoint_key, strip_prefix=user.strip_prefix,
            trust_repo=user.trust_repo, imagenet_head=label_map is None, base_dir=user.base_dir,
            checkpoint_dir=self.checkpoint_dir, device=self.device, progress=False,
        )  # fmt: skip
        self.user_entries[user.id] = loaded.entry
        return evaluate(
            loaded.model,
            loaded.config.preprocess.for_stimuli(None),
            self.stimuli,
            model_name=user.id,
            batch_size=self.batch_size,
            device=self.device,
            progress=False,
            label_map=label_map,
        )

    def evaluate(self, model: str, normalization: str = "model") -> Evaluation:
        if model in self.user_models:
            normalization = self.resolve_normalization(model, normalization)
            key = (model, normalization)
            if key not in self.evaluations:
                self.evaluations[key] = self._evaluate_user(self.user_models[model], normalization)
            return self.evaluations[key]
        key = (model, normalization)
        if key not in self.evaluations:
            loaded = load_model(
                model,
                normalization=normalization,
                checkpoint_dir=self.checkpoint_dir,
                device=self.device,
                offline=True,
                progress=False,
            )
            self.evaluations[key] = evaluate(
                loaded.model,
                loaded.config.preprocess.for_stimuli(None),
                self.stimuli,
                model_name=model,
                batch_size=self.batch_size,
                device=self.device,
                progress=False,
            )
        return self.evaluations[key]

    def run_isolated(
        self, case: ValidationCase, *, source_equivalence: Callable[[], tuple[bool, str]] | None = None
    ) -> Judgement:
        """:meth:`run`, where a model that cannot be loaded or run fails its own case only.

        Its :class:`~modelval.errors.ModelvalError` (one line naming the file, the callable and the exception)
        becomes the message of an ``ERROR`` judgement, and the next case runs.
        """
        try:
            return self.run(case, source_equivalence=source_equivalence)
        except ModelvalError as error:
            return Judgement(False, ERROR_VERDICT, str(error))

    def run(
        self, case: ValidationCase, *, source_equivalence: Callable[[], tuple[bool, str]] | None = None
    ) -> Judgement:
        from modelval.models import get_entry

        if case.user is not None:
            try:
                return self._run_user(case, case.user)
            except ModelvalError as error:  # the user's model fails its own case, in one line; the rest run
                return Judgement(False, ERROR_VERDICT, str(error))
        entry = get_entry(case.model)
        evaluation = self.evaluate(case.model, case.normalization)
        expected = expected_for(case.model)
        label = f"{case.normalization} ({evaluation.config.normalization_name})"
        if case.role == "wrong":
            judgement = self._judge_wrong(case, evaluation)
        elif expected is not None and expected.value is not None:
            judgement = self._judge_published(case, entry, evaluation, expected, source_equivalence)
        elif expected is not None and expected.baseline:
            judgement = self._judge_baseline(entry, evaluation, package_data(expected.baseline))
        else:
            judgement = self._record_finding(case, evaluation)
        judgement.row = ReportRow(
            case.model, entry.display_name, case.source, label, evaluation.result, expected, judgement.verdict,
            provenance=run_provenance(case.model, entry.source, evaluation),
        )  # fmt: skip
        self._add_row(judgement.row, evaluation)
        return judgement

    def _run_user(self, case: ValidationCase, user: UserModel) -> Judgement:
        evaluation = self.evaluate(case.model, case.normalization)
        normalization = self.resolve_normalization(case.model, case.normalization)
        entry = self.user_entries[user.id]
        expected = ExpectedShapeBias(
            model=user.id, label=user.label, value=user.expected, tolerance=user.tolerance, source=user.source,
            baseline=str(user.baseline) if user.baseline else None,
        )  # fmt: skip
        sanity = sanity_check(evaluation.result)
        if case.role in ("wrong", "forced"):
            judgement = self._judge_wrong(case, evaluation)
            if case.role == "forced":
                judgement = Judgement(True, judgement.verdict.replace("DETECTED", "FINDING"), judgement.message)
        elif not sanity.passed:
            judgement = Judgement(False, VERDICT, f"{user.label} ({user.spec}): {sanity.message()}")
        elif user.expected is not None and user.tolerance is not None:
            measured = evaluation.result.shape_bias
            difference = measured - user.expected
            if abs(difference) <= user.tolerance:
                judgement = Judgement(True, "PASS", "")
            else:
                judgement = Judgement(
                    False,
                    "FAIL",
                    f"{user.label} ({user.spec}): shape bias {measured * 100:.2f}% vs expected "
                    f"{user.expected * 100:.2f}% +- {user.tolerance * 100:.1f} pp ({user.source or user.origin}); "
                    f"difference {difference * 100:+.2f} pp\n"
                    f"preprocessing: {evaluation.config.describe()}\n\n{format_per_category(evaluation.result)}",
                )
        elif user.baseline is not None:
            judgement = self._judge_baseline(entry, evaluation, user.baseline)
        else:
            judgement = Judgement(True, "FINDING (no expected value)", "")
        label = f"{normalization} ({evaluation.config.normalization_name})"
        judgement.row = ReportRow(
            user.id, user.label, entry.source, label, evaluation.result, expected, judgement.verdict,
            provenance=run_provenance(user.spec, entry.source, evaluation),
        )  # fmt: skip
        self._add_row(judgement.row, evaluation)
        return judgement

    # --- judgements -------------------------------------------------------------------------

    def _judge_published(self, case, entry, evaluation, expected, source_equivalence) -> Judgement:
        measured = evaluation.result.shape_bias
        difference = measured - expected.value
        if abs(difference) <= expected.tolerance:
            return Judgement(True, "PASS", "")
        checks = [
            check_calculation(self.reference_csv),
            check_preprocessing(evaluation.config, entry.preprocess.for_stimuli(None)),
            check_sources(
                case.model,
                measured,
                self._other_sources(entry),
                tolerance=expected.tolerance,
                equivalence=source_equivalence,
            ),
        ]
        message = (
            f"{entry.display_name} from {case.source}: shape bias {measured * 100:.2f}% vs expected "
            f"{expected.value * 100:.2f}% +- {expected.tolerance * 100:.1f} pp ({expected.source}); "
            f"difference {difference * 100:+.2f} pp\n{diagnose(checks)}\n\n{format_per_category(evaluation.result)}"
        )
        return Judgement(False, "FAIL", message)

    def _judge_baseline(self, entry: ModelEntry, evaluation: Evaluation, baseline_csv: Path) -> Judgement:
        baseline = by_stimulus(read_decisions(baseline_csv))
        current = by_stimulus(evaluation.decisions)
        if current.keys() != baseline.keys():
            return Judgement(False, "FAIL", f"{baseline_csv} covers other stimuli than this evaluation")
        flips = sorted(n for n in current if current[n].response != baseline[n].response)
        verdict = f"BASELINE ({len(flips)} flips)"
        if len(flips) <= MAX_BASELINE_FLIPS:
            return Judgement(True, verdict, "")
        listing = "\n".join(f"  {n}: {baseline[n].response} -> {current[n].response}" for n in flips[:30])
        return Judgement(
            False,
            verdict,
            f"{len(flips)} decisions flipped against {baseline_csv} (allowed {MAX_BASELINE_FLIPS}):\n{listing}\n"
            + diagnose([check_preprocessing(evaluation.config, entry.preprocess.for_stimuli(None))]),
        )

    def _judge_wrong(self, case: ValidationCase, evaluation: Evaluation) -> Judgement:
        correct = self.evaluate(case.model, "model")
        flips = decision_flips(correct.decisions, evaluation.decisions, warn_rate=None).count
        d_bias = evaluation.result.shape_bias - correct.result.shape_bias
        d_acc = evaluation.result.cue_accuracy - correct.result.cue_accuracy
        summary = f"{flips} flips, shape bias {d_bias * 100:+.2f} pp, cue acc. {d_acc * 100:+.2f} pp"
        if case.source == "huggingface" and case.normalization == "half":
            # The non-distilled facebook/deit-* checkpoints ship exactly this (mean/std 0.5): a finding.
            summary = f"{summary}; = the checkpoint's shipped preprocessor config"
        if flips >= MIN_FLIPS_DETECTED:
            return Judgement(True, f"DETECTED ({summary})", summary)
        return Judgement(
            False,
            "NOT DETECTED",
            f"{case.model}: {case.normalization} normalization gave the same decisions as the model's own; "
            "is the normalization applied at all?",
        )

    def _record_finding(self, case: ValidationCase, evaluation: Evaluation) -> Judgement:
        result = evaluation.result
        chance = 1 / len(CATEGORIES)
        if math.isnan(result.cue_accuracy) or result.cue_accuracy < 3 * chance:
            return Judgement(
                False,
                "FAIL",
                f"{case.model}: cue-conflict accuracy {result.cue_accuracy:.3f} is near 16-way chance "
                f"({chance:.3f}); the model or its weights are not a working ImageNet classifier",
            )
        return Judgement(True, "FINDING (no published value)", "")

    def _other_sources(self, entry: ModelEntry) -> dict[str, float]:
        """Shape bias of the same family/variant from other sources, where already evaluated."""
        others = {}
        for other in list_models(family=entry.family):
            if (
                other.variant == entry.variant
                and other.name != entry.name
                and (other.name, "model") in self.evaluations
            ):
                others[other.source] = self.evaluations[(other.name, "model")].result.shape_bias
        return others


def cross_source_tolerance() -> float:
    return float(deit_policy().get("cross_source_tolerance", 0.005))
