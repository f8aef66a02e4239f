"""The verdict of one validation case: a measured shape bias against what was published, recorded or expected.

Each function takes what was measured (an :class:`~modelval.evaluation.Evaluation`) and what it is held
against, and returns a :class:`Judgement`: passed or not, the verdict of the table, and the message a failing
case prints (with the diagnosis: calculation, preprocessing or model source). The validation runner
(:mod:`modelval.runner.matrix`) decides which applies to a case, after the sanity gate.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.decisions import by_stimulus, read_decisions
from modelval.errors import DataError
from modelval.judgement.diagnosis import check_calculation, check_preprocessing, check_sources, diagnose
from modelval.judgement.expected import DEVICE_TYPES, DTYPES, ExpectedShapeBias
from modelval.judgement.rows import ReportRow, format_per_category
from modelval.judgement.sanity import VERDICT as SANITY_VERDICT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:
    from modelval.evaluation import Evaluation
    from modelval.preprocessing import PreprocessConfig

#: Decisions allowed to flip against a committed baseline. Float differences between CPUs/BLAS builds
#: can flip a near-tie or two; a preprocessing change flips hundreds (ImageNet instead of 0.5/0.5
#: normalization flips 405 for the bundled model).
MAX_BASELINE_FLIPS = 3
#: A "wrong" normalization must flip at least this many decisions to count as detected.
MIN_FLIPS_DETECTED = 1


@dataclass
class Judgement:
    """A case's verdict: ``passed``, the table's ``verdict`` and the ``message`` a failure prints."""

    passed: bool
    verdict: str
    message: str
    #: The report row of the case (a model that could not be loaded or run has an ``ERROR`` row).
    row: ReportRow | None = None


def against_published(
    model: str,
    display_name: str,
    source: str,
    evaluation: Evaluation,
    expected: ExpectedShapeBias,
    *,
    reference: PreprocessConfig,
    reference_csv: Path | None,
    other_sources: Mapping[str, float],
    source_equivalence: Callable[[], tuple[bool, str]] | None = None,
) -> Judgement:
    """Within the published value's tolerance, else FAIL with the diagnosis (``reference``: the model's own
    preprocessing; ``other_sources``: the same weights' shape bias from other sources, already measured).

    An expectation keyed by device and dtype is resolved for the evaluation's own setting (its provenance), and
    the verdict names the entry that decided (``PASS [cuda/bf16]``)."""
    expected = expected.for_evaluation(evaluation)
    assert expected.value is not None and expected.tolerance is not None
    measured = evaluation.result.shape_bias
    difference = measured - expected.value
    if abs(difference) <= expected.tolerance:
        return Judgement(True, expected.named("PASS"), "")
    checks = [
        check_calculation(reference_csv),
        check_preprocessing(evaluation.config, reference),
        check_sources(
            model, measured, dict(other_sources), tolerance=expected.tolerance, equivalence=source_equivalence
        ),
    ]
    message = (
        f"{display_name} from {source}: shape bias {measured * 100:.2f}% vs {expected.describe()} "
        f"({expected.source}); difference {difference * 100:+.2f} pp\n{diagnose(checks)}\n\n"
        f"{format_per_category(evaluation.result)}"
    )
    return Judgement(False, expected.named("FAIL"), message)


def against_expected(
    label: str, spec: str, evaluation: Evaluation, expected: float, tolerance: float, source: str
) -> Judgement:
    """A models file's own expected value (``expected`` +- ``tolerance``, cited as ``source``)."""
    flat = ExpectedShapeBias(model=label, label=label, value=expected, tolerance=tolerance, source=source)
    return against_expectation(label, spec, evaluation, flat)


