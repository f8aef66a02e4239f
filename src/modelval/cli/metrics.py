"""``modelval ece``, ``reliability``, ``temperature`` and ``metrics``: calibration and imbalance metrics."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from modelval import jsonio
from modelval.cli._args import (
    CONVENTION_HELP,
    add_bins_option,
    add_bootstrap_options,
    add_figure_option,
    add_json_option,
    add_report_dir_option,
    bounded_float,
    bounded_int,
    figure_file,
    output_file,
)
from modelval.cli._output import out as emit
from modelval.cli._output import out_json, warn
from modelval.metrics.calibration import CONVENTIONS

ADAPTIVE_HELP = "equal-mass (quantile) bins instead of uniform ones"
STRICT_HELP = "a malformed row is an error instead of being dropped (and counted)"


def _figure_or_folder(text: str) -> Path:
    """``reliability --out``: a figure file; an existing folder is the old meaning (deprecated)."""
    path = Path(text)
    return path if path.is_dir() else figure_file(text)


#: Without --num-classes, the class count comes from the data; past this it is more likely a broken
#: label than a real head (the confusion matrix alone would need K^2 x 8 bytes: 80 GB at 100,000).
MAX_DERIVED_CLASSES = 30_000


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
        choices=("temperature", "vector", "matrix", "histogram", "isotonic"),
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
    from modelval.contrib.wandb_artifacts import (
        evaluate_paths,
        summarize,
        summarize_seeds,
        write_seed_summary_csv,
        write_summary_csv,
    )

    options: dict[str, Any] = dict(
        n_bins=args.bins, convention=args.convention, adaptive=args.adaptive, strict=args.strict
    )
    records = evaluate_paths(args.paths, n_bootstrap=args.bootstrap, seed=args.seed, **options)
    if args.csv is not None:
        write_summary_csv(summarize(records), args.csv)
    if args.seeds_csv is not None:
        # Every seed's newest version, not only the winning seed of each set (no intervals needed here).
        write_seed_summary_csv(summarize_seeds(evaluate_paths(args.paths, per_seed=True, **options)), args.seeds_csv)
    if args.json:
        out_json([r.to_json() for r in records])
        return 0
    ci = bool(args.bootstrap)
    ci_head = f" {'ECE 95% CI':>17}" if ci else ""
    key_head = f"{'event':<24} {'lb':>4} {'set':>3} {'ver':>4}"
    emit(f"{key_head} {'ECE':>7}{ci_head} {'MCE':>7} {'used':>6} {'drop':>5}  path")
    for r in records:
        k = r.key
        event, lb, st, ver = (k.event, k.label_budget, k.set, k.version) if k else ("-", "-", "-", "-")
        cells = f"{event:<24} {lb!s:>4} {st!s:>3} {ver!s:>4}"
        if r.skipped:
            blank = f" {'':>17}" if ci else ""
            emit(f"{cells} {'skipped':>7}{blank} {'':>7} {r.rows_used:>6} {r.rows_dropped:>5}  {r.path}  ({r.reason})")
        else:
            interval = f" {_fmt_interval(r.intervals.get('ece')):>17}" if ci else ""
            emit(f"{cells} {_fmt(r.ece):>7}{interval} {_fmt(r.mce):>7} {r.rows_used:>6} {r.rows_dropped:>5}  {r.path}")
    summary = summarize(records)
    if summary.rows:
        means = ", ".join(f"set{s} {summary.set_means[s]:.4f}" for s in summary.sets)
        emit(f"mean ECE per set: {means}; mean of sets {summary.mean_of_sets:.4f}")
    evaluated = sum(not r.skipped for r in records)
    emit(
        f"{evaluated} file(s) evaluated, {len(records) - evaluated} skipped; bins={args.bins} "
        f"({args.convention}{', adaptive' if args.adaptive else ''})"
        + (f"; 95% intervals: percentile bootstrap, {args.bootstrap} resamples, seed {args.seed}" if ci else "")
    )
    if args.seeds_csv is not None:
        emit(f"wrote the per-seed summary (mean, sd over seeds) to {args.seeds_csv}")
    fewer = [r for r in records if r.effective_bins is not None and r.effective_bins < int(r.n_bins)]
    if fewer:
        least = min(r.effective_bins or 0 for r in fewer)
        emit(f"{len(fewer)} file(s) have fewer non-empty bins than requested (as few as {least}; see --json)")
    return 0


def _run_reliability(args: argparse.Namespace) -> int:
    from modelval.atomic import write_text
    from modelval.contrib.wandb_artifacts import read_predictions
    from modelval.errors import DataError
    from modelval.figures.calibration import reliability_diagram
    from modelval.metrics.calibration import reliability_bins
    from modelval.metrics.estimators import resolve_n_bins

    if args.out is None and args.report_dir is None:
        args._parser.error("give --out FILE (the diagram) or --report-dir DIR (the diagram and reliability.json)")
    if args.out is not None and args.out.is_dir():  # the old meaning of --out DIR
        warn(f"--out naming a folder is deprecated and goes in the next release; use --report-dir {args.out}")
        args.report_dir, args.out = args.report_dir or args.out, None
    data = read_predictions(args.path, strict=args.strict)
    if data.skipped:
        raise DataError(f"{args.path}: cannot draw a reliability diagram: {data.reason}")
    args.bins, _ = resolve_n_bins(args.bins, data.rows_used)
    correct = data.labels == data.preds
    bins = reliability_bins(data.conf, correct, args.bins, adaptive=args.adaptive, convention=args.convention)
    intervals = None
    if args.bootstrap:
        from modelval.metrics.bootstrap import bootstrap_json, calibration_intervals, intervals_json

        intervals = calibration_intervals(
            data.conf,
            correct,
            args.bins,
            labels=data.labels,
            adaptive=args.adaptive,
            convention=args.convention,
            n_resamples=args.bootstrap,
            seed=args.seed,
            stratify=args.stratify,
        )
    figures = [path for path in (args.out, args.report_dir and args.report_dir / f"{args.path.stem}-reliability.png")]
    written = [
        reliability_diagram(
            bins,
            path,
            title=f"Reliability: {args.path.name}",
            ece_interval=intervals["ece"].as_list() if intervals else None,
        )
        for path in figures
        if path is not None
    ]
    out = written[0]
    result: dict[str, Any] = {"path": str(args.path), "out": str(out), **bins.summary()}
    if intervals:
        result.update(intervals_json(intervals))
        result["bootstrap"] = bootstrap_json(intervals)
    result.update(rows_used=data.rows_used, rows_dropped=data.rows_dropped, bins=bins.as_records())
    if args.report_dir is not None:
        written.append(write_text(args.report_dir / "reliability.json", jsonio.dumps(result, indent=2) + "\n"))
    result["written"] = [str(path) for path in written]
    if args.json:
        out_json(result)
        return 0
    ece_ci = f" {_fmt_interval(intervals['ece'])}" if intervals else ""
    emit(
        f"wrote {out}: ECE {bins.ece:.4f}{ece_ci}, MCE {bins.mce:.4f}, {data.rows_used} rows used, "
        f"{data.rows_dropped} dropped"
    )
    emit(
        f"{bins.effective_bins} of {bins.n_bins} bins non-empty"
        f"{' (ties are kept in one bin, empty bins dropped)' if args.adaptive else ''}; "
        f"smallest bin {bins.min_bin_count} examples; error bars: Wilson 95% intervals of each bin's accuracy"
    )
    if intervals:
        emit(f"ECE interval: percentile bootstrap, {args.bootstrap} resamples, seed {args.seed}")
    for path in written[1:]:
        emit(f"wrote {path}")
    return 0


def _run_temperature(args: argparse.Namespace) -> int:
    from modelval.metrics.estimators import brier_score, negative_log_likelihood
    from modelval.metrics.temperature import fit_scaling, load_logits_file, softmax, temperature_sweep

    val_z, val_y = load_logits_file(args.val)
    test_z, test_y = load_logits_file(args.test)
    if val_z.shape[1] != test_z.shape[1]:
        from modelval.errors import DataError

        raise DataError(f"--val has {val_z.shape[1]} classes but --test has {test_z.shape[1]}")
    if args.method in ("histogram", "isotonic"):
        return _run_top_label_calibrator(args, val_z, val_y, test_z, test_y)
    scaler = fit_scaling(val_z, val_y, method=args.method, odir=tuple(args.odir) if args.odir else None)

    def scores(logits: np.ndarray) -> dict[str, float | int]:
        # NLL from the exact log-softmax of the logits (as torch.nn.functional.cross_entropy), never from
        # clipped probabilities: a true-class probability that underflows still gets its exact -log p.
        probs = softmax(logits)
        return {
            "nll": negative_log_likelihood(logits, test_y, logits=True),
            "brier": brier_score(probs, test_y),
            **_binned_scores(probs.max(axis=1), probs.argmax(axis=1) == test_y, args.bins),
        }

    before = scores(test_z)
    after = scores(scaler.transform(test_z))
    sweep = temperature_sweep(test_z, test_y, args.sweep, n_bins=args.bins) if args.sweep else []
    result: dict[str, Any] = {
        "method": args.method,
        "temperature": scaler.temperature if args.method == "temperature" else None,
        "converged": scaler.converged,
        "odir": list(scaler.odir) if args.odir else None,
        "n_bins": args.bins,
        "before": before,
        "after": after,
        "sweep": [vars(p) for p in sweep],
    }
    if args.out is not None and sweep:
        from modelval.figures.calibration import ece_vs_temperature

        ece_vs_temperature(
            [p.temperature for p in sweep], [p.ece for p in sweep], args.out, fitted=result["temperature"]
        )
        result["written"] = [str(args.out)]
    if args.json:
        out_json(result)
        return 0
    if result["temperature"] is not None:
        emit(f"fitted T = {result['temperature']:.4f} on {args.val} ({len(val_y)} examples)")
    else:
        emit(f"fitted {args.method} scaling on {args.val} ({len(val_y)} examples)")
    if not scaler.converged:
        warn("the fit did not converge (see the warning above); treat the scaled numbers with care")
    emit(f"test ({len(test_y)} examples, {args.bins} bins):")
    emit(f"  before: NLL {before['nll']:.4f}  ECE {before['ece']:.4f}  accuracy {before['accuracy']:.4f}")
    emit(f"  after:  NLL {after['nll']:.4f}  ECE {after['ece']:.4f}  accuracy {after['accuracy']:.4f}")
    for p in sweep:
        emit(f"  T = {p.temperature:g}: NLL {p.nll:.4f}  ECE {p.ece:.4f}")
    if "written" in result:
        emit(f"wrote {args.out}")
    return 0


def _run_top_label_calibrator(
    args: argparse.Namespace, val_z: np.ndarray, val_y: np.ndarray, test_z: np.ndarray, test_y: np.ndarray
) -> int:
    """``temperature --method histogram|isotonic``: fit on --val, report ECE before/after on --test."""
    from modelval.metrics.calibration import top1_confidences
    from modelval.metrics.calibrators import HistogramBinningCalibrator, IsotonicCalibrator, calibrate_top_label
    from modelval.metrics.estimators import brier_score, negative_log_likelihood
    from modelval.metrics.temperature import softmax

    calibrator: HistogramBinningCalibrator | IsotonicCalibrator = (
        HistogramBinningCalibrator(args.bins) if args.method == "histogram" else IsotonicCalibrator()
    )
    calibrator.fit_probs(softmax(val_z), val_y)
    test_p = softmax(test_z)
    conf, correct = top1_confidences(test_p, test_y)
    calibrated, _ = calibrate_top_label(calibrator, test_p)
    no_nll = jsonio.Undefined(
        "a top-label calibrator maps only the top-1 confidence; it gives no distribution over the classes"
    )
    before = {
        "nll": negative_log_likelihood(test_z, test_y, logits=True),
        "brier": brier_score(test_z, test_y, logits=True),
        **_binned_scores(conf, correct, args.bins),
    }
    after = {"nll": no_nll, "brier": no_nll, **_binned_scores(calibrated, correct, args.bins)}
    result = {"method": args.method, "n_bins": args.bins, "before": before, "after": after}
    if args.json:
        out_json(result)
        return 0
    what = f"histogram binning ({args.bins} bins)" if args.method == "histogram" else "isotonic regression"
    emit(f"fitted top-label {what} on {args.val} ({len(val_y)} examples)")
    emit(f"test ({len(test_y)} examples, {args.bins} bins):")
    emit(f"  before: NLL {before['nll']:.4f}  ECE {before['ece']:.4f}  accuracy {before['accuracy']:.4f}")
    emit(f"  after:  NLL -       ECE {after['ece']:.4f}  accuracy {after['accuracy']:.4f}  (top-1 confidence only)")
    return 0


def _binned_scores(confidences: np.ndarray, correct: np.ndarray, n_bins: int) -> dict[str, float | int]:
    """The binned calibration numbers of ``temperature``'s before/after reports, and the accuracy."""
    from modelval.metrics.calibration import reliability_bins

    bins = reliability_bins(confidences, correct, n_bins)
    return {
        "ece": bins.ece,
        "mce": bins.mce,
        "rms": bins.rms,
        "effective_bins": bins.effective_bins,
        "min_bin_count": bins.min_bin_count,
        "accuracy": float(np.mean(correct)),
    }


