"""``modelval ece``, ``reliability``, ``temperature`` and ``metrics``: calibration and imbalance metrics.

Each command is argparse -> :mod:`modelval.api.calibration` (where the numbers, the checks of the inputs and
the files written come from) -> a formatter of the text table; ``--json`` prints the result's ``to_dict()``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.api.calibration import METHODS
from modelval.cli._args import (
    CONVENTION_HELP,
    add_bins_option,
    add_bootstrap_options,
    add_figure_option,
    add_json_option,
    add_report_dir_option,
    bins_text,
    bounded_float,
    bounded_int,
    figure_file,
    output_file,
    writable_path,
)
from modelval.cli._output import out as emit
from modelval.cli._output import out_json, warn
from modelval.metrics.calibration import CONVENTIONS

if TYPE_CHECKING:
    from modelval.api.calibration import PredictionMetricsReport, RecalibrationReport

ADAPTIVE_HELP = "equal-mass (quantile) bins instead of uniform ones"
STRICT_HELP = "a malformed row is an error instead of being dropped (and counted)"


def _figure_or_folder(text: str) -> Path:
    """``reliability --out``: a figure file; an existing folder is the old meaning (deprecated)."""
    path = writable_path(text)
    return path if path.is_dir() else figure_file(text)


def register(subparsers: argparse._SubParsersAction) -> None:
    ece = subparsers.add_parser(
        "ece",
        help="top-1 ECE/MCE of prediction JSONL files or artifact trees",
        description=(
            "Top-1 expected and maximum calibration error from JSONL rows {label, pred, conf}. PATH is a "
            "file or a directory searched for *.jsonl; folders preds-<event>-lb<k>-set<j>-seed<s>-vNNN are "
            "de-duplicated to the newest version per (event, label budget, set). Bins are (lo, hi] with "
            "conf 0 in the first bin, unless --convention torchmetrics."
        ),
    )
    ece.add_argument("paths", nargs="+", metavar="PATH", type=Path)
    add_bins_option(ece)
    ece.add_argument("--convention", choices=CONVENTIONS, default="default", help=CONVENTION_HELP)
    ece.add_argument("--adaptive", action="store_true", help=ADAPTIVE_HELP)
    ece.add_argument("--strict", action="store_true", help=STRICT_HELP)
    ece.add_argument(
        "--csv", type=output_file, metavar="FILE", help="write the (event, label budget) x set table as CSV"
    )
    ece.add_argument(
        "--seeds-csv",
        type=output_file,
        metavar="FILE",
        help="write ECE mean and sd over seeds per (event, label budget, set), with each seed's value, as CSV",
    )
    add_bootstrap_options(ece)
    add_json_option(ece, "a list, one object per file,")
    ece.set_defaults(handler=_run_ece)

    rel = subparsers.add_parser("reliability", help="reliability diagram PNG of one prediction JSONL file")
    rel.add_argument("path", metavar="PRED.jsonl", type=Path)
    rel.add_argument(
        "--out",
        type=_figure_or_folder,
        metavar="FILE",
        help="write the diagram; the suffix picks the format (.png, .pdf, .svg)",
    )
    add_report_dir_option(rel, "<name>-reliability.png and reliability.json")
    add_bins_option(rel)
    rel.add_argument("--convention", choices=CONVENTIONS, default="default", help=CONVENTION_HELP)
    rel.add_argument("--adaptive", action="store_true", help=ADAPTIVE_HELP)
    rel.add_argument("--strict", action="store_true", help=STRICT_HELP)
    add_bootstrap_options(rel, stratify=True)
    add_json_option(rel, "ECE/MCE, effective_bins and the bins")
    rel.set_defaults(_parser=rel)
    rel.set_defaults(handler=_run_reliability)

    temp = subparsers.add_parser(
        "temperature",
        help="fit temperature scaling on validation logits, report NLL/ECE on test logits",
        description=(
            "Logits files are .npz with arrays 'logits' (N, C) and 'labels' (N,), or .pt with a dict "
            "{'logits': Tensor, 'labels': Tensor}."
        ),
    )
    temp.add_argument("--val", type=Path, required=True, help="held-out logits used to fit T")
    temp.add_argument("--test", type=Path, required=True, help="logits on which NLL/ECE are reported")
    add_bins_option(temp, auto=False)
    temp.add_argument(
        "--method",
        choices=METHODS,
        default="temperature",
        help="a logit scaling (temperature, vector, matrix) or a top-label calibrator of the top-1 confidence "
        "(histogram binning with --bins bins, isotonic regression); the latter give no NLL",
    )
    temp.add_argument(
        "--odir",
        type=bounded_float(0, 1e6, "ODIR weights are 0 or more"),
        nargs=2,
        metavar=("LAMBDA", "MU"),
        help="ODIR regularisation (Kull et al. 2019) of vector/matrix scaling: off-diagonal and intercept weights",
    )
    temp.add_argument(
        "--sweep",
        type=bounded_float(0, 1e6, "a temperature is more than 0", low_open=True),
        nargs="*",
        default=[0.5, 1.0, 1.5, 2.0],
        metavar="T",
        help="fixed temperatures to report on the test set (default 0.5 1 1.5 2)",
    )
    add_figure_option(temp, "the ECE-vs-temperature figure of the --sweep temperatures")
    add_json_option(temp)
    temp.set_defaults(handler=_run_temperature)

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


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _fmt_interval(interval: Any, digits: int = 4) -> str:
    if interval is None:
        return "-"
    low, high = (interval.low, interval.high) if hasattr(interval, "low") else interval
    return f"[{_fmt(low, digits)}, {_fmt(high, digits)}]"


def _fmt_ci_list(interval: list[float] | None) -> str:
    return f"  95% CI {_fmt_interval(interval)}" if interval else ""


def _run_ece(args: argparse.Namespace) -> int:
    from modelval.api.calibration import ece_of_artifacts
    from modelval.metrics.artifacts import write_seed_summary_csv, write_summary_csv

    options: dict[str, Any] = dict(
        n_bins=args.bins, convention=args.convention, adaptive=args.adaptive, strict=args.strict
    )
    report = ece_of_artifacts(args.paths, bootstrap=args.bootstrap, seed=args.seed, **options)
    if args.csv is not None:
        write_summary_csv(report.summary, args.csv)
        if not report.summary.rows:
            warn(f"{args.csv}: header only; the (event, label budget) x set table needs files named "
                 "preds-<event>-lb<k>-set<j>-seed<s>-vNNN (--json gives each file's ECE)")  # fmt: skip
    if args.seeds_csv is not None:
        # Every seed's newest version, not only the winning seed of each set (no intervals needed here).
        seeds = ece_of_artifacts(args.paths, bootstrap=0, per_seed=True, **options)
        write_seed_summary_csv(seeds.seed_summary, args.seeds_csv)
    if args.json:
        out_json(report.to_json())
        return 0
    ci = bool(args.bootstrap)
    ci_head = f" {'ECE 95% CI':>17}" if ci else ""
    key_head = f"{'event':<24} {'lb':>4} {'set':>3} {'ver':>4}"
    emit(f"{key_head} {'ECE':>7}{ci_head} {'MCE':>7} {'used':>6} {'drop':>5}  path")
    for r in report.records:
        k = r.key
        event, lb, st, ver = (k.event, k.label_budget, k.set, k.version) if k else ("-", "-", "-", "-")
        cells = f"{event:<24} {lb!s:>4} {st!s:>3} {ver!s:>4}"
        if r.skipped:
            blank = f" {'':>17}" if ci else ""
            emit(f"{cells} {'skipped':>7}{blank} {'':>7} {r.rows_used:>6} {r.rows_dropped:>5}  {r.path}  ({r.reason})")
        else:
            interval = f" {_fmt_interval(r.intervals.get('ece')):>17}" if ci else ""
            emit(f"{cells} {_fmt(r.ece):>7}{interval} {_fmt(r.mce):>7} {r.rows_used:>6} {r.rows_dropped:>5}  {r.path}")
    summary = report.summary
    if summary.rows:
        means = ", ".join(f"set{s} {summary.set_means[s]:.4f}" for s in summary.sets)
        emit(f"mean ECE per set: {means}; mean of sets {summary.mean_of_sets:.4f}")
    evaluated = len(report.evaluated)
    emit(
        f"{evaluated} file(s) evaluated, {len(report.records) - evaluated} skipped; "
        f"{bins_text(args.bins, args.convention, adaptive=args.adaptive)}"
        + (f"; 95% intervals: percentile bootstrap, {args.bootstrap} resamples, seed {args.seed}" if ci else "")
    )
    if args.seeds_csv is not None:
        emit(f"wrote the per-seed summary (mean, sd over seeds) to {args.seeds_csv}")
    fewer = report.fewer_bins
    if fewer:
        least = min(r.effective_bins or 0 for r in fewer)
        emit(f"{len(fewer)} file(s) have fewer non-empty bins than requested (as few as {least}; see --json)")
    return 0


def _run_reliability(args: argparse.Namespace) -> int:
    from modelval.api.calibration import reliability

    if args.out is None and args.report_dir is None:
        args._parser.error("give --out FILE (the diagram) or --report-dir DIR (the diagram and reliability.json)")
    if args.out is not None and args.out.is_dir():  # the old meaning of --out DIR
        warn(f"--out naming a folder is deprecated and goes in the next release; use --report-dir {args.out}")
        args.report_dir, args.out = args.report_dir or args.out, None
    report = reliability(
        args.path, n_bins=args.bins, convention=args.convention, adaptive=args.adaptive, strict=args.strict,
        bootstrap=args.bootstrap, seed=args.seed, stratify=args.stratify, figure=args.out, report_dir=args.report_dir,
    )  # fmt: skip
    if args.json:
        out_json(report.to_dict())
        return 0
    bins, intervals = report.bins, report.intervals
    ece_ci = f" {_fmt_interval(intervals['ece'])}" if intervals else ""
    emit(
        f"wrote {report.figure}: ECE {bins.ece:.4f}{ece_ci}, MCE {bins.mce:.4f}, {report.rows_used} rows used, "
        f"{report.rows_dropped} dropped"
    )
    emit(
        f"{bins.effective_bins} of {bins.n_bins} bins non-empty"
        f"{' (ties are kept in one bin, empty bins dropped)' if args.adaptive else ''}; "
        f"smallest bin {bins.min_bin_count} examples; error bars: Wilson 95% intervals of each bin's accuracy"
    )
    if intervals:
        emit(f"ECE interval: percentile bootstrap, {args.bootstrap} resamples, seed {args.seed}")
    for path in report.written[1:]:
        emit(f"wrote {path}")
    return 0


def _run_temperature(args: argparse.Namespace) -> int:
    from modelval.api.calibration import recalibrate

    report = recalibrate(
        args.val, args.test, method=args.method, n_bins=args.bins, odir=tuple(args.odir) if args.odir else None,
        sweep=args.sweep, figure=args.out,
    )  # fmt: skip
    if args.json:
        out_json(report.to_dict())
        return 0
    if report.top_label:
        _print_top_label(args, report)
        return 0
    before, after = report.before, report.after
    if report.temperature is not None:
        emit(f"fitted T = {report.temperature:.4f} on {args.val} ({report.val_examples} examples)")
    else:
        emit(f"fitted {args.method} scaling on {args.val} ({report.val_examples} examples)")
    if not report.converged:
        warn("the fit did not converge (see the warning above); treat the scaled numbers with care")
    emit(f"test ({report.test_examples} examples, {args.bins} bins):")
    emit(f"  before: NLL {before['nll']:.4f}  ECE {before['ece']:.4f}  accuracy {before['accuracy']:.4f}")
    emit(f"  after:  NLL {after['nll']:.4f}  ECE {after['ece']:.4f}  accuracy {after['accuracy']:.4f}")
    for p in report.sweep:
        emit(f"  T = {p.temperature:g}: NLL {p.nll:.4f}  ECE {p.ece:.4f}")
    if report.written:
        emit(f"wrote {args.out}")
    return 0


def _print_top_label(args: argparse.Namespace, report: RecalibrationReport) -> None:
    """``temperature --method histogram|isotonic``: the calibrator fitted on --val, ECE before/after on --test."""
    before, after = report.before, report.after
    what = f"histogram binning ({args.bins} bins)" if args.method == "histogram" else "isotonic regression"
    emit(f"fitted top-label {what} on {args.val} ({report.val_examples} examples)")
    emit(f"test ({report.test_examples} examples, {args.bins} bins):")
    emit(f"  before: NLL {before['nll']:.4f}  ECE {before['ece']:.4f}  accuracy {before['accuracy']:.4f}")
    emit(f"  after:  NLL -       ECE {after['ece']:.4f}  accuracy {after['accuracy']:.4f}  (top-1 confidence only)")


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
        return f"  95% CI {_fmt_interval(intervals[name])}" if name in intervals else ""

    emit(f"  accuracy            {report.accuracy:.4f}{ci('accuracy')}")
    emit(f"  balanced accuracy   {report.balanced_accuracy:.4f}{ci('balanced_accuracy')}")
    if report.reweighted_accuracy is not None:
        emit(f"  reweighted accuracy {report.reweighted_accuracy:.4f}{ci('reweighted_accuracy')}")
    if report.shot_accuracy is not None:
        s = report.shot_accuracy
        emit(
            f"  many/medium/few     {_fmt(s['many'])} / {_fmt(s['medium'])} / {_fmt(s['few'])}"
            f"  (many > {args.many}, few < {args.few} training images)"
        )
        if intervals:
            shots = " / ".join(_fmt_interval(intervals[f"shot_{g}"]) for g in ("many", "medium", "few"))
            emit(f"  95% CI              {shots}")
    for average, m in report.averages.items():
        emit(f"  {average:<8} P {m['precision']:.4f}  R {m['recall']:.4f}  F1 {m['f1']:.4f}")
    calibration = report.calibration
    if report.ece is not None:
        interval = _fmt_ci_list(calibration.get("ece_ci95"))
        emit(f"  ECE                 {report.ece:.4f}{interval}  ({calibration['n_bins']} bins)")
        if "ece_by_group" in calibration:
            groups = " / ".join(_fmt(v) if isinstance(v, float) else "-" for v in calibration["ece_by_group"].values())
            emit(f"  ECE many/medium/few {groups}")
    if intervals:
        how = "stratified by class, " if args.stratify else ""
        emit(f"  intervals: percentile bootstrap, {how}{args.bootstrap} resamples, seed {args.seed}")