def against_expectation(label: str, spec: str, evaluation: Evaluation, expected: ExpectedShapeBias) -> Judgement:
    """A models file's expectation (``UserModel.expectation``), resolved for the evaluation's device and dtype;
    the verdict names the keyed entry that decided. No value for this setting: a finding, not a pass."""
    expected = expected.for_evaluation(evaluation)
    if expected.value is None or expected.tolerance is None:
        return Judgement(True, expected.named("FINDING (no expected value)"), "")
    measured = evaluation.result.shape_bias
    difference = measured - expected.value
    if abs(difference) <= expected.tolerance:
        return Judgement(True, expected.named("PASS"), "")
    return Judgement(
        False,
        expected.named("FAIL"),
        f"{label} ({spec}): shape bias {measured * 100:.2f}% vs {expected.describe()} ({expected.source}); "
        f"difference {difference * 100:+.2f} pp\npreprocessing: {evaluation.config.describe()}\n\n"
        f"{format_per_category(evaluation.result)}",
    )


def against_baseline(
    evaluation: Evaluation,
    baseline_csv: Path,
    reference: PreprocessConfig,
    *,
    expected: ExpectedShapeBias | None = None,
) -> Judgement:
    """At most :data:`MAX_BASELINE_FLIPS` decisions flipped against committed per-image decisions (the fp32 CPU
    reference); with ``expected`` stating a flip budget for the evaluation's device and dtype, at most that many,
    and the verdict names the budget and its entry (``BASELINE (9 flips, budget 32 [*/bf16])``)."""
    baseline = by_stimulus(read_decisions(baseline_csv))
    current = by_stimulus(evaluation.decisions)
    if current.keys() != baseline.keys():
        return Judgement(False, "FAIL", f"{baseline_csv} covers other stimuli than this evaluation")
    flips = sorted(n for n in current if current[n].response != baseline[n].response)
    resolved = expected.for_evaluation(evaluation) if expected is not None else None
    allowed, verdict = MAX_BASELINE_FLIPS, f"BASELINE ({len(flips)} flips)"
    if resolved is not None and resolved.flip_budget is not None:
        allowed = resolved.flip_budget
        verdict = f"BASELINE ({len(flips)} flips, {resolved.named(f'budget {allowed}')})"
    if len(flips) <= allowed:
        return Judgement(True, verdict, "")
    listing = "\n".join(f"  {n}: {baseline[n].response} -> {current[n].response}" for n in flips[:30])
    return Judgement(
        False,
        verdict,
        f"{len(flips)} decisions flipped against {baseline_csv} (allowed {allowed}):\n{listing}\n"
        + diagnose([check_preprocessing(evaluation.config, reference)]),
    )


def wrong_normalization(
    model: str, source: str, normalization: str, correct: Evaluation, evaluation: Evaluation
) -> Judgement:
    """The change a wrong ``normalization`` makes must be *detected* (decisions differ from ``correct``'s);
    the shape-bias and cue-conflict-accuracy deltas are reported, no invented target."""
    from modelval.evaluation.flips import decision_flips

    flips = decision_flips(correct.decisions, evaluation.decisions, warn_rate=None).count
    d_bias = evaluation.result.shape_bias - correct.result.shape_bias
    d_acc = evaluation.result.cue_accuracy - correct.result.cue_accuracy
    summary = f"{flips} flips, shape bias {d_bias * 100:+.2f} pp, cue acc. {d_acc * 100:+.2f} pp"
    if source == "huggingface" and normalization == "half":
        # The non-distilled facebook/deit-* checkpoints ship exactly this (mean/std 0.5): a finding.
        summary = f"{summary}; = the checkpoint's shipped preprocessor config"
    if flips >= MIN_FLIPS_DETECTED:
        return Judgement(True, f"DETECTED ({summary})", summary)
    return Judgement(
        False,
        "NOT DETECTED",
        f"{model}: {normalization} normalization gave the same decisions as the model's own; "
        "is the normalization applied at all?",
    )


