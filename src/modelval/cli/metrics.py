"""``modelval metrics``: accuracy, balanced and reweighted accuracy, P/R/F1 of a prediction JSONL file.

argparse -> :func:`modelval.api.calibration.prediction_metrics` (the numbers, the checks of the inputs) -> the text
table; ``--json`` prints the result's ``to_dict()``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from modelval.cli._args import add_bins_option, add_bootstrap_options, add_json_option, bounded_int
from modelval.cli._output import fmt, fmt_ci_list, fmt_interval, out_json
from modelval.cli._output import out as emit

if TYPE_CHECKING:
    from modelval.api.calibration import PredictionMetricsReport

STRICT_HELP = "a malformed row is an error instead of being dropped (and counted)"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval metrics`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    met = subparsers.add_parser(
        "metrics", help="accuracy, balanced/reweighted accuracy, precision/recall/F1 of a prediction JSONL"
    )
    met.add_argument("path", metavar="PRED.jsonl", type=Path)
    met.add_argument("--class-weights", type=Path, metavar="F", help='class_weights.json (list or {"0": w})')
    met.add_argument("--train-counts", type=Path, metavar="F", help="training images per class (JSON list)")
    met.add_argument(
        "--num-classes",
        type=bounded_int(1, 10**6, "the number of classes is 1 to 1000000"),
        help="default: from weights/counts, else max class + 1",
    )
    shots = bounded_int(0, 10**9, "a training-image count is 0 or more")
    met.add_argument("--many", type=shots, default=100, help="many-shot: train count > MANY (default 100)")
    met.add_argument("--few", type=shots, default=20, help="few-shot: train count < FEW (default 20)")
    met.add_argument("--strict", action="store_true", help=STRICT_HELP)
    add_bins_option(met)
    add_bootstrap_options(met, stratify=True)
    add_json_option(met)
    met.set_defaults(handler=_run_metrics)


def _run_metrics(args: argparse.Namespace) -> int:
    from modelval.api.calibration import prediction_metrics

    report = prediction_metrics(
        args.path, num_classes=args.num_classes, class_weights=args.class_weights, train_counts=args.train_counts,
        many=args.many, few=args.few, bootstrap=args.bootstrap, seed=args.seed, stratify=args.stratify,
        strict=args.strict, n_bins=args.bins,
    )  # fmt: skip
    if args.json:
        out_json(report.to_dict())
        return 0
    _print_metrics(args, report)
    return 0


def _print_metrics(args: argparse.Namespace, report: PredictionMetricsReport) -> None:
    """The text of ``modelval metrics``: the accuracy family with its intervals, P/R/F1, and the ECE."""
    intervals = report.intervals
    emit(f"{args.path}: {report.rows_used} rows used, {report.rows_dropped} dropped, {report.num_classes} classes")

    def ci(name: str) -> str:
        return f"  95% CI {fmt_interval(intervals[name])}" if name in intervals else ""

    emit(f"  accuracy            {report.accuracy:.4f}{ci('accuracy')}")
    emit(f"  balanced accuracy   {report.balanced_accuracy:.4f}{ci('balanced_accuracy')}")
    if report.reweighted_accuracy is not None:
        emit(f"  reweighted accuracy {report.reweighted_accuracy:.4f}{ci('reweighted_accuracy')}")
    if report.shot_accuracy is not None:
        s = report.shot_accuracy
        emit(
            f"  many/medium/few     {fmt(s['many'])} / {fmt(s['medium'])} / {fmt(s['few'])}"
            f"  (many > {args.many}, few < {args.few} training images)"
        )
        if intervals:
            shots = " / ".join(fmt_interval(intervals[f"shot_{g}"]) for g in ("many", "medium", "few"))
            emit(f"  95% CI              {shots}")
    for average, m in report.averages.items():
        emit(f"  {average:<8} P {m['precision']:.4f}  R {m['recall']:.4f}  F1 {m['f1']:.4f}")
    calibration = report.calibration
    if report.ece is not None:
        interval = fmt_ci_list(calibration.get("ece_ci95"))
        emit(f"  ECE                 {report.ece:.4f}{interval}  ({calibration['n_bins']} bins)")
        if "ece_by_group" in calibration:
            groups = " / ".join(fmt(v) if isinstance(v, float) else "-" for v in calibration["ece_by_group"].values())
            emit(f"  ECE many/medium/few {groups}")
    if intervals:
        how = "stratified by class, " if args.stratify else ""
        emit(f"  intervals: percentile bootstrap, {how}{args.bootstrap} resamples, seed {args.seed}")