def _calibration_of_rows(args: argparse.Namespace, data: Any, counts: np.ndarray | None) -> dict[str, Any]:
    """ECE/MCE/RMS (with intervals) and ECE per many/medium/few group, when every used row has a valid ``conf``."""
    from modelval.metrics.calibration import reliability_bins
    from modelval.metrics.estimators import ece_by_group, resolve_n_bins
    from modelval.metrics.imbalance import shot_groups

    rows = data.rows_used
    valid = int(np.isfinite(data.conf).sum())
    if valid != rows:
        why = f"only {valid} of {rows} rows carry a valid conf (a number in [0, 1])"
        return {"ece": jsonio.Undefined(f"no calibration numbers: {why}")}
    n_bins, _ = resolve_n_bins(args.bins, rows)
    correct = data.labels == data.preds
    bins = reliability_bins(data.conf, correct, n_bins)
    out: dict[str, Any] = {**bins.summary()}
    out.pop("adaptive")
    if args.bootstrap:
        from modelval.metrics.bootstrap import calibration_intervals

        intervals = calibration_intervals(
            data.conf, correct, n_bins, labels=data.labels, n_resamples=args.bootstrap, seed=args.seed,
            stratify=args.stratify,
        )  # fmt: skip
        out.update({f"{name}_ci95": intervals[name].as_list() for name in ("ece", "mce", "rms")})
    if counts is not None:
        groups = shot_groups(counts, many_threshold=args.many, few_threshold=args.few)
        per_group = ece_by_group(
            data.conf, correct, data.labels, {g: getattr(groups, g) for g in ("many", "medium", "few")}, n_bins
        )
        out["ece_by_group"] = {
            name: result.ece if result.ece is not None else jsonio.Undefined(result.reason or "no examples")
            for name, result in per_group.items()
        }
    return out


