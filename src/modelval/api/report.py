"""The nightly on a page: ``index.html``, with the JSON it was made from, from the run store's records.

:func:`nightly_report` reads what :func:`~modelval.api.nightly_verdict` reads (one nightly's ``validate`` records,
each case held against the status file) and adds what a lab looks at the morning after:

- per case, its status, its shape bias with the 95% interval, the expected value with its source and tolerance, the
  flips against its baseline, the provenance digest, the versions and the command that reproduces it;
- per case, the trend of its shape bias and cue-conflict accuracy over every night in the store, against the
  expectation band;
- for a failing case, the stimuli whose decision changed since the case last passed (else since its previous
  record), as thumbnails grouped by transition, each linked to its row of the per-image decisions;
- the coverage: each cell scored, failed (with the reason's class) or never run, and the denominator.

The page is rendered from ``report.json`` alone (:mod:`modelval.figures.nightly_page`): the same records give
byte-identical files, and nothing in the folder refers outside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval import jsonio
from modelval.api.recording import NIGHTLY_COMMAND, NIGHTLY_WINDOW_HOURS, JSONResult

if TYPE_CHECKING:
    from modelval.judgement.nightly import NightlyCase, NightlyVerdict
    from modelval.records.run_store import RunRecord, RunStore

#: The files a report folder holds besides the thumbnails (a folder is rewritten whole: these and ``thumbs/``).
PAGE, DATA, MARKDOWN, THUMBS = "index.html", "report.json", "verdict.md", "thumbs"
#: Thumbnails per failing case at most (the page stays light; the decisions table lists every flip).
MAX_THUMBNAILS = 48
#: The thumbnails' names (a digest of the stimulus's name): the only files a later report removes.
OWN_THUMBNAIL = re.compile(rf"{THUMBS}/[0-9a-f]{{16}}\.png")
THUMBNAIL_PX = 96
#: Provenance fields that differ between two runs of the same thing (left out of the digest).
VOLATILE = frozenset({"created", "command", "session", "output_cache", "output_cache_key", "threads"})


@dataclass
class NightlyReport(JSONResult):
    """What :func:`nightly_report` wrote: the folder, its files and the data the page was rendered from."""

    folder: Path
    files: list[Path]
    data: dict[str, Any]
    verdict: NightlyVerdict

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "files": [str(p) for p in self.files], **self.data}


def nightly_report(
    out_dir: str | os.PathLike[str],
    status: str | os.PathLike[str],
    run: int | None = None,
    *,
    run_store: RunStore | None = None,
    window_hours: float = NIGHTLY_WINDOW_HOURS,
    stimuli: str | os.PathLike[str] | None = None,
    benchmark: str | os.PathLike[str] | None = None,
) -> NightlyReport:
    """Write the nightly's page (``index.html``), ``report.json``, ``verdict.md`` and thumbnails into ``out_dir``.

    Parameters
    ----------
    out_dir
        The report folder (created if missing). Files modelval wrote there before and no longer writes are removed;
        nothing else in it is touched.
    status
        The status file (docs/nightly.md).
    run
        The nightly's last record (default: the newest ``validate`` record).
    run_store
        The run store (default: the per-user store, ``$MODELVAL_RUNS_DB``).
    window_hours
        How far back from the last record the nightly reaches.
    stimuli
        The cue-conflict stimuli the thumbnails are made from (default: the data home's; none found: no
        thumbnails, and the page says why).
    benchmark
        A ``modelval benchmark --json`` / ``--report-dir`` file whose table (ranks with their intervals) joins
        the page (default: ``benchmark.json`` in ``out_dir``, where ``benchmark --report-dir`` writes it).

    Returns
    -------
    NightlyReport
        ``.folder``, ``.files``, ``.data`` (``report.json``) and ``.verdict``.

    Examples
    --------
    One case recorded failing where a pass is expected: a new failure, scored, on a page of three files.

    >>> import modelval
    >>> from modelval.records.run_store import RunStore
    >>> store = RunStore(FOLDER / "runs.sqlite")
    >>> _ = (FOLDER / "status.toml").write_text('[models.lite0]\\n"model/cpu/fp32" = "pass"\\n')
    >>> night = {"created": "2025-06-01T02:30:00+00:00", "device": {"type": "cpu"}, "precision": "fp32"}
    >>> store.record("validate", model="lite0", dataset="cue-conflict", label="model (half)",
    ...              summary={"shape_bias": 0.13, "passed": False, "verdict": "FAIL"}, provenance=night)
    1
    >>> report = modelval.api.nightly_report(FOLDER / "page", FOLDER / "status.toml", run_store=store)
    >>> report.data["cases"][0]["outcome"], report.data["coverage"]["scored"], [p.name for p in report.files]
    ('new failure', 1, ['index.html', 'report.json', 'verdict.md'])
    """
    from modelval.api.recording import nightly_verdict
    from modelval.judgement.nightly import configuration_of
    from modelval.records.run_store import RunStore

    store = run_store if run_store is not None else RunStore()
    verdict = nightly_verdict(status, run, run_store=store, window_hours=window_hours)
    last = verdict.runs[1] if verdict.runs else (run or 0)
    history = store.history(NIGHTLY_COMMAND, until=last) if last else []
    root = _stimuli_root(stimuli)
    by_case: dict[tuple[str, str], list[RunRecord]] = {}
    for record in history:  # one pass: a 1,300-model store holds thousands of records
        by_case.setdefault((str(record.model), configuration_of(record.label, record.provenance)), []).append(record)
    cases, thumbnails = [], {}
    for case in verdict.cases:
        entry, wanted = _case_entry(case, by_case.get((case.model, case.configuration), []), store, root)
        cases.append(entry)
        thumbnails.update(wanted)
    data = jsonio.strict({
        "title": "Nightly shape-bias validation",
        "verdict": {key: value for key, value in verdict.to_dict().items() if key != "cases"},
        "coverage": _coverage(cases),
        "cases": cases,
        "thumbnails": None if root is None else str(root),
        "benchmark": _benchmark(Path(benchmark) if benchmark is not None else Path(out_dir) / BENCHMARK,
                                named=benchmark is not None),
    })  # fmt: skip
    files = _write(Path(out_dir), data, verdict.markdown(), thumbnails)
    return NightlyReport(Path(out_dir), files, data, verdict)


#: Where ``modelval benchmark --report-dir`` writes its table (read from the report folder when there).
BENCHMARK = "benchmark.json"
BENCHMARK_METRICS = ("ood_accuracy", "error_consistency", "observed_consistency", "accuracy_difference")


def _benchmark(path: Path, *, named: bool) -> dict[str, Any] | None:
    """The benchmark table's rows (aggregate, its interval, ranks and rank intervals), or why it could not be read;
    ``None`` when no file was named and none lies in the folder."""
    if not named and not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text())
        rows = [{"observer": str(o["observer"]), "unranked": o.get("unranked"),
                 **{key: o.get(key) or {} for key in ("aggregate", "ranks", "rank_intervals")},
                 "intervals": (o.get("intervals") or {}).get("aggregate") or {}}
                for o in payload["observers"]]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return {"file": path.name, "error": f"{path.name} could not be read as a benchmark table ({error})"}
    rows.sort(key=lambda r: (r["ranks"].get("mean_rank") is None, r["ranks"].get("mean_rank") or 0, r["observer"]))
    return {"file": path.name, "metrics": list(BENCHMARK_METRICS), "rows": rows}


def _stimuli_root(stimuli: str | os.PathLike[str] | None) -> Path | None:
    """The stimuli's folder for the thumbnails: the one named, else the data home's (never downloaded for a page)."""
    from modelval.datasets.stimuli import resolve_data_root
    from modelval.errors import ModelvalError

    if stimuli is not None:
        return Path(stimuli)
    try:
        root = Path(resolve_data_root(None))
    except ModelvalError:
        return None
    return root if root.is_dir() else None


def _case_entry(
    case: NightlyCase, same: Sequence[RunRecord], store: RunStore, root: Path | None
) -> tuple[dict[str, Any], dict[str, Path]]:
    """One case's row: the nightly's outcome, its last record's numbers, trend, flips and provenance (``same``: the
    case's records, oldest first, without their decisions)."""
    last = case.attempts[-1].run_id if case.attempts else None
    record = next((r for r in reversed(same) if r.id == last), None) if last is not None else None
    if last is not None and record is None:
        record = store.get(last)
    entry: dict[str, Any] = {
        "id": _anchor(case.model, case.configuration),
        "model": case.model,
        "configuration": case.configuration,
        "outcome": case.outcome,
        "expected_status": None if case.expected is None else case.expected.status,
        "known_reason": None if case.expected is None else case.expected.reason or None,
        "attempts": [{"run": a.run_id, "passed": a.passed, "verdict": a.verdict} for a in case.attempts],
        "coverage": _cell(case, record),
        "trend": [_point(r) for r in same],
    }
    if record is None:
        return entry, {}
    summary = record.summary
    entry["summary"] = {key: summary.get(key) for key in SUMMARY_KEYS}
    entry["provenance"] = _provenance(record.provenance)
    flipped, wanted = _flipped(case, record, same, store, root)
    entry["flipped"] = flipped
    return entry, wanted


