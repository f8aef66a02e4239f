"""The nightly's verdict on change: each (model, configuration) of a nightly's records against its expected status.

A nightly runs a zoo and records every case in the run store. Its verdict holds each case against the status
the user expects of it, in a status file (``nightly-status.toml``), as PyTorch's ci_expected_accuracy does::

    [models.efficientnet_lite0]
    "model/cuda/fp32" = "pass"
    "imagenet/cuda/fp32" = { status = "known-failure", reason = "issue 12: ..." }
    "model/cuda/bf16" = { status = "skip", reason = "no bf16 nightly yet" }

A configuration is NORMALIZATION/DEVICE/DTYPE: the case's normalization as recorded (model, imagenet, half),
the device type and the precision of its run. A case that fails where a pass is expected is a *new failure*;
one that passes where a failure is known is *fixed*, and the check fails until the status file says pass (a
ratchet: a fix must be accepted, or it can silently break again); one that failed and passed when it was
rerun in the same nightly is *flaky*. Whether a case passed is the ``passed`` field each record carries (a
verdict as data, :class:`modelval.judgement.verdict.Verdict`), never read back from the verdict's text.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from modelval.errors import DataError
from modelval.judgement.expected import DEVICE_TYPES, DTYPES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NIGHTLY_STATUSES: tuple[str, ...] = ("pass", "known-failure", "skip")
NIGHTLY_NORMALIZATIONS: tuple[str, ...] = ("model", "imagenet", "half", "wrong")
#: The outcomes, in the order a report lists them; those in :data:`FAILING_OUTCOMES` fail the check (exit 1).
OUTCOMES: tuple[str, ...] = (
    "new failure", "fixed", "not in the status file", "not run", "flaky", "known failure", "skipped", "pass",
)  # fmt: skip
FAILING_OUTCOMES = frozenset({"new failure", "fixed", "not in the status file", "not run"})


@dataclass(frozen=True)
class ExpectedStatus:
    """A configuration's expected status in the nightly: ``pass``, ``known-failure`` (with its reason), ``skip``."""

    status: str
    reason: str = ""


def configuration_of(label: str | None, provenance: Mapping[str, object]) -> str:
    """A recorded case's configuration, ``NORMALIZATION/DEVICE/DTYPE`` (``model/cuda/bf16``); a part the record
    does not state (a model that could not be loaded has no provenance) is ``?``.

    Parameters
    ----------
    label
        The run's label (its normalization), if recorded.
    provenance
        The run's provenance record.
    """
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
    line naming the file, the model and the key.

    Parameters
    ----------
    path
        The status file (TOML).
    """
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
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise DataError(f"{path}: 'models' is {models!r}; a status file has [models.<model>] tables only")
    statuses: dict[tuple[str, str], ExpectedStatus] = {}
    for model, table in models.items():
        where = f"{path} [models.{model}]"
        if not isinstance(table, dict):
            raise DataError(f'{where}: expected a table of "NORMALIZATION/DEVICE/DTYPE" = status entries')
        for configuration, value in table.items():
            _check_configuration(configuration, where)
            statuses[(model, configuration)] = _status(value, f"{where} {configuration!r}")
    return statuses


def _check_configuration(configuration: str, where: str) -> None:
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
    """A status file's text (TOML), models and configurations sorted; what ``--accept`` writes.

    Parameters
    ----------
    statuses
        The expected status of each (model, configuration).
    """
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


def _classify(expected: ExpectedStatus | None, attempts: Sequence[Attempt]) -> str:
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
    is taken as the one listed configuration of its model that it matches, when there is exactly one.

    Parameters
    ----------
    statuses
        The status file's expected status of each (model, configuration).
    attempts
        The nightly's recorded attempts of each (model, configuration).
    """
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
                    _classify(statuses.get((model, configuration)), sorted(found, key=lambda a: a.run_id)))
        for (model, configuration), found in merged.items()
    ]  # fmt: skip
    return sorted(cases, key=lambda c: (OUTCOMES.index(c.outcome), c.model, c.configuration))


