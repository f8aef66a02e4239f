"""The shape-bias validation matrix: each case run through the front door and judged.

A *case* is one model (a registry entry, or a model of the user's models file) under one normalization:
the model's own ("correct"), the other common one ("wrong": ImageNet mean/std for a 0.5/0.5 model and
vice versa), or one forced by the models file ("imagenet", "half"). Every (model, normalization) is
evaluated once per session by :func:`modelval.api.run_model`, the pipeline of ``modelval shape-bias``
(label maps, the output cache, the sanity probe, the device resolved once), on stimuli decoded once.

Judgement, in this order:

- **the sanity gate, for every case**: a model that is not a working classifier under its own
  normalization fails every one of its cases, and no number of it is shown anywhere (table, JSON, CSV, run
  store, plots); a case listed without the model's own normalization is gated on its own result;
- correct normalization, published value: within the documented tolerance, else a diagnosis
  naming calculation, preprocessing or model source;
- correct normalization, committed baseline: at most a few decisions flipped;
- correct normalization, nothing published (DeiT): recorded as a finding (cross-source agreement is
  asserted separately);
- wrong normalization: the change must be *detected* (decisions differ), with the shape-bias and
  cue-conflict-accuracy deltas reported; a wrong normalization that breaks a working model (it falls
  below the gate) is detected too, which is what the case exists for, and its number is withheld.

A model that cannot be loaded or run fails its own cases with a one-line reason (verdict ``ERROR``), as a
row of the table; the other models run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.api.options import EvaluationOptions, ModelOptions
from modelval.api.pipeline import ModelRun, run_model
from modelval.behaviour.categories import LabelMap
from modelval.errors import ModelvalError, failure_class
from modelval.judgement.expected import deit_policy, expected_for
from modelval.judgement.rows import ReportRow
from modelval.judgement.sanity import Sanity, sanity_of
from modelval.judgement.verdict import Verdict, error_verdict
from modelval.judgement.verdicts import MAX_BASELINE_FLIPS, MIN_FLIPS_DETECTED, Case, judge
from modelval.paths import package_data
from modelval.runner.cases import ValidationCase
from modelval.runner.models_file import UserModel

if TYPE_CHECKING:
    import torch

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import Evaluation
    from modelval.models.entry import LoadedModel
    from modelval.records.run_store import RunStore

__all__ = ["MAX_BASELINE_FLIPS", "MIN_FLIPS_DETECTED", "ValidationRunner", "Verdict"]


def _run_sanity(run: ModelRun) -> Sanity:
    """The gate's verdict on a run (from its early sample when it stopped there)."""
    return sanity_of(run.evaluation.result, run.early_sanity)