def finding(model: str, evaluation: Evaluation) -> Judgement:
    """Nothing published: recorded as a finding, unless the accuracy is near 16-way chance."""
    result = evaluation.result
    chance = 1 / len(CATEGORIES)
    if math.isnan(result.cue_accuracy) or result.cue_accuracy < 3 * chance:
        return Judgement(
            False,
            "FAIL",
            f"{model}: cue-conflict accuracy {result.cue_accuracy:.3f} is near 16-way chance "
            f"({chance:.3f}); the model or its weights are not a working ImageNet classifier",
        )
    return Judgement(True, "FINDING (no published value)", "")


# --- the nightly's verdict on change --------------------------------------------------------------------------
#
# A nightly runs a zoo and records every case in the run store. Its verdict holds each case against the status
# the user expects of it, in a status file (``nightly-status.toml``), as PyTorch's ci_expected_accuracy does:
#
#     [models.efficientnet_lite0]
#     "model/cuda/fp32" = "pass"
#     "imagenet/cuda/fp32" = { status = "known-failure", reason = "issue 12: ..." }
#     "model/cuda/bf16" = { status = "skip", reason = "no bf16 nightly yet" }
#
# A configuration is NORMALIZATION/DEVICE/DTYPE: the case's normalization as recorded (model, imagenet, half),
# the device type and the precision of its run. A case that fails where a pass is expected is a *new failure*;
# one that passes where a failure is known is *fixed*, and the check fails until the status file says pass (a
# ratchet: a fix must be accepted, or it can silently break again); one that failed and passed when it was
# rerun in the same nightly is *flaky*.

NIGHTLY_STATUSES: tuple[str, ...] = ("pass", "known-failure", "skip")
NIGHTLY_NORMALIZATIONS: tuple[str, ...] = ("model", "imagenet", "half", "wrong")
#: The outcomes, in the order a report lists them; those in :data:`FAILING_OUTCOMES` fail the check (exit 1).
OUTCOMES: tuple[str, ...] = (
    "new failure", "fixed", "not in the status file", "not run", "flaky", "known failure", "skipped", "pass",
)  # fmt: skip
FAILING_OUTCOMES = frozenset({"new failure", "fixed", "not in the status file", "not run"})
_BASELINE_FLIPS = re.compile(r"BASELINE \((\d+) flips?(?:, budget (\d+)[^)]*)?\)")


@dataclass(frozen=True)
class ExpectedStatus:
    """A configuration's expected status in the nightly: ``pass``, ``known-failure`` (with its reason), ``skip``."""

    status: str
    reason: str = ""


def verdict_passed(verdict: str) -> bool:
    """Whether a case with this recorded verdict passed (the verdicts of :mod:`modelval.judgement.verdicts`)."""
    verdict = verdict.strip()
    baseline = _BASELINE_FLIPS.match(verdict)
    if baseline:
        allowed = int(baseline.group(2)) if baseline.group(2) is not None else MAX_BASELINE_FLIPS
        return int(baseline.group(1)) <= allowed
    if verdict.startswith(("NOT DETECTED", "FAIL", "ERROR", SANITY_VERDICT)):
        return False
    return verdict.startswith(("PASS", "DETECTED", "FINDING"))


def configuration_of(label: str | None, provenance: Mapping[str, object]) -> str:
    """A recorded case's configuration, ``NORMALIZATION/DEVICE/DTYPE`` (``model/cuda/bf16``); a part the record
    does not state (a model that could not be loaded has no provenance) is ``?``."""
    normalization = (label or "?").split(" ")[0] or "?"
    device = provenance.get("device")
    kind = device.get("type") if isinstance(device, Mapping) else None
    precision = provenance.get("precision")
    return f"{normalization}/{kind or '?'}/{precision or '?'}"


def _configuration_matches(recorded: str, listed: str) -> bool:
    """``?`` in a recorded configuration matches any part; a recorded ``wrong`` (never resolved, because the model
    failed to load) matches the other normalizations."""
    for part, want in zip(recorded.split("/"), listed.split("/"), strict=True):
        if part == "?" or part == want or (part == "wrong" and want not in ("model", "?")):
            continue
        return False
    return True