def accepted_cases(cases: Sequence[NightlyCase], accept: str) -> list[NightlyCase]:
    """The failing cases an acceptance covers; a selector that names no failing case is a DataError (a typo must
    not accept nothing and pass silently).

    Parameters
    ----------
    cases
        The nightly's classified cases.
    accept
        ``all`` (every failing case), ``fixes`` (fixed cases and passing configurations not yet listed: never a new
        failure), or a comma-separated list of ``MODEL`` or ``MODEL@CONFIGURATION`` (``lite0@model/cuda/bf16``).
    """
    failing = [case for case in cases if case.outcome in FAILING_OUTCOMES]
    if accept == "all":
        return failing
    if accept == "fixes":
        return [c for c in failing if c.outcome == "fixed" or (c.outcome == "not in the status file" and _passed(c))]
    chosen: list[NightlyCase] = []
    for selector in (part.strip() for part in accept.split(",")):
        model, _, configuration = selector.partition("@")
        found = [c for c in failing if c.model == model and configuration in ("", c.configuration)]
        if not selector or not found:
            names = sorted({f"{c.model}@{c.configuration}" for c in failing}) or ["none"]
            raise DataError(f"--accept {selector!r} names no failing case of this nightly; write all, fixes or "
                            f"MODEL[@CONFIGURATION] of: {', '.join(names)}")  # fmt: skip
        chosen += [case for case in found if case not in chosen]
    return chosen


def _passed(case: NightlyCase) -> bool:
    return bool(case.attempts) and case.attempts[-1].passed


def accepted_statuses(
    statuses: Mapping[tuple[str, str], ExpectedStatus], cases: Sequence[NightlyCase], *, when: str
) -> dict[tuple[str, str], ExpectedStatus]:
    """The status file after accepting ``cases`` (all of a nightly's, or those :func:`accepted_cases` chose): fixed
    and new passing configurations pass, new failures become known failures (their reason: the verdict, to be
    edited), configurations that did not run are skipped; every other configuration keeps its status.

    Parameters
    ----------
    statuses
        The status file as it is.
    cases
        The cases to accept.
    when
        The date the acceptance is recorded with.
    """
    updated = dict(statuses)
    for case in cases:
        key = (case.model, case.configuration)
        last = case.attempts[-1] if case.attempts else None
        if case.outcome == "not run":
            updated[key] = ExpectedStatus("skip", f"accepted {when}: not run in the nightly")
        elif last is None or case.outcome not in ("fixed", "not in the status file", "new failure"):
            continue
        elif last.passed:
            updated[key] = ExpectedStatus("pass")
        else:  # a new failure, or a failing configuration not yet listed
            updated[key] = ExpectedStatus("known-failure", f"accepted {when}: {last.verdict} (run {last.run_id})")
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
    #: The failing cases the acceptance covered, ``MODEL@CONFIGURATION``.
    accepted_cases: list[str] = field(default_factory=list)

    def by_outcome(self, outcome: str) -> list[NightlyCase]:
        """The cases with this outcome.

        Parameters
        ----------
        outcome
            One of :data:`OUTCOMES`.
        """
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
        """0 when the check passes or every failing case was accepted, 1 otherwise (the command line's status)."""
        if self.accepted is not None:
            covered = set(self.accepted_cases)
            failing = (c for c in self.cases if c.outcome in FAILING_OUTCOMES)
            return 1 if any(f"{c.model}@{c.configuration}" not in covered for c in failing) else 0
        return 0 if self.passed else 1

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "status_file": self.status_file,
            "runs": None if self.runs is None else {"first": self.runs[0], "last": self.runs[1]},
            "window": self.window,
            "counts": self.counts(),
            "accepted": self.accepted,
            "accepted_cases": self.accepted_cases,
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