#: What a case's row shows of its record's summary.
SUMMARY_KEYS = ("label", "shape_bias", "ci95", "cue_accuracy", "conflict_images", "expected", "tolerance",
                "expected_source", "difference", "passed", "status", "reason", "verdict", "flips", "error",
                "error_class", "per_category")  # fmt: skip


def _anchor(*parts: str) -> str:
    """A stable HTML id for a case (any model name: its digest, never its text)."""
    return "case-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _cell(case: NightlyCase, record: RunRecord | None) -> dict[str, str]:
    """The coverage of a cell: scored, failed (with its class) or never run (with why)."""
    if record is None:
        why = case.expected.reason if case.expected is not None and case.expected.status == "skip" else ""
        return {"state": "never run", "class": "skipped" if case.outcome == "skipped" else "not run", "why": why}
    summary = record.summary
    status = str(summary.get("status") or "")
    if status == "withheld":
        return {"state": "failed", "class": "sanity gate", "why": str(summary.get("reason") or "")}
    if status == "error" or summary.get("error"):  # its class was recorded from the error's type, never its words
        return {"state": "failed", "class": str(summary.get("error_class") or "error"),
                "why": str(summary.get("error") or "")}  # fmt: skip
    return {"state": "scored", "class": status or "scored", "why": ""}


