"""The files a validation run writes (``--report-dir``): the tables as JSON/CSV/Markdown, per-image
decisions, per-category plots and what changed since the last recorded run."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from modelval import jsonio
from modelval.atomic import replacing, write_text
from modelval.csvio import csv_dict_rows, csv_writer
from modelval.figures.shape_bias import DPI, plot_per_category
from modelval.figures.style import save
from modelval.judgement.rows import ReportRow, format_markdown

if TYPE_CHECKING:
    from modelval.evaluation import Evaluation
    from modelval.records.run_store import RunStore


def _report_file(directory: str | os.PathLike[str], *parts: str) -> Path:
    """``directory/parts...``, refused unless every part is a plain name and the file stays inside ``directory``.

    Report files are named after model ids. The models file refuses ids that are paths; this is the second
    line of defence, at the writer itself, so no id from any caller can write outside the report folder.
    """
    from modelval.errors import DataError

    directory = Path(directory)
    for part in parts:
        plain = part not in ("", ".", "..") and "\0" not in part and Path(part).name == part
        if not plain or "/" in part or (os.altsep is not None and os.altsep in part):
            raise DataError(
                f"refusing to write the report file {part!r} under {directory}: a report file is named after the "
                "model id, which must be a plain name (letters, digits, '_', '-', '.'), not a path"
            )
    path = directory.joinpath(*parts)
    if not path.resolve().is_relative_to(directory.resolve()):
        raise DataError(f"refusing to write {path}: it would land outside the report folder {directory}")
    return path


def _write_reports(
    rows: Sequence[ReportRow], directory: str | os.PathLike[str], *, stem: str = "shape_bias"
) -> list[Path]:
    """Write ``<stem>.json``, ``<stem>.csv`` and ``<stem>.md`` into ``directory``."""
    directory = Path(directory)
    json_path = _report_file(directory, f"{stem}.json")
    records = [jsonio.strict(r.to_dict()) for r in rows]  # withheld or undefined numbers: null, with the reason
    # Strict JSON: an undefined shape bias (no shape or texture hit) is null with its reason, never NaN.
    write_text(json_path, jsonio.dumps(records, indent=2))
    csv_path = _report_file(directory, f"{stem}.csv")
    flat_keys = [k for k in records[0] if k not in ("per_category", "provenance")] if records else []
    with replacing(csv_path, newline="") as handle:
        writer = csv_writer(handle)
        writer.writerow(flat_keys)
        flat = [{k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in r.items()} for r in records]
        writer.writerows(csv_dict_rows(flat_keys, flat))
    md_path = _report_file(directory, f"{stem}.md")
    notes = format_notes(rows)
    listed = "".join(f"- {line}\n" for line in notes)
    write_text(md_path, format_markdown(rows) + (f"\n{listed}" if notes else ""))
    return [json_path, csv_path, md_path]


def format_notes(rows: Sequence[ReportRow]) -> list[str]:
    """One line per row with a note (e.g. a batch size lowered after running out of memory), for under a table.

    Parameters
    ----------
    rows
        The report rows.
    """
    return [f"note: {row.label} ({row.normalization}): {row.note}" for row in rows if row.note]


def write_validation_reports(
    rows: Sequence[ReportRow],
    evaluations: Mapping[tuple[str, str], Evaluation],
    directory: str | os.PathLike[str],
    run_store: RunStore | None = None,
) -> list[Path]:
    """Everything ``pytest --report-dir`` writes: the tables as JSON/CSV/Markdown, per-image decision
    CSVs in the published raw-data format (``decisions/<model>__<normalization>.csv``), one
    per-category plot per model (``plots/<model>.png``, all its normalizations in one figure, withheld
    numbers left out) and, for the rows recorded in ``run_store``, what changed since the last run.

    Parameters
    ----------
    rows
        The report rows.
    evaluations
        Each (model, normalization)'s evaluation.
    directory
        The report folder.
    run_store
        Where the rows were recorded (``None``: no "since the last run").
    """
    from modelval.behaviour.decisions import write_decisions

    directory = Path(directory)
    # Every file's place is checked before the first one is written: a hostile id leaves nothing behind.
    decisions = {key: _report_file(directory, "decisions", f"{key[0]}__{key[1]}.csv") for key in evaluations}
    plots = {model: _report_file(directory, "plots", f"{model}.png") for model, _ in evaluations}
    written = _write_reports(rows, directory)
    written += _write_since_last_run(rows, directory, run_store)
    for (model, normalization), evaluation in evaluations.items():
        path = decisions[(model, normalization)]
        written.append(write_decisions(path, evaluation.decisions, subject=model))
    # No shape bias anywhere for a model that is not a working classifier: not in the plots either.
    withheld = {(row.model, row.normalization_case) for row in rows if row.withheld}
    plotted = {key: evaluation for key, evaluation in evaluations.items() if key not in withheld}
    for model in sorted({model for model, _ in plotted}):
        results = {f"{model} ({n})": e.result for (m, n), e in plotted.items() if m == model}
        written += save(plot_per_category(results, title=f"Shape bias: {model}"), plots[model], dpi=DPI)
    return [*written, retire_stale(directory, written)]


#: The files the last validation run wrote into a report folder (relative paths), so the next run into the same
#: folder removes those it does not write again: the folder holds only the current run's files.
WRITTEN = "written.json"


def retire_stale(directory: Path, written: Sequence[Path]) -> Path:
    """Remove the files an earlier run listed in ``written.json`` that this run did not write again (only those:
    a file modelval did not list is never touched), then list this run's files there.

    Parameters
    ----------
    directory
        The report folder.
    written
        This run's files.
    """
    listing = directory / WRITTEN
    now = sorted(str(path.relative_to(directory)) for path in written)
    try:
        before = json.loads(listing.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        before = []
    for relative in set(before if isinstance(before, list) else []) - set(now):
        stale = directory / str(relative)
        if stale.resolve().is_relative_to(directory.resolve()) and stale.is_file() and not stale.is_symlink():
            stale.unlink()
    return write_text(listing, jsonio.dumps({"files": now}, indent=2) + "\n")


def _write_since_last_run(rows: Sequence[ReportRow], directory: Path, run_store: RunStore | None) -> list[Path]:
    """``since_last_run.json`` and ``.md``: each recorded case against the previous run of the same case.

    What a nightly report needs: which numbers moved, which decisions flipped and which provenance fields
    (versions, preprocessing, weights) differ since the last recorded run; "first recorded run" otherwise.
    """
    from modelval.records.run_diff import since_last_run

    recorded = [row for row in rows if row.run_id is not None]
    if not recorded:
        return []
    changes = {f"{row.model} ({row.normalization})": since_last_run(run_store, row.run_id) for row in recorded}
    json_path = directory / "since_last_run.json"
    json_path.write_text(jsonio.dumps({case: d.to_dict() if d else None for case, d in changes.items()}, indent=2))
    lines = ["# Since the last run", ""]
    for case, difference in changes.items():
        if difference is None:
            lines.append(f"- **{case}**: first recorded run")
            continue
        flipped = len(difference.flipped_images)
        moved = "; ".join(f"{key} {_number(old)} → {_number(new)}" for key, (old, new) in difference.values.items()
                          if key in ("shape_bias", "cue_accuracy", "verdict"))  # fmt: skip
        lines.append(f"- **{case}** (run {difference.a.id} → {difference.b.id}): {flipped} decisions flipped"
                     + (f"; {moved}" if moved else "") + f"; provenance: {difference.provenance_text()}")  # fmt: skip
    md_path = directory / "since_last_run.md"
    md_path.write_text("\n".join(lines) + "\n")
    return [json_path, md_path]


def _number(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)