@dataclass
class ValidationRunner:
    """Evaluates each (model, normalization) once through :func:`modelval.api.run_model` and judges cases.

    ``device`` is resolved once per run by the front door (``"auto"``: CUDA when available). ``run_store``
    is where each case is recorded (``modelval runs``); ``None`` records nothing (the shells pass the
    per-user store). ``cache``: reuse stored outputs and decoded stimuli (``None``: on unless ``$MODELVAL_NO_CACHE``).
    """

    stimuli: StimulusSet
    device: str | torch.device = "auto"
    checkpoint_dir: Path | None = None
    reference_csv: Path | None = None
    batch_size: int = 32
    runs: dict[tuple[str, str], ModelRun] = field(default_factory=dict)
    rows: list[ReportRow] = field(default_factory=list)
    #: The user's models (models file), by id.
    user_models: dict[str, UserModel] = field(default_factory=dict)
    label_maps: dict[str, LabelMap] = field(default_factory=dict)
    run_store: RunStore | None = None
    cache: bool | None = None
    #: (model, normalization) -> the one-line reason it could not be loaded or run (tried once).
    failures: dict[tuple[str, str], str] = field(default_factory=dict)
    #: The error itself, where this process met it (another process's arrives as its words only).
    failure_errors: dict[tuple[str, str], ModelvalError] = field(default_factory=dict)
    #: Decide the sanity gate from a random sample first (a model certain to fail is run on the sample only);
    #: ``False`` runs every case in full (benchmarks/bench_zoo.py, which times random-init models).
    early_gate: bool = True
    #: Hold each model's declared preprocessing against its near alternatives (its own normalization's run).
    preprocessing_check: bool = True

    @property
    def evaluations(self) -> dict[tuple[str, str], Evaluation]:
        """Each evaluated (model, resolved normalization)'s evaluation (the reports' decisions and plots)."""
        return {key: run.evaluation for key, run in self.runs.items()}

    def add_user_models(self, models: Iterable[UserModel]) -> None:
        """Add a models file's entries (by id) to the models the runner can evaluate.

        Parameters
        ----------
        models
            The entries.
        """
        for user in models:
            self.user_models[user.id] = user

    # --- running ---------------------------------------------------------------------------------

    def resolve_normalization(self, model: str, normalization: str) -> str:
        """ "wrong" -> the other common normalization of the model's own (loaded) one.

        Parameters
        ----------
        model
            The model.
        normalization
            ``model``, ``wrong`` or a named normalization.
        """
        if normalization != "wrong":
            return normalization
        own = self.model_run(model, "model").evaluation.config
        return "imagenet" if own.normalization_name != "imagenet" else "half"

    def model_run(self, model: str, normalization: str = "model") -> ModelRun:
        """The run of ``model`` under ``normalization``, evaluated on first use (through the front door).

        With the sanity probe on: a model that is certainly not a working classifier is evaluated on a random
        sample only (its cases fail the gate either way); a working one gets the full run.

        Parameters
        ----------
        model
            The model (a registry name or a models-file id).
        normalization
            ``model``, ``wrong`` or a named normalization.
        """
        normalization = self.resolve_normalization(model, normalization)
        key = (model, normalization)
        if key in self.failures:  # the same error again (its type gives its class), else its words
            raise self.failure_errors.get(key) or ModelvalError(self.failures[key])
        if key not in self.runs:
            try:
                self.runs[key] = self._run_model(model, normalization)
            except ModelvalError as error:
                self.failures[key] = " ".join(str(error).split())
                self.failure_errors[key] = error
                raise
        return self.runs[key]

    def evaluate(self, model: str, normalization: str = "model") -> Evaluation:
        """The evaluation of ``model`` under ``normalization`` (see :meth:`model_run`).

        Parameters
        ----------
        model
            The model (a registry name or a models-file id).
        normalization
            ``model``, ``wrong`` or a named normalization.
        """
        return self.model_run(model, normalization).evaluation

    def _run_model(self, model: str, normalization: str) -> ModelRun:
        options = EvaluationOptions(
            normalization=normalization, batch_size=self.batch_size, cache=self.cache, progress=False
        )
        user = self.user_models.get(model)
        spec: Any
        if user is None:
            spec = model
            # The runner never downloads: weights are fetched explicitly (`modelval models fetch`).
            model_options = ModelOptions(device=str(self.device), checkpoint_dir=self.checkpoint_dir, offline=True)
        else:
            spec, model_options = user.spec, self._user_options(user, normalization)
        built = self._built(model)
        if built is not None and normalization != "model":
            # Another normalization of a model already built: the same module, weights loaded and hashed once.
            from modelval.models.registry import reconfigured

            spec = reconfigured(built, normalization=normalization, overrides=model_options.overrides())
        return run_model(
            spec, options=options, model_options=model_options, name=model, sanity_probe=self.early_gate,
            stimuli=self.stimuli, preprocessing_check=self.preprocessing_check and normalization == "model",
        )

    def _built(self, model: str) -> LoadedModel | None:
        """The loaded module of an earlier run of ``model`` in this runner (not one sent from another process)."""
        for (name, _), run in self.runs.items():
            if name == model and run.loaded.model is not None and run.loaded.context is not None:
                return run.loaded
        return None

    def _user_options(self, user: UserModel, normalization: str) -> ModelOptions:
        from modelval.behaviour.label_map import read_label_map

        label_map = None
        if user.label_map is not None:
            # Read once per model: its normalization cases share the map (and an error is reported once).
            if user.id not in self.label_maps:
                self.label_maps[user.id] = read_label_map(user.label_map)
            label_map = self.label_maps[user.id]
        overrides = user.overrides
        forced = normalization != "model"  # a forced normalization replaces the file's mean/std too
        zero_shot = None
        if user.zero_shot:
            from modelval.models.zero_shot import ZeroShotSettings

            zero_shot = ZeroShotSettings(**user.zero_shot)
        return ModelOptions(
            zero_shot=zero_shot,
            checkpoint=user.checkpoint,
            checkpoint_key=user.checkpoint_key,
            strip_prefix=user.strip_prefix,
            label_map=label_map,
            mean=None if forced else overrides.mean,
            std=None if forced else overrides.std,
            interpolation=overrides.interpolation,
            input_size=overrides.input_size,
            trust_repo=user.trust_repo,
            device=str(self.device),
            checkpoint_dir=self.checkpoint_dir,
            base_dir=user.base_dir,
        )

    # --- judging ---------------------------------------------------------------------------------

    def run(
        self, case: ValidationCase, *, source_equivalence: Callable[[], tuple[bool, str]] | None = None
    ) -> Verdict:
        """Run and judge one case (:func:`modelval.judgement.verdicts.judge`); its row joins :attr:`rows` (and the
        run store, when one was given). A model that cannot be loaded or run fails this case with its one-line
        reason (an ``ERROR`` row).

        Parameters
        ----------
        case
            The case.
        source_equivalence
            The offline check that the model's sources hold the same weights (for the diagnosis).
        """
        try:
            verdict = self._judge(case, source_equivalence)
        except ModelvalError as error:
            message = " ".join(str(error).split())
            normalization = case.normalization if case.normalization != "wrong" else "wrong (not resolved)"
            label = case.user.label if case.user is not None else case.model
            row = ReportRow.for_error(case.model, label, case.source, normalization, message, failure_class(error))
            verdict = error_verdict(message)
            verdict.row = row
        assert verdict.row is not None
        verdict.row.run_id = self._record(verdict.row, case)
        self.rows.append(verdict.row)
        return verdict

    def _judge(self, case: ValidationCase, source_equivalence: Callable[[], tuple[bool, str]] | None) -> Verdict:
        user = case.user
        run = self.model_run(case.model, case.normalization)
        normalization = self.resolve_normalization(case.model, case.normalization)
        evaluation = run.evaluation
        entry = run.loaded.entry
        expected = user.expectation if user is not None else expected_for(case.model)
        label, source = (user.label, entry.source) if user is not None else (entry.display_name, case.source)
        if expected is not None:  # the entry for this run's device, compute capability and dtype
            expected = expected.for_evaluation(evaluation)
        row = ReportRow(
            case.model, label, source, f"{normalization} ({evaluation.config.normalization_name})", evaluation.result,
            expected, provenance=run.provenance(), normalization_case=normalization,
        )  # fmt: skip
        retries = evaluation.provenance.get("out_of_memory")
        if isinstance(retries, list) and retries:  # the report says the batch size was lowered (and why)
            row.note = "out of memory: " + "; ".join(str(retry) for retry in retries)
        own_case = case.normalization == "model" or (user is not None and "model" not in user.normalizations)

        def correct() -> tuple[Any, Any]:  # the model's own normalization, evaluated when the judge needs it
            own = self.evaluate(case.model, "model")
            return own.result, own.decisions

        baseline = user.baseline if user is not None else None
        if user is None and expected is not None and expected.baseline:
            baseline = package_data(expected.baseline)
        verdict = judge(Case(
            name=f"{label} ({user.spec})" if user is not None else case.model, result=evaluation.result,
            decisions=evaluation.decisions, expected=expected, sanity=_run_sanity(run),
            role="model" if case.role == "correct" else case.role, normalization=case.normalization, source=source,
            config=evaluation.config, reference=run.declared_preprocess(), preprocessing=run.preprocessing_check,
            correct=correct, own_sanity=None if own_case else _run_sanity(self.model_run(case.model, "model")),
            user=user is not None,
            baseline=baseline, reference_csv=self.reference_csv,
            other_sources=self._other_sources(entry.family, entry.variant, entry.name),
            source_equivalence=source_equivalence,
        ))  # fmt: skip
        row.verdict = verdict
        verdict.row = row
        return verdict

    def _record(self, row: ReportRow, case: ValidationCase) -> int | None:
        """Record a case in the run store, so a nightly can say what changed since the last run. A withheld
        number is null with its reason there too, and a withheld run keeps no decisions."""
        if self.run_store is None:
            return None
        from modelval.records.run_store import record_run

        decisions = None
        if row.error is None and not row.withheld:
            evaluation = self.evaluate(case.model, case.normalization)
            decisions = {d.imagename: [d.shape, d.response] for d in evaluation.decisions}
        return record_run(
            self.run_store, "validate", model=row.model, dataset="cue-conflict",
            summary=row.summary(),  # passed, status, reason: the nightly's verdict reads them (judgement.nightly)
            provenance=row.provenance, decisions=decisions, label=row.normalization,
        )  # fmt: skip

    def _other_sources(self, family: str, variant: str, name: str) -> dict[str, float]:
        """Shape bias of the same family/variant from other sources, where already evaluated (and working)."""
        from modelval.models import list_models

        others = {}
        for other in list_models(family=family):
            run = self.runs.get((other.name, "model"))
            same = other.variant == variant and other.name != name
            if same and run is not None and _run_sanity(run).passed:
                others[other.source] = run.evaluation.result.shape_bias
        return others


def cross_source_tolerance() -> float:
    return float(deit_policy().get("cross_source_tolerance", 0.005))


def detached_runs(runs: dict[tuple[str, str], ModelRun]) -> dict[tuple[str, str], ModelRun]:
    """``runs`` without their modules: what one process sends another (an xdist worker, a Ray task).

    Parameters
    ----------
    runs
        The runs by (model, normalization).
    """
    return {key: run.detached() for key, run in runs.items()}
