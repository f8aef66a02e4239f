"""``modelval benchmark``: model-vs-human's benchmark table (Geirhos et al., NeurIPS 2021) of models and decisions.

OOD accuracy, accuracy difference, observed consistency and error consistency per dataset and averaged
over the datasets, ranked over the observers given; the humans (every pair of observers) as the
reference; optionally Brain-Score's Geirhos2021 ceiled error consistency. Markdown on stdout, or
``--json`` / ``--csv``; ``--report-dir`` writes all three and model-vs-human's per-condition line plots.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval import jsonio
from modelval.atomic import write_text
from modelval.behaviour.consistency import NA_HANDLING
from modelval.behaviour.experiments import BENCHMARK_DATASETS, experiment
from modelval.cli._options import add_observer_options, evaluation_options, model_options
from modelval.cli._output import out, out_json
from modelval.errors import DataError


def dataset_list(text: str) -> list[str]:
    """``colour,contrast`` -> the datasets (model-vs-human's names ``edge``/``silhouette`` accepted)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one dataset")
    try:
        return [experiment(name).dataset for name in names]
    except DataError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "benchmark",
        help="model-vs-human's benchmark table: OOD accuracy and human-likeness on the 17 datasets, ranked",
        description=(
            "model-vs-human's benchmark (Geirhos et al., NeurIPS 2021): per dataset the OOD accuracy, accuracy "
            "difference, observed consistency and error consistency with the human observers (per condition, "
            "averaged over the conditions model-vs-human keeps), their mean over the datasets, and ranks over "
            "the observers given; the humans (every pair of observers) as the reference. Each --decisions "
            "[LABEL=]FILE is one observer on one dataset (read from the image names); each --model is evaluated "
            "on --datasets (default: all 17; the 14 ImageNet-derived sets must have been fetched with "
            "`modelval download-data --dataset NAME`)."
        ),
    )
    parser.add_argument("--decisions", action="append", default=[], metavar="[LABEL=]FILE", help="decision CSV")
    parser.add_argument("--model", action="append", default=[], metavar="NAME|SPEC", help="registered name or spec")
    parser.add_argument(
        "--datasets",
        type=dataset_list,
        default=None,
        metavar="NAME[,NAME...]",
        help=f"the datasets a --model is evaluated on (default: all {len(BENCHMARK_DATASETS)})",
    )
    parser.add_argument(
        "--reference-dir",
        help="published human raw data (default: $MODELVAL_REFERENCE_DIR, $MODELVAL_MODEL_VS_HUMAN_DIR, then the "
        "user cache)",
    )
    parser.add_argument(
        "--all-conditions",
        action="store_true",
        help="keep every condition (default: model-vs-human's benchmark leaves out the undistorted control and "
        "levels where the humans' mean accuracy is below 0.2)",
    )
    parser.add_argument(
        "--brain-score",
        action="store_true",
        help="add Brain-Score's Geirhos2021 ceiled error consistency: |mean kappa with the humans| / |the humans' "
        "mutual mean kappa|, clipped to [0, 1]",
    )
    parser.add_argument("--na", choices=NA_HANDLING, default="wrong", help="a human trial without an answer")
    parser.add_argument(
        "--no-sanity-gate",
        action="store_true",
        help="report a --model even when its cue-conflict accuracy is below the gate (the gate evaluates "
        "cue-conflict when it is not among --datasets)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON object instead of the Markdown table")
    output.add_argument("--csv", action="store_true", help="print the table as CSV (one row per observer and dataset)")
    parser.add_argument(
        "--report-dir", type=Path, help="write benchmark.json, .md, .csv and the per-condition line plots here"
    )
    add_observer_options(parser)
    parser.set_defaults(handler=run, _parser=parser)


def run(args: argparse.Namespace) -> int:
    from modelval.api.benchmark import benchmark

    if not args.decisions and not args.model:
        args._parser.error("give at least one --decisions or --model")
    labelled: dict[str, list[str]] = {}
    for spec in args.decisions:
        label, _, file = spec.rpartition("=")
        if not Path(file).is_file():
            raise DataError(f"decision file not found: {file}")
        labelled.setdefault(label, []).append(file)
    report = benchmark(
        labelled,
        args.model,
        datasets=args.datasets,
        reference_dir=args.reference_dir,
        all_conditions=args.all_conditions,
        na_handling=args.na,
        brain_score=args.brain_score,
        sanity_gate=not args.no_sanity_gate,
        options=evaluation_options(args),
        model_options=model_options(args),
    )
    payload = report.to_dict()
    if args.report_dir:
        written = write_report(report, args.report_dir)
        payload["files"] = [str(path) for path in written]
        write_text(args.report_dir / "benchmark.json", jsonio.dumps(payload, indent=2) + "\n")
    if args.json:
        out_json(payload)
    elif args.csv:
        out(report.to_csv().rstrip("\n"))
    else:
        out(report.to_markdown())
    for label in report.failed_gate:
        print(f"modelval: {label}: {report.sanity[label].message()}", file=sys.stderr)
    return 1 if report.failed_gate else 0


def write_report(report, folder: Path) -> list[Path]:
    """benchmark.md, benchmark.csv and, per parametric dataset, the accuracy and kappa line plots."""
    from modelval.figures.conditions import write_condition_figures

    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "benchmark.md", folder / "benchmark.csv"]
    write_text(written[0], report.to_markdown() + "\n")  # whole or not at all (modelval.atomic): a full disk
    write_text(written[1], report.to_csv())  # left 0-byte files here

    written += write_condition_figures(report.table, folder)
    return written
