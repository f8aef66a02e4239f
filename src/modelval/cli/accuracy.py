"""``modelval accuracy``: 16-class accuracy of a model or a decision file on one experiment's stimuli."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from modelval.behaviour.accuracy import AccuracyResult
from modelval.behaviour.conditions import ConditionAccuracy
from modelval.cli._args import add_json_option, output_file
from modelval.cli._options import (
    ONE_MODEL,
    UNFLAGGED,
    add_settings,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json
from modelval.datasets.registry import DATASET_NAMES, get_dataset
from modelval.records.run_store import default_run_store


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval accuracy`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "accuracy",
        help="16-class accuracy on any of the 17 datasets (cue-conflict, edges, ..., uniform-noise), overall, per "
        "category and per condition, of a model or a decision CSV",
        description="Accuracy = response == category over every image (cue-conflict: the shape category, "
        "all 1280 images), also per category and per condition (distortion level). Evaluate --model on the "
        "stimuli, or recompute from a published --decisions file.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="NAME|SPEC", help="registered name or model spec (docs/zoo.md)")
    source.add_argument("--decisions", type=Path, help="per-image decision CSV (published raw-data format)")
    parser.add_argument(
        "--dataset", choices=DATASET_NAMES, default=None, help="default: cue-conflict, or read from the file's names"
    )
    add_settings(parser, *ONE_MODEL, quiet=UNFLAGGED)
    parser.add_argument(
        "--decisions-out", type=output_file, metavar="FILE", help="write the model's decisions (raw-data CSV format)"
    )
    add_json_option(parser)
    parser.set_defaults(handler=_run, _parser=parser)


def _run(args: argparse.Namespace) -> int:
    from modelval import api

    if args.decisions is not None and args.decisions_out is not None:
        args._parser.error("--decisions-out writes a model's decisions; it needs --model, not --decisions")
    source = args.decisions if args.decisions is not None else args.model
    report = api.accuracy(
        source, dataset=args.dataset, options=evaluation_options(args), model_options=model_options(args),
        run_store=default_run_store(),
    )  # fmt: skip
    if args.decisions_out and report.run is not None:
        from modelval.behaviour.decisions import write_decisions

        entry = get_dataset(report.result.dataset)
        # model-vs-human's release names carry the dataset code and the condition already
        released = entry.layout == "sessions"
        name_code = None if released else entry.code
        decisions = report.run.evaluation.decisions
        write_decisions(args.decisions_out, decisions, subject=args.model, name_code=name_code, as_written=released)
    if report.coverage_warning:
        print(f"modelval: warning: {report.coverage_warning}", file=sys.stderr)
    if args.json:
        out_json(report.to_json())
    else:
        out(format_accuracy(report.result, report.observer, report.conditions))
    return 0


def format_accuracy(result: AccuracyResult, label: str, conditions: Sequence[ConditionAccuracy] = ()) -> str:
    """The accuracy table: overall, per category and (datasets with distortion levels) per condition.

    Parameters
    ----------
    result
        The observer's accuracy.
    label
        The observer's name.
    conditions
        The accuracy per condition.
    """
    lines = [
        f"{label} on {result.dataset}: accuracy {result.accuracy:.2%} ({result.correct} / {result.images})",
        "",
        f"{'category':<10} {'accuracy':>8} {'correct':>8}",
    ]
    for name, value in result.per_category.items():
        lines.append(f"{name:<10} {value.accuracy:>8.1%} {value.correct:>4} / {value.images:<3}")
    if len(conditions) > 1:
        lines += ["", f"{'condition':<10} {'accuracy':>8} {'correct':>11}  (* left out of model-vs-human's benchmark)"]
        for row in conditions:
            mark = "" if row.in_benchmark else " *"
            lines.append(f"{row.condition:<10} {row.accuracy:>8.1%} {row.correct:>4} / {row.n_trials:<4}{mark}")
    return "\n".join(lines)
