"""``modelval calibration card|ece|reliability|temperature``: the calibration of saved predictions.

The card decides the task (binary, multiclass, multilabel) from the arrays' shapes and ranges, or takes
``--task``; it prints which it used and how it decided, and refuses an ambiguous file with the reason.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval import jsonio
from modelval.api.calibration import METHODS
from modelval.atomic import write_text
from modelval.cli._args import (
    CONVENTION_HELP,
    add_bins_option,
    add_bootstrap_options,
    add_figure_option,
    add_json_option,
    add_report_dir_option,
    bins_text,
    bounded_float,
    figure_file,
    output_file,
)
from modelval.cli._card import format_card, plots
from modelval.cli._output import fmt, fmt_interval, out, out_json, warn
from modelval.metrics.calibration import CONVENTIONS

if TYPE_CHECKING:
    from modelval.api.calibration import RecalibrationReport

ADAPTIVE_HELP = "equal-mass (quantile) bins instead of uniform ones"
STRICT_HELP = "a malformed row is an error instead of being dropped (and counted)"
TASK_CHOICES = ("auto", "binary", "multiclass", "multilabel")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval calibration`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    group = subparsers.add_parser(
        "calibration",
        help="calibration: the card of saved logits, ECE of prediction files, reliability diagrams, temperature "
        "scaling",
        description="Calibration of saved predictions (docs/metrics.md): the card of logits or probabilities, the "
        "top-1 ECE of prediction JSONL files, a reliability diagram, and recalibration (temperature scaling).",
        moved={"ACTION": "`modelval calibration FILE` is now `modelval calibration card FILE`"},
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    card = actions.add_parser(
        "card",
        help="calibration card (ECE with interval, MCE, RMS, Brier, NLL, debiased L2, smooth ECE): binary, "
        "multiclass or multilabel",
        description=(
            "FILE is .npz with arrays 'labels' and either 'logits' or 'probs', or .pt with a dict of those tensors "
            "(loaded with weights_only=True). The task follows from the shapes: scores (N,) with 0/1 labels (N,) are "
            "binary (positive-class calibration); scores (N, C) with class indices (N,) are multiclass (top-label); "
            "scores (N, L) with an (N, L) 0/1 label matrix are multilabel (per label, with macro/micro/weighted "
            "summaries; an optional 'label_names' array names the columns). An ambiguous file is refused with the "
            "reason; --task decides it. Prints every calibration number with its definition's source; --json adds "
            "the per-definition notes and the library versions."
        ),
    )
    card.add_argument("path", metavar="FILE", type=Path)
    add_bins_option(card)
    card.add_argument("--convention", choices=CONVENTIONS, default="default", help=CONVENTION_HELP)
    card.add_argument(
        "--task",
        choices=TASK_CHOICES,
        default="auto",
        help="binary, multiclass or multilabel; 'auto' (default) detects it from the shapes and ranges and "
        "refuses an ambiguous file",
    )
    add_bootstrap_options(card, stratify=True)
    add_report_dir_option(
        card,
        "calibration.json, reliability.png (bins with Wilson intervals; multilabel: one panel per label) and, "
        "for binary and multiclass, smooth-reliability.png",
    )
    add_json_option(card, "the card")
    card.set_defaults(handler=_run_calibration)
    _register_files(actions)


def _read(path: Path) -> tuple[Any, dict[str, Any], Any]:
    """``(labels, {"logits": ...} or {"probs": ...}, label_names or None)`` from FILE."""
    from modelval.errors import DataError
    from modelval.metrics.temperature import read_array_file

    content = read_array_file(path, "predictions")
    scores = [key for key in ("logits", "probs") if key in content]
    if "labels" not in content or len(scores) != 1:
        raise DataError(f"{path}: expected 'labels' and exactly one of 'logits' or 'probs', found {sorted(content)}")
    return content["labels"], {scores[0]: content[scores[0]]}, content.get("label_names")


def _run_calibration(args: argparse.Namespace) -> int:
    from modelval.api import calibration_card
    from modelval.errors import DataError, InputValidationError
    from modelval.records.provenance import file_digest

    labels, scores, names = _read(args.path)
    try:
        card = calibration_card(
            labels,
            **scores,
            task=args.task,
            n_bins=args.bins,
            convention=args.convention,
            n_bootstrap=args.bootstrap,
            seed=args.seed,
            stratify=args.stratify,
            label_names=names,
        )
        card = {"path": str(args.path), **card}
        card["provenance"] = {**card["provenance"], "input": {"path": str(args.path), "sha256": file_digest(args.path)}}
        if args.report_dir is not None:
            card["plots"] = plots(args, labels, scores, card)
    except InputValidationError as error:
        raise DataError(f"{args.path}: {error}") from error
    if args.report_dir is not None:
        card["written"] = [*card["plots"], str(args.report_dir / "calibration.json")]
        write_text(args.report_dir / "calibration.json", jsonio.dumps(card, indent=2) + "\n")
    if args.json:
        out_json(card)
        return 0
    out(format_card(card))
    return 0


def _register_files(actions: argparse._SubParsersAction) -> None:
    """``ece``, ``reliability`` (and ``temperature``): the calibration of prediction files and saved logits."""
    ece = actions.add_parser(
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
        "--csv",
        type=output_file,
        metavar="FILE",
        help="write the (event, label budget) x set table as CSV, and beside it <FILE stem>.seeds.csv: ECE mean "
        "and sd over seeds per (event, label budget, set), with each seed's value",
    )
    add_bootstrap_options(ece)
    add_json_option(ece, "a list, one object per file,")
    ece.set_defaults(handler=_run_ece)

    rel = actions.add_parser("reliability", help="reliability diagram PNG of one prediction JSONL file")
    rel.add_argument("path", metavar="PRED.jsonl", type=Path)
    rel.add_argument(
        "--out",
        type=figure_file,
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
    _register_temperature(actions)


def _register_temperature(actions: argparse._SubParsersAction) -> None:
    """``temperature``: a calibration map fitted on validation logits, judged on test logits."""
    temp = actions.add_parser(
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


def _seeds_csv_path(table: Path) -> Path:
    """Where ``--csv FILE`` puts the per-seed summary: ``<FILE stem>.seeds.csv`` beside it (ece.seeds.csv)."""
    return table.with_name(f"{table.stem}.seeds.csv")


def _run_ece(args: argparse.Namespace) -> int:
    from modelval.api.calibration import ece_of_artifacts
    from modelval.metrics.artifacts import write_seed_summary_csv, write_summary_csv

    options: dict[str, Any] = dict(
        n_bins=args.bins, convention=args.convention, adaptive=args.adaptive, strict=args.strict
    )
    report = ece_of_artifacts(args.paths, bootstrap=args.bootstrap, seed=args.seed, **options)
    seeds_csv = None
    if args.csv is not None:
        write_summary_csv(report.summary, args.csv)
        if not report.summary.rows:
            warn(f"{args.csv}: header only; the (event, label budget) x set table needs files named "
                 "preds-<event>-lb<k>-set<j>-seed<s>-vNNN (--json gives each file's ECE)")  # fmt: skip
        else:
            # Every seed's newest version, not only the winning seed of each set (no intervals needed here).
            seeds = ece_of_artifacts(args.paths, bootstrap=0, per_seed=True, **options)
            seeds_csv = write_seed_summary_csv(seeds.seed_summary, _seeds_csv_path(args.csv))
    if args.json:
        out_json(report.to_json())
        return 0
    ci = bool(args.bootstrap)
    ci_head = f" {'ECE 95% CI':>17}" if ci else ""
    key_head = f"{'event':<24} {'lb':>4} {'set':>3} {'ver':>4}"
    out(f"{key_head} {'ECE':>7}{ci_head} {'MCE':>7} {'used':>6} {'drop':>5}  path")
    for r in report.records:
        k = r.key
        event, lb, st, ver = (k.event, k.label_budget, k.set, k.version) if k else ("-", "-", "-", "-")
        cells = f"{event:<24} {lb!s:>4} {st!s:>3} {ver!s:>4}"
        if r.skipped:
            blank = f" {'':>17}" if ci else ""
            out(f"{cells} {'skipped':>7}{blank} {'':>7} {r.rows_used:>6} {r.rows_dropped:>5}  {r.path}  ({r.reason})")
        else:
            interval = f" {fmt_interval(r.intervals.get('ece')):>17}" if ci else ""
            out(f"{cells} {fmt(r.ece):>7}{interval} {fmt(r.mce):>7} {r.rows_used:>6} {r.rows_dropped:>5}  {r.path}")
    summary = report.summary
    if summary.rows:
        means = ", ".join(f"set{s} {summary.set_means[s]:.4f}" for s in summary.sets)
        out(f"mean ECE per set: {means}; mean of sets {summary.mean_of_sets:.4f}")
    evaluated = len(report.evaluated)
    out(
        f"{evaluated} file(s) evaluated, {len(report.records) - evaluated} skipped; "
        f"{bins_text(args.bins, args.convention, adaptive=args.adaptive)}"
        + (f"; 95% intervals: percentile bootstrap, {args.bootstrap} resamples, seed {args.seed}" if ci else "")
    )
    if args.csv is not None:
        out(f"wrote the (event, label budget) x set table to {args.csv}")
    if seeds_csv is not None:
        out(f"wrote the per-seed summary (mean, sd over seeds) to {seeds_csv}")
    fewer = report.fewer_bins
    if fewer:
        least = min(r.effective_bins or 0 for r in fewer)
        out(f"{len(fewer)} file(s) have fewer non-empty bins than requested (as few as {least}; see --json)")
    return 0


def _run_reliability(args: argparse.Namespace) -> int:
    from modelval.api.calibration import reliability

    if args.out is None and args.report_dir is None:
        args._parser.error("give --out FILE (the diagram) or --report-dir DIR (the diagram and reliability.json)")
    report = reliability(
        args.path, n_bins=args.bins, convention=args.convention, adaptive=args.adaptive, strict=args.strict,
        bootstrap=args.bootstrap, seed=args.seed, stratify=args.stratify, figure=args.out, report_dir=args.report_dir,
    )  # fmt: skip
    if args.json:
        out_json(report.to_dict())
        return 0
    bins, intervals = report.bins, report.intervals
    ece_ci = f" {fmt_interval(intervals['ece'])}" if intervals else ""
    out(
        f"wrote {report.figure}: ECE {bins.ece:.4f}{ece_ci}, MCE {bins.mce:.4f}, {report.rows_used} rows used, "
        f"{report.rows_dropped} dropped"
    )
    out(
        f"{bins.effective_bins} of {bins.n_bins} bins non-empty"
        f"{' (ties are kept in one bin, empty bins dropped)' if args.adaptive else ''}; "
        f"smallest bin {bins.min_bin_count} examples; error bars: Wilson 95% intervals of each bin's accuracy"
    )
    if intervals:
        out(f"ECE interval: percentile bootstrap, {args.bootstrap} resamples, seed {args.seed}")
    for path in report.written[1:]:
        out(f"wrote {path}")
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
        out(f"fitted T = {report.temperature:.4f} on {args.val} ({report.val_examples} examples)")
    else:
        out(f"fitted {args.method} scaling on {args.val} ({report.val_examples} examples)")
    if not report.converged:
        warn("the fit did not converge (see the warning above); treat the scaled numbers with care")
    out(f"test ({report.test_examples} examples, {args.bins} bins):")
    out(f"  before: NLL {before['nll']:.4f}  ECE {before['ece']:.4f}  accuracy {before['accuracy']:.4f}")
    out(f"  after:  NLL {after['nll']:.4f}  ECE {after['ece']:.4f}  accuracy {after['accuracy']:.4f}")
    for p in report.sweep:
        out(f"  T = {p.temperature:g}: NLL {p.nll:.4f}  ECE {p.ece:.4f}")
    if report.written:
        out(f"wrote {args.out}")
    return 0


def _print_top_label(args: argparse.Namespace, report: RecalibrationReport) -> None:
    """``temperature --method histogram|isotonic``: the calibrator fitted on --val, ECE before/after on --test."""
    before, after = report.before, report.after
    what = f"histogram binning ({args.bins} bins)" if args.method == "histogram" else "isotonic regression"
    out(f"fitted top-label {what} on {args.val} ({report.val_examples} examples)")
    out(f"test ({report.test_examples} examples, {args.bins} bins):")
    out(f"  before: NLL {before['nll']:.4f}  ECE {before['ece']:.4f}  accuracy {before['accuracy']:.4f}")
    out(f"  after:  NLL -       ECE {after['ece']:.4f}  accuracy {after['accuracy']:.4f}  (top-1 confidence only)")
