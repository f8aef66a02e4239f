"""What the front-door functions share: strict JSON text of a result, the provenance of a result
recomputed from a decision file, and the run store's label of a protocol (``modelval runs``); and what the
run store's records of a nightly mean against the expected statuses (``modelval runs verdict``)."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval import jsonio
from modelval.api.options import EvaluationOptions
from modelval.atomic import write_text

if TYPE_CHECKING:
    from modelval.judgement.nightly import NightlyVerdict
    from modelval.records.run_store import RunStore

#: The command a nightly's cases are recorded under (``modelval validate`` and the pytest plugin).
NIGHTLY_COMMAND = "validate"


class JSONResult:
    """``to_json()`` for results whose ``to_dict()`` is JSON-ready (undefined numbers become null)."""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every result defines it
        raise NotImplementedError

    def to_json(self, indent: int | None = 2) -> str:
        """The result as JSON text.

        Parameters
        ----------
        indent
            JSON indentation (``None``: one line).
        """
        return jsonio.dumps(self.to_dict(), indent=indent)


def protocol_label(options: EvaluationOptions) -> str:
    """How a run was made, as the run store's label: runs with the same label are comparable.

    Parameters
    ----------
    options
        The evaluation options.
    """
    protocol = f"normalization={options.normalization} resize={options.resize} aggregation={options.aggregation}"
    return f"{options.dataset}: {protocol}"


def decision_file_provenance(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The record of a result recomputed from a decision file: the environment and the file's digest.

    Parameters
    ----------
    path
        The decision file.
    """
    from modelval.records.provenance import environment, file_digest

    return {**environment(), "decisions_file": {"path": str(path), "sha256": file_digest(path)}}


#: Records of one nightly are those made within this many hours before its last one (a nightly runs once a day).
NIGHTLY_WINDOW_HOURS = 12.0
#: The longest window: ten years of hours (a timedelta of 1e10 hours overflows: was exit 3).
MAX_WINDOW_HOURS = 24 * 366 * 10