def read_status_file(path: Path) -> dict[tuple[str, str], ExpectedStatus]:
    """The expected statuses of a nightly status file, by (model, configuration); a bad file is one DataError
    line naming the file, the model and the key."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"status file not found: {path} (write it, or create it from a run with --accept)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"{path}: cannot read the status file ({error})") from None
    except tomllib.TOMLDecodeError as error:
        raise DataError(f"{path}: invalid TOML: {error}") from None
    unknown = sorted(set(data) - {"models"})
    if unknown:
        raise DataError(f"{path}: unknown table {unknown[0]!r}; a status file has [models.<model>] tables only")
    statuses: dict[tuple[str, str], ExpectedStatus] = {}
    for model, table in data.get("models", {}).items():
        where = f"{path} [models.{model}]"
        if not isinstance(table, dict):
            raise DataError(f'{where}: expected a table of "NORMALIZATION/DEVICE/DTYPE" = status entries')
        for configuration, value in table.items():
            check_configuration(configuration, where)
            statuses[(model, configuration)] = _status(value, f"{where} {configuration!r}")
    return statuses


def check_configuration(configuration: str, where: str) -> None:
    """``NORMALIZATION/DEVICE/DTYPE`` with known parts, else one DataError line."""
    parts = configuration.split("/")
    ok = len(parts) == 3 and parts[0] in NIGHTLY_NORMALIZATIONS and parts[1] in DEVICE_TYPES and parts[2] in DTYPES
    if not ok:
        raise DataError(
            f"{where}: {configuration!r} is not a configuration; write NORMALIZATION/DEVICE/DTYPE with normalization "
            f"{', '.join(NIGHTLY_NORMALIZATIONS[:3])}, device {', '.join(DEVICE_TYPES)}, dtype {', '.join(DTYPES)} "
            '(e.g. "model/cuda/fp32")'
        )


def _status(value: object, where: str) -> ExpectedStatus:
    table = {"status": value} if isinstance(value, str) else value
    if not isinstance(table, dict) or set(table) - {"status", "reason"} or "status" not in table:
        raise DataError(f'{where}: a status is "pass", "skip" or {{ status = "known-failure", reason = "..." }}')
    status, reason = table["status"], table.get("reason", "")
    if status not in NIGHTLY_STATUSES:
        raise DataError(f"{where}: status {status!r} is not one of {', '.join(NIGHTLY_STATUSES)}")
    if not isinstance(reason, str):
        raise DataError(f"{where}: reason must be a string, got {reason!r}")
    if status == "known-failure" and not reason.strip():
        raise DataError(f'{where}: a known failure needs its reason (reason = "issue 12: ...")')
    return ExpectedStatus(status, reason)


def format_status_file(statuses: Mapping[tuple[str, str], ExpectedStatus]) -> str:
    """A status file's text (TOML), models and configurations sorted; what ``--accept`` writes."""
    lines = [
        "# The nightly's expected status per (model, configuration): pass, known-failure (with a reason) or skip.",
        "# A configuration is NORMALIZATION/DEVICE/DTYPE. Read by `modelval runs verdict --status FILE`.",
    ]
    models = sorted({model for model, _ in statuses})
    for model in models:
        lines += ["", f"[models.{_toml_key(model)}]"]
        for (name, configuration), expected in sorted(statuses.items()):
            if name != model:
                continue
            if expected.status == "pass" or (expected.status == "skip" and not expected.reason):
                value = json.dumps(expected.status)
            else:
                value = f"{{ status = {json.dumps(expected.status)}, reason = {json.dumps(expected.reason)} }}"
            lines.append(f"{json.dumps(configuration)} = {value}")
    return "\n".join(lines) + "\n"


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


@dataclass(frozen=True)
class Attempt:
    """One recorded attempt of a case in the nightly (a rerun is a second attempt)."""

    run_id: int
    created: str
    passed: bool
    verdict: str
    #: The shape bias recorded (None: withheld, or none measured).
    shape_bias: float | None = None


