"""``modelval validate``: run the user's models file with the verdicts of the pytest validation matrix."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from modelval.cli._args import add_json_option, add_report_dir_option
from modelval.cli._options import add_settings
from modelval.cli._output import out, out_json
from modelval.errors import ModelvalError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval validate`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "validate",
        help="validate the models of modelval.toml (or [tool.modelval] in pyproject.toml)",
        description="Evaluates every model of the models file under each of its normalization cases and "
        "prints the validation table, with the verdicts of the pytest suite. Exit status 1 when a case fails.",
    )
    add_json_option(parser, '{"cases": [...]}')
    add_report_dir_option(parser, "the JSON/CSV/Markdown reports, per-image decisions and plots")
    add_settings(
        parser, "models_file", "data_root", "allow_modified_stimuli", "device", "batch_size", "cache", "executor",
        "slurm", quiet=("checkpoint_dir", "data_home", "ray_address"),
    )  # fmt: skip
    parser.set_defaults(handler=_run)


def _check_ray_address(args: argparse.Namespace) -> None:
    """``$RAY_ADDRESS`` (or ``ray_address`` of the config file): auto, local, HOST:PORT or ray://HOST:PORT, checked
    before anything loads when ``--executor ray`` will use it (the variable may serve other tools)."""
    from modelval.runner.executors import check_ray_address

    if args.executor == "ray":
        check_ray_address(args.ray_address)


def _run(args: argparse.Namespace) -> int:
    from modelval.datasets.fetch import ensure_stimuli
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.records.run_store import default_run_store
    from modelval.runner.cases import build_user_cases
    from modelval.runner.executors import evaluate_models
    from modelval.runner.matrix import ValidationRunner
    from modelval.runner.models_file import find_models_file, read_models_file
    from modelval.runner.reports import write_validation_reports

    path = args.models_file or find_models_file()
    _check_ray_address(args)
    if path is None:
        raise ModelvalError(
            f"no models file: write modelval.toml (or [tool.modelval] in pyproject.toml) in {Path.cwd()}, "
            "or pass --models-file FILE; see docs/zoo.md"
        )
    models = read_models_file(path)
    submitit = None
    if args.executor == "submitit":
        from modelval.extras import require
        from modelval.runner.executors import SubmititSettings

        submitit = SubmititSettings.parse(args.slurm)
        require("submitit", extra="slurm", purpose="--executor submitit")  # before the stimuli load
        submitit.check()  # a parameter submitit refuses, before the stimuli load (was exit 3 after them)
    if args.executor == "ray":
        from modelval.runner.executors import reach_ray_cluster

        reach_ray_cluster(args.ray_address)  # before the stimuli load: a wrong address is known in seconds
    progress = sys.stderr.isatty()
    root = ensure_stimuli(args.data_root, progress=progress)
    stimuli = StimulusSet.load(root, progress=progress, allow_modified=args.allow_modified_stimuli)
    runner = ValidationRunner(
        stimuli=stimuli,
        device=args.device,  # resolved once per run, by the front door
        checkpoint_dir=Path(args.checkpoint_dir) if args.checkpoint_dir else None,
        batch_size=args.batch_size,
        run_store=default_run_store(),
        cache=bool(args.cache),
    )
    runner.add_user_models(models)
    cases = build_user_cases(models)
    if args.executor != "serial":
        # Every model evaluated up front as tasks (one per model); each case then judges its stored evaluation.
        work: dict[str, list[str]] = {}
        for case in cases:
            work.setdefault(case.model, []).append(case.normalization)
        evaluate_models(
            runner, list(work.items()), executor=args.executor, address=args.ray_address, submitit=submitit
        )
    verdicts = []
    for case in cases:
        if progress:
            print(f"validating {case.id} ...", file=sys.stderr)
        # A model that cannot be loaded or run fails its own cases (verdict ERROR); the other models still run.
        verdicts.append(runner.run(case))
    failed = [(case, verdict) for case, verdict in zip(cases, verdicts, strict=True) if not verdict.passed]
    written = []
    if args.report_dir:
        written = write_validation_reports(runner.rows, runner.evaluations, args.report_dir, runner.run_store)
    if args.json:
        rows = [_case_record(case, verdict) for case, verdict in zip(cases, verdicts, strict=True)]
        out_json({"models_file": str(path), "cases": rows, "written": [str(p) for p in written]})
    else:
        _print_table(path, runner.rows, failed, written, args.report_dir)
    if failed:
        print(f"modelval: {len(failed)} of {len(cases)} cases failed", file=sys.stderr)
        return 1
    return 0


def _case_record(case: Any, verdict: Any) -> dict[str, object]:
    """A case of ``--json``: its model, its numbers (a withheld shape bias null with its reason) and its verdict
    as data (passed, status, reason, the text, the flips and the diagnosis)."""
    record = verdict.row.to_dict()
    return {
        "label": verdict.row.label,
        "spec": case.user.spec if case.user else case.model,
        "normalization": verdict.row.normalization,
        "normalization_case": verdict.row.normalization_case,
        **{key: record[key] for key in ("shape_bias", "expected", "difference")},
        **verdict.to_dict(),
        **({"error": verdict.message} if verdict.row.error is not None else {}),
    }


def _print_table(path: Path, rows: Any, failed: Any, written: list[Path], report_dir: Path | None) -> None:
    """The validation table, the breakdown, the notes and each failure's message."""
    from modelval.judgement.rows import format_breakdown, format_comparison, format_comparison_notes
    from modelval.runner.reports import format_notes

    out(f"models file: {path}")
    out(format_comparison(rows))
    notes = format_comparison_notes(rows)  # why an Expected value is missing
    if notes:
        out(notes)
    out()
    out(format_breakdown(rows))
    for line in format_notes(rows):
        out(line)
    for case, verdict in failed:
        out(f"\nFAILED {case.id}: {verdict.message}")
    if written:
        out(f"\nwrote {len(written)} files into {report_dir}")