def nightly_verdict(
    status: str | os.PathLike[str],
    run: int | None = None,
    *,
    run_store: RunStore | None = None,
    window_hours: float = NIGHTLY_WINDOW_HOURS,
    accept: bool | str = False,
) -> NightlyVerdict:
    """The nightly's verdict: each (model, configuration) of the last run against its expected status.

    The run is read from the run store: the ``validate`` records (``modelval validate`` and the pytest plugin
    record one per case) of the last one's session (``$MODELVAL_SESSION``, which a nightly sets for all its
    steps; else one process), made within ``window_hours`` before it (or before run ``run``). Each case is
    held against the status file: a *new failure* (a pass expected), a *known failure*, *fixed* (a failure
    expected, it passed: the check fails until the status is accepted, a ratchet), *flaky* (recorded twice in
    the nightly, a failure and then a pass: a rerun), *skipped*, *not run* (listed, no record) or *not in the
    status file*. The configuration of a case is ``NORMALIZATION/DEVICE/DTYPE`` (``model/cuda/bf16``).

    Parameters
    ----------
    status
        The status file (TOML, ``[models.<model>]`` tables of ``"model/cuda/fp32" = "pass"`` entries; see
        docs/nightly.md). With ``accept`` it may be missing: it is then written from the run.
    run
        The id of the nightly's last record (default: the newest ``validate`` record of the store); the nightly
        is its session's records up to it.
    run_store
        The run store to read (default: the per-user store, ``$MODELVAL_RUNS_DB``).
    window_hours
        How far back from the last record the nightly's records reach.
    accept
        Rewrite the status file so that this nightly is what is expected (fixed and new configurations pass, new
        failures become known failures with their verdict as the reason, configurations not run are skipped);
        the file is written whole (:mod:`modelval.atomic`). ``True`` or ``"all"``: every failing case;
        ``"fixes"``: only fixed cases and passing configurations not yet listed (a new failure stays one);
        ``"MODEL[@CONFIGURATION],..."``: only those cases. The exit code stays 1 while a failing case is left.

    Returns
    -------
    NightlyVerdict
        ``.cases`` (each with its ``outcome``), ``.counts()``, ``.passed``, ``.exit_code`` (0 or 1),
        ``.format()``, ``.markdown()`` and ``.to_dict()``.

    Examples
    --------
    A case recorded as failing where a pass is expected is a new failure, and the check fails:

    >>> import modelval
    >>> from modelval.records.run_store import RunStore
    >>> store = RunStore(FOLDER / "runs.sqlite")
    >>> _ = (FOLDER / "status.toml").write_text('[models.lite0]\\n"model/cpu/fp32" = "pass"\\n')
    >>> night = {"created": "2025-06-01T02:30:00+00:00", "device": {"type": "cpu"}, "precision": "fp32"}
    >>> store.record("validate", model="lite0", dataset="cue-conflict", label="model (half)",
    ...              summary={"shape_bias": 0.13, "verdict": "FAIL"}, provenance=night)
    1
    >>> verdict = modelval.api.nightly_verdict(FOLDER / "status.toml", run_store=store)
    >>> verdict.counts()["new failure"], verdict.exit_code
    (1, 1)
    """
    from modelval.errors import DataError
    from modelval.judgement.nightly import (
        Attempt,
        NightlyVerdict,
        accepted_cases,
        accepted_statuses,
        classify_nightly,
        configuration_of,
        format_status_file,
        read_status_file,
    )
    from modelval.records.run_store import RunStore

    status = Path(status)
    if not (isinstance(window_hours, int | float) and 0 < window_hours <= MAX_WINDOW_HOURS):
        raise DataError(f"the nightly's window is a positive number of hours, at most {MAX_WINDOW_HOURS}, "
                        f"got {window_hours!r}")  # fmt: skip
    store = run_store if run_store is not None else RunStore()
    statuses = read_status_file(status) if status.is_file() or not accept else {}
    last = store.get(run) if run is not None else store.latest(NIGHTLY_COMMAND)
    if last is None:
        raise DataError(f"no validate runs recorded in {store.path}: run `modelval validate` or the pytest plugin "
                        "first (with the run store on)")  # fmt: skip
    if last.command != NIGHTLY_COMMAND:
        raise DataError(f"run {last.id} is a {last.command} run; a nightly's runs are {NIGHTLY_COMMAND} cases")
    try:
        end = datetime.datetime.fromisoformat(last.created)
    except ValueError:
        raise DataError(f"run {last.id} has no readable creation time ({last.created!r})") from None
    start = (end - datetime.timedelta(hours=window_hours)).isoformat(timespec="seconds")
    session = last.provenance.get("session")
    session = session if isinstance(session, str) and session else None
    records = store.window(NIGHTLY_COMMAND, since=start, until=last.id, session=session)
    attempts: dict[tuple[str, str], list[Attempt]] = {}
    for record in records:
        summary = record.summary
        recorded = str(summary.get("verdict") or summary.get("error") or "no verdict recorded")
        # Whether a case passed is the record's own field; a record without one (made before verdicts were data)
        # counts as failed, and says so.
        passed = summary.get("passed") is True
        if not isinstance(summary.get("passed"), bool):
            recorded = f"{recorded} (recorded without passed: run the case again)"
        key = (str(record.model), configuration_of(record.label, record.provenance))
        value = summary.get("shape_bias")
        shape_bias = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        attempts.setdefault(key, []).append(Attempt(record.id, record.created, passed, recorded, shape_bias))
    window = f"{'session ' + session + ', ' if session else ''}records of the {window_hours:g} h up to {last.created}"
    verdict = NightlyVerdict(
        classify_nightly(statuses, attempts), str(status), (records[0].id, last.id) if records else None, window
    )
    if accept:
        chosen = accepted_cases(verdict.cases, "all" if accept is True else str(accept))
        when = end.date().isoformat()
        write_text(status, format_status_file(accepted_statuses(statuses, chosen, when=when)))
        verdict.accepted = str(status)
        verdict.accepted_cases = [f"{case.model}@{case.configuration}" for case in chosen]
    return verdict