def _run_metrics(args: argparse.Namespace) -> int:
    from modelval.contrib.wandb_artifacts import read_predictions
    from modelval.errors import DataError
    from modelval.metrics.classification import MAX_CONFUSION_CELLS, confusion_matrix, precision_recall_f1
    from modelval.metrics.imbalance import (
        load_class_weights,
        load_train_counts,
        per_class_accuracy,
        reweighted_accuracy,
        shot_accuracy,
    )

    data = read_predictions(args.path, strict=args.strict, require_conf=False)
    if data.skipped:
        raise DataError(f"{args.path}: no usable rows: {data.reason}")
    weights = load_class_weights(args.class_weights, args.num_classes) if args.class_weights else None
    counts = load_train_counts(args.train_counts) if args.train_counts else None
    k = (
        args.num_classes
        or (len(weights) if weights is not None else None)
        or (len(counts) if counts is not None else None)
    )
    if not k:
        k = int(max(data.labels.max(), data.preds.max()) + 1)
        if k > MAX_DERIVED_CLASSES:
            raise DataError(
                f"{args.path}: the largest class index is {k - 1}, which would make {k} classes (a {k} x {k} "
                f"confusion matrix); if that is right, say so with --num-classes {k}, else check the labels"
            )
    if counts is not None and len(counts) != k:
        raise DataError(f"{args.train_counts}: {len(counts)} training counts but {k} classes")
    y, p = data.labels, data.preds
    if max(y.max(), p.max()) >= k:
        raise DataError(f"{args.path}: class {int(max(y.max(), p.max()))} found but there are only {k} classes")
    per_class = per_class_accuracy(y, p, k)
    out: dict[str, Any] = {
        "path": str(args.path),
        "rows_used": data.rows_used,
        "rows_dropped": data.rows_dropped,
        "num_classes": k,
        "accuracy": float(np.mean(y == p)),
        "balanced_accuracy": float(np.nanmean(per_class)),
    }
    if weights is not None:
        out["reweighted_accuracy"] = reweighted_accuracy(y, p, weights)
    if counts is not None:
        out["shot_accuracy"] = shot_accuracy(y, p, counts, many_threshold=args.many, few_threshold=args.few)
    intervals: dict[str, Any] = {}
    if args.bootstrap:
        from modelval.metrics.bootstrap import accuracy_intervals, bootstrap_json

        intervals = accuracy_intervals(
            y,
            p,
            k,
            class_weights=weights,
            train_counts=counts,
            many_threshold=args.many,
            few_threshold=args.few,
            n_resamples=args.bootstrap,
            seed=args.seed,
            stratify=args.stratify,
        )
        for name in ("accuracy", "balanced_accuracy", "reweighted_accuracy"):
            if name in intervals:
                out[f"{name}_ci95"] = intervals[name].as_list()
        if counts is not None:
            out["shot_accuracy_ci95"] = {g: intervals[f"shot_{g}"].as_list() for g in ("many", "medium", "few")}
        out["bootstrap"] = bootstrap_json(intervals)
    out.update(_calibration_of_rows(args, data, counts))
    for average in ("macro", "micro", "weighted"):
        prf = precision_recall_f1(y, p, average=average, num_classes=k, zero_division=0)
        out[average] = {"precision": prf.precision, "recall": prf.recall, "f1": prf.f1}
    per = precision_recall_f1(y, p, average=None, num_classes=k, zero_division=0)
    per_precision, per_recall, per_f1 = (np.asarray(v) for v in (per.precision, per.recall, per.f1))
    out["per_class"] = [
        {
            "class": c,
            "support": int(per.support[c]),
            "accuracy": None if math.isnan(per_class[c]) else float(per_class[c]),
            "precision": float(per_precision[c]),
            "recall": float(per_recall[c]),
            "f1": float(per_f1[c]),
        }
        for c in range(k)
    ]
    if k * k <= MAX_CONFUSION_CELLS:
        out["confusion_matrix"] = confusion_matrix(y, p, k).tolist()
    else:  # the per-class numbers above need no matrix; a 74.5 GiB one is never attempted
        out["confusion_matrix"] = jsonio.Undefined(f"{k} classes: a {k} x {k} matrix is not built")
    if args.json:
        out_json(out)
        return 0
    emit(f"{args.path}: {data.rows_used} rows used, {data.rows_dropped} dropped, {k} classes")

    def ci(name: str) -> str:
        return f"  95% CI {_fmt_interval(intervals[name])}" if name in intervals else ""

    emit(f"  accuracy            {out['accuracy']:.4f}{ci('accuracy')}")
    emit(f"  balanced accuracy   {out['balanced_accuracy']:.4f}{ci('balanced_accuracy')}")
    if "reweighted_accuracy" in out:
        emit(f"  reweighted accuracy {out['reweighted_accuracy']:.4f}{ci('reweighted_accuracy')}")
    if "shot_accuracy" in out:
        s = out["shot_accuracy"]
        emit(
            f"  many/medium/few     {_fmt(s['many'])} / {_fmt(s['medium'])} / {_fmt(s['few'])}"
            f"  (many > {args.many}, few < {args.few} training images)"
        )
        if intervals:
            shots = " / ".join(_fmt_interval(intervals[f"shot_{g}"]) for g in ("many", "medium", "few"))
            emit(f"  95% CI              {shots}")
    for average in ("macro", "micro", "weighted"):
        m = out[average]
        emit(f"  {average:<8} P {m['precision']:.4f}  R {m['recall']:.4f}  F1 {m['f1']:.4f}")
    if isinstance(out.get("ece"), float):
        emit(f"  ECE                 {out['ece']:.4f}{_fmt_ci_list(out.get('ece_ci95'))}  ({out['n_bins']} bins)")
        if "ece_by_group" in out:
            groups = " / ".join(_fmt(v) if isinstance(v, float) else "-" for v in out["ece_by_group"].values())
            emit(f"  ECE many/medium/few {groups}")
    if intervals:
        how = "stratified by class, " if args.stratify else ""
        emit(f"  intervals: percentile bootstrap, {how}{args.bootstrap} resamples, seed {args.seed}")
    return 0