@dataclass(frozen=True)
class NightlyCase:
    """One (model, configuration): what the status file expects, its attempts in this nightly, and the outcome."""

    model: str
    configuration: str
    expected: ExpectedStatus | None
    attempts: tuple[Attempt, ...]
    outcome: str

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "configuration": self.configuration,
            "expected": None if self.expected is None else self.expected.status,
            "reason": None if self.expected is None else self.expected.reason,
            "outcome": self.outcome,
            "attempts": [
                {
                    "run": a.run_id,
                    "created": a.created,
                    "passed": a.passed,
                    "verdict": a.verdict,
                    "shape_bias": a.shape_bias,
                }
                for a in self.attempts
            ],
        }


def classify(expected: ExpectedStatus | None, attempts: Sequence[Attempt]) -> str:
    """The outcome of one configuration (one of :data:`OUTCOMES`) from its expected status and its attempts,
    oldest first: the last attempt decides, and attempts that disagree, the last one passing, are flaky."""
    if expected is not None and expected.status == "skip":
        return "skipped"
    if not attempts:
        return "not run"
    passed = attempts[-1].passed
    if expected is None:
        return "not in the status file" if passed else "new failure"
    if passed and not all(a.passed for a in attempts):
        return "flaky"
    if expected.status == "pass":
        return "pass" if passed else "new failure"
    return "fixed" if passed else "known failure"


def classify_nightly(
    statuses: Mapping[tuple[str, str], ExpectedStatus], attempts: Mapping[tuple[str, str], Sequence[Attempt]]
) -> list[NightlyCase]:
    """Every configuration listed or recorded, classified. A recorded configuration with a part unknown (``?``)
    is taken as the one listed configuration of its model that it matches, when there is exactly one."""
    merged: dict[tuple[str, str], list[Attempt]] = {key: [] for key in statuses}
    for (model, configuration), found in attempts.items():
        key = (model, configuration)
        if key not in statuses and ("?" in configuration or configuration.startswith("wrong/")):
            candidates = [k for k in statuses if k[0] == model and _configuration_matches(configuration, k[1])]
            key = candidates[0] if len(candidates) == 1 else key
        merged.setdefault(key, []).extend(found)
    cases = [
        NightlyCase(model, configuration, statuses.get((model, configuration)),
                    tuple(sorted(found, key=lambda a: a.run_id)),
                    classify(statuses.get((model, configuration)), sorted(found, key=lambda a: a.run_id)))
        for (model, configuration), found in merged.items()
    ]  # fmt: skip
    return sorted(cases, key=lambda c: (OUTCOMES.index(c.outcome), c.model, c.configuration))


def accepted_statuses(
    statuses: Mapping[tuple[str, str], ExpectedStatus], cases: Sequence[NightlyCase], *, when: str
) -> dict[tuple[str, str], ExpectedStatus]:
    """The status file after accepting a nightly: fixed and new passing configurations pass, new failures become
    known failures (their reason: the verdict, to be edited), configurations that did not run are skipped."""
    updated = dict(statuses)
    for case in cases:
        key = (case.model, case.configuration)
        last = case.attempts[-1] if case.attempts else None
        if case.outcome in ("fixed", "not in the status file"):
            updated[key] = ExpectedStatus("pass")
        elif case.outcome == "new failure" and last is not None:
            updated[key] = ExpectedStatus("known-failure", f"accepted {when}: {last.verdict} (run {last.run_id})")
        elif case.outcome == "not run":
            updated[key] = ExpectedStatus("skip", f"accepted {when}: not run in the nightly")
    return updated