def _point(record: RunRecord) -> dict[str, Any]:
    summary = record.summary
    return {"run": record.id, "created": record.created, "session": record.provenance.get("session"),
            "shape_bias": _number(summary.get("shape_bias")), "cue_accuracy": _number(summary.get("cue_accuracy")),
            "expected": _number(summary.get("expected")), "tolerance": _number(summary.get("tolerance")),
            "passed": summary.get("passed") is True}  # fmt: skip


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _provenance(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The digest of what produced the record (its volatile fields left out), its versions and its command."""
    stable = {key: value for key, value in provenance.items() if key not in VOLATILE}
    digest = hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()
    packages = provenance.get("packages")
    packages = packages if isinstance(packages, Mapping) else {}
    git = provenance.get("git")
    git = git if isinstance(git, Mapping) else {}
    versions = {"modelval": provenance.get("modelval"), "python": provenance.get("python")}
    return {
        "digest": digest[:16],
        "versions": {**versions, **{name: packages.get(name) for name in ("torch", "torchvision")}},
        "git": git.get("commit"),
        "command": provenance.get("command"),
        "session": provenance.get("session"),
    }


def _flipped(
    case: NightlyCase, record: RunRecord, same: Sequence[RunRecord], store: RunStore, root: Path | None
) -> tuple[dict[str, Any] | None, dict[str, Path]]:
    """For a failing case: the stimuli whose decision changed since the case last passed (else since its record
    before), grouped by transition, and the thumbnails to make."""
    if record.summary.get("passed") is True:  # a pass (a fix too) has nothing to show here
        return None, {}
    record = store.get(record.id)  # with its decisions: read for the failing cases only
    if not record.decisions:
        return None, {}
    earlier = [r for r in same if r.id < record.id]
    if not earlier:
        return {"since": None, "why": "no earlier record of this case", "groups": {}, "count": 0}, {}
    passing = [r for r in earlier if r.summary.get("passed") is True]
    before = store.get((passing or earlier)[-1].id)
    groups: dict[str, list[dict[str, str | None]]] = {}
    wanted: dict[str, Path] = {}
    for name, old, new in _changes(before.decisions or {}, record.decisions or {}):
        shape, texture = _categories(name, new[0])
        transition = f"{_kind(shape, texture, old[1])} -> {_kind(shape, texture, new[1])}"
        thumb = None
        if root is not None and sum(len(g) for g in groups.values()) < MAX_THUMBNAILS:
            thumb = f"{THUMBS}/{hashlib.sha256(name.encode()).hexdigest()[:16]}.png"
            wanted[thumb] = root / shape / name
        groups.setdefault(transition, []).append({"image": name, "before": old[1], "after": new[1],
                                                  "thumbnail": thumb})  # fmt: skip
    ordered = dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])))
    since = "last pass" if passing else "previous record"
    return {"since": since, "since_run": before.id, "count": sum(len(g) for g in groups.values()),
            "groups": ordered}, wanted  # fmt: skip


def _changes(
    before: Mapping[str, Sequence[str]], after: Mapping[str, Sequence[str]]
) -> list[tuple[str, Sequence[str], Sequence[str]]]:
    """``(image, [shape, before], [shape, after])`` of every image whose answer changed, by image name."""
    return [(name, before[name], after[name]) for name in sorted(after)
            if name in before and len(before[name]) == 2 and len(after[name]) == 2
            and before[name][1] != after[name][1]]  # fmt: skip


def _categories(name: str, shape: str) -> tuple[str, str]:
    from modelval.behaviour.cue_conflict import parse_stimulus_name
    from modelval.errors import ModelvalError

    try:
        return parse_stimulus_name(name)
    except (ModelvalError, ValueError, AttributeError):
        return shape, ""


def _kind(shape: str, texture: str, response: str) -> str:
    from modelval.judgement.verdict import answer_kind

    return answer_kind(shape, texture, response)


def _coverage(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many cells were scored, failed (by class) and never run, over how many listed or recorded."""
    states: dict[str, int] = {"scored": 0, "failed": 0, "never run": 0}
    classes: dict[str, int] = {}
    for case in cases:
        cell = case["coverage"]
        states[cell["state"]] += 1
        if cell["state"] != "scored":
            classes[cell["class"]] = classes.get(cell["class"], 0) + 1
    return {"cells": len(cases), **states, "classes": dict(sorted(classes.items()))}


def _write(folder: Path, data: dict[str, Any], markdown: str, thumbnails: Mapping[str, Path]) -> list[Path]:
    """Write the folder whole: the thumbnails, ``report.json``, ``verdict.md`` and the page; then remove what an
    earlier report wrote here and this one did not (named in that report's ``report.json``)."""
    from modelval.atomic import write_text
    from modelval.figures.nightly_page import render_page

    folder.mkdir(parents=True, exist_ok=True)
    earlier = _files_of(folder / DATA)
    made = {rel for rel, source in thumbnails.items() if _thumbnail(source, folder / rel)}
    for case in data["cases"]:  # a stimulus that could not be read is listed without its thumbnail
        for items in (case.get("flipped") or {}).get("groups", {}).values():
            for item in items:
                item["thumbnail"] = item["thumbnail"] if item["thumbnail"] in made else None
    data["made_thumbnails"] = sorted(made)
    data["files"] = sorted([PAGE, DATA, MARKDOWN, *made])
    write_text(folder / DATA, jsonio.dumps(data, indent=1, sort_keys=True) + "\n")
    write_text(folder / MARKDOWN, markdown)
    write_text(folder / PAGE, render_page(data))
    for stale in sorted(earlier - set(data["files"])):
        if OWN_THUMBNAIL.fullmatch(stale):  # only a name modelval gives; an edited report.json names no user file
            (folder / stale).unlink(missing_ok=True)
    return [folder / name for name in data["files"]]


def _files_of(path: Path) -> set[str]:
    """The files an earlier report listed as its own (none when there is no readable one)."""
    try:
        listed = json.loads(path.read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return set()
    return {name for name in listed if isinstance(name, str)}


def _thumbnail(source: Path, target: Path) -> bool:
    """A small PNG of a stimulus (deterministic bytes); ``False`` when the stimulus cannot be read."""
    from PIL import Image

    from modelval.atomic import replacing

    try:
        with Image.open(source) as image:
            small = image.convert("RGB").resize((THUMBNAIL_PX, THUMBNAIL_PX), Image.Resampling.BICUBIC)
    except (OSError, ValueError):
        return False
    import io

    buffer = io.BytesIO()
    small.save(buffer, format="PNG", optimize=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target, binary=True) as handle:
        handle.write(buffer.getvalue())
    return True