@dataclass
class NightlyVerdict:
    """A nightly's verdict: every (model, configuration) classified, with what was read."""

    cases: list[NightlyCase]
    status_file: str
    #: The run ids this nightly's records span (first, last) and the window they were taken from.
    runs: tuple[int, int] | None
    window: str
    #: The status file written by ``accept`` (None: not accepted).
    accepted: str | None = None

    def by_outcome(self, outcome: str) -> list[NightlyCase]:
        return [case for case in self.cases if case.outcome == outcome]

    def counts(self) -> dict[str, int]:
        """How many configurations had each outcome (every outcome listed, zeros included)."""
        return {outcome: len(self.by_outcome(outcome)) for outcome in OUTCOMES}

    @property
    def passed(self) -> bool:
        """No new failure, no unaccepted fix, nothing unlisted and nothing listed that did not run."""
        return not any(case.outcome in FAILING_OUTCOMES for case in self.cases)

    @property
    def exit_code(self) -> int:
        """0 when the check passes, 1 when it fails (the command line's exit status)."""
        return 0 if self.passed else 1

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "status_file": self.status_file,
            "runs": None if self.runs is None else {"first": self.runs[0], "last": self.runs[1]},
            "window": self.window,
            "counts": self.counts(),
            "accepted": self.accepted,
            "cases": [case.to_dict() for case in self.cases],
        }

    def _lines(self, case: NightlyCase) -> str:
        last = case.attempts[-1] if case.attempts else None
        detail = []
        if last is not None:
            tries = " -> ".join(("pass" if a.passed else "fail") + f" (run {a.run_id})" for a in case.attempts)
            detail.append(f"{_last_verdict(last)}; {tries}")
        if case.expected is not None and case.expected.reason:
            detail.append(f"known: {case.expected.reason}")
        return f"{case.model} {case.configuration}: " + "; ".join(detail or ["no record in this nightly"])

    def format(self) -> str:
        """The verdict as text: a headline, then each outcome with its configurations."""
        counts = ", ".join(f"{n} {outcome}" for outcome, n in self.counts().items() if n)
        runs = f"runs {self.runs[0]}-{self.runs[1]}" if self.runs else "no runs"
        headline = "PASS" if self.passed else "FAIL"
        lines = [f"nightly verdict: {headline} ({counts or 'nothing recorded'}); {runs}, {self.window}; "
                 f"status file {self.status_file}"]  # fmt: skip
        for outcome in OUTCOMES:
            found = self.by_outcome(outcome)
            if found and outcome != "pass":
                lines.append(f"{outcome} ({len(found)}):")
                lines += [f"  {self._lines(case)}" for case in found]
        if not self.passed:
            lines.append("a fix or a change of status is accepted with --accept (it rewrites the status file)")
        return "\n".join(lines)

    def markdown(self) -> str:
        """The verdict as a Markdown page (a job summary): the counts, then one table row per configuration."""
        head = "passes" if self.passed else "FAILS"
        runs = f"runs {self.runs[0]}–{self.runs[1]}" if self.runs else "no runs"
        counts = " · ".join(f"{n} {outcome}" for outcome, n in self.counts().items() if n)
        lines = [
            "# Nightly verdict", "",
            f"The check **{head}**: {counts or 'nothing recorded'} ({runs}, {self.window}; `{self.status_file}`).", "",
            "| Outcome | Model | Configuration | Expected | Attempts | Last verdict |", "|---|---|---|---|---|---|",
        ]  # fmt: skip
        for case in self.cases:
            expected = "—" if case.expected is None else case.expected.status
            if case.expected is not None and case.expected.reason:
                expected += f" ({case.expected.reason})"
            tries = ", ".join(("pass" if a.passed else "fail") + f" #{a.run_id}" for a in case.attempts) or "—"
            last = _last_verdict(case.attempts[-1]) if case.attempts else "not run"
            cells = [case.outcome, case.model, f"`{case.configuration}`", expected, tries, last]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        return "\n".join(lines) + "\n"


def _last_verdict(attempt: Attempt) -> str:
    """``FAIL, shape bias 24.47%``: an attempt's verdict (its first line) and the number it recorded."""
    verdict = (attempt.verdict.splitlines() or [""])[0][:120]
    if attempt.shape_bias is None or math.isnan(attempt.shape_bias):
        return verdict
    return f"{verdict}, shape bias {attempt.shape_bias * 100:.2f}%"
