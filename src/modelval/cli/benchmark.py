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
from modelval.behaviour.benchmark_cells import DEGENERATE_KAPPA
from modelval.behaviour.consistency import NA_HANDLING
from modelval.behaviour.experiments import BENCHMARK_DATASETS, experiment
from modelval.cli._options import (
    MANY_MODELS,
    UNFLAGGED,
    add_decision_specs,
    add_model_argument,
    add_settings,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json
from modelval.errors import DataError

#: Sign-flip sets of the pairwise tests: each pair costs one pass over every trial per set.
BENCHMARK_PERMUTATIONS = 2000


def _dataset_list(text: str) -> list[str]:
    """``colour,contrast`` -> the datasets (model-vs-human's names ``edge``/``silhouette`` accepted)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one dataset")
    try:
        return [experiment(name).dataset for name in names]
    except DataError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval benchmark`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "benchmark",
        # no abbreviations: ``--dataset`` must not silently become ``--datasets`` (which only a --model reads)
        allow_abbrev=False,
        help="model-vs-human's benchmark table: OOD accuracy and human-likeness on the 17 datasets, ranked",
        description=(
            "model-vs-human's benchmark (Geirhos et al., NeurIPS 2021): per dataset the OOD accuracy, accuracy "
            "difference, observed consistency and error consistency with the human observers (per condition, "
            "averaged over the conditions model-vs-human keeps), their mean over the datasets, and ranks over "
            "the observers given; the humans (every pair of observers) as the reference; every value with a 95% "
            "bootstrap interval, every rank with a rank interval, and paired tests of which observers differ. "
            "Each --decisions [LABEL[:DATASET]=]FILE is one observer on one dataset (read from the image names "
            "or the file name unless DATASET says); each --model is evaluated "
            "on --datasets (default: all 17; the 14 ImageNet-derived sets must have been fetched with "
            "`modelval data download --dataset NAME`)."
        ),
    )
    add_decision_specs(parser)
    add_model_argument(parser, many=True)
    parser.add_argument(
        "--datasets",
        type=_dataset_list,
        default=None,
        metavar="NAME[,NAME...]",
        help=f"the datasets a --model is evaluated on (default: all {len(BENCHMARK_DATASETS)})",
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
        "--degenerate-kappa",
        choices=DEGENERATE_KAPPA,
        default="one",
        help="a kappa cell where an observer is always right (or always wrong) in a condition: one (default, "
        "model-vs-human's rule: kappa = 1 when agreement is perfect, else the formula, which gives 0; reproduces its "
        "tables) or nan (left out of the means; Klein et al. 2025)",
    )
    parser.add_argument(
        "--metadata",
        type=Path,
        metavar="FILE",
        help="observers' parameters and training data, shown beside their results: a .json "
        '{"LABEL": {"parameters": N, "training_images": N, "training_data": "...", "training_kind": "..."}} or a .csv '
        "with a label column and those fields (each optional; an evaluated model's parameters are counted, and a "
        "registry entry's or timm tag's training data is used where the file says nothing)",
    )
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
    permutations = "random sign-flip sets of the paired test of each pair of observers (0: no tests)"
    add_settings(
        parser, "reference_dir", "allow_modified_reference", *MANY_MODELS, "bootstrap", "seed", "permutations",
        quiet=UNFLAGGED, help={"permutations": permutations}, permutations=BENCHMARK_PERMUTATIONS,
    )  # fmt: skip
    parser.set_defaults(handler=_run, _parser=parser)
    _register_plan_trials(subparsers)


def _register_plan_trials(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan-trials",
        help="trials a stimulus set needs to tell a difference in error consistency (Klein et al. 2025)",
        description=(
            "How many trials a new stimulus set needs so that a two-sided test tells kappa from kappa + DIFFERENCE "
            "with the given power, for two observers of the given accuracies (the large-sample variance of kappa on "
            "the 2x2 table of their correctness; Klein et al., NeurIPS 2025, plan trial counts from it). "
            "two-sample: two observer pairs (two models against the same human), each on that many trials; "
            "one-sample: one pair, kappa tested against KAPPA (e.g. 0)."
        ),
    )
    parser.add_argument(
        "--accuracy", nargs=2, type=float, required=True, metavar=("P1", "P2"), help="the two observers' accuracies"
    )
    parser.add_argument("--kappa", type=float, required=True, help="the error consistency to start from")
    parser.add_argument("--difference", type=float, required=True, help="the difference in kappa to tell")
    parser.add_argument("--power", type=float, default=0.8, help="probability of telling it (default 0.8)")
    parser.add_argument("--alpha", type=float, default=0.05, help="two-sided level of the test (default 0.05)")
    parser.add_argument("--design", choices=("two-sample", "one-sample"), default="two-sample")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_run_plan_trials, _parser=parser)


def _run_plan_trials(args: argparse.Namespace) -> int:
    from modelval.api.benchmark import plan_trials

    plan = plan_trials(
        args.accuracy, args.kappa, args.difference, power=args.power, alpha=args.alpha, design=args.design
    )
    if args.json:
        out_json(plan.to_dict())
        return 0
    other = plan.kappa + plan.difference
    if plan.design == "two-sample":
        what = f"each of two observer pairs (kappa {plan.kappa:g} and {other:g})"
    else:
        what = f"one observer pair (kappa {other:g} tested against {plan.kappa:g})"
    out(
        f"{plan.trials} trials for {what}, accuracies {plan.p1:g} and {plan.p2:g}: power {plan.power:g} at "
        f"two-sided alpha {plan.alpha:g}"
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    from modelval.api.benchmark import benchmark

    if not args.decisions and not args.model:
        args._parser.error("give at least one --decisions or --model")
    labelled: dict[str, list[str | tuple[str, str]]] = {}
    for label, dataset, file in args.decisions:
        labelled.setdefault(label, []).append((file, dataset) if dataset else file)
    report = benchmark(
        labelled,
        args.model,
        datasets=args.datasets,
        reference_dir=args.reference_dir,
        all_conditions=args.all_conditions,
        na_handling=args.na,
        brain_score=args.brain_score,
        degenerate_kappa=args.degenerate_kappa,
        allow_modified_reference=args.allow_modified_reference,
        metadata=args.metadata,
        sanity_gate=not args.no_sanity_gate,
        options=evaluation_options(args),
        model_options=model_options(args),
    )
    payload = report.to_dict()
    if args.report_dir:
        written = _write_report(report, args.report_dir)
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


def _write_report(report, folder: Path) -> list[Path]:
    """benchmark.md, benchmark.csv, the ranks with their intervals, the measures against scale (when some
    observer's metadata gives it) and, per parametric dataset, the accuracy and kappa line plots."""
    from modelval.figures.benchmark import write_scale_figure
    from modelval.figures.conditions import write_condition_figures

    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / "benchmark.md", folder / "benchmark.csv"]
    write_text(written[0], report.to_markdown() + "\n")  # whole or not at all (modelval.atomic): a full disk
    write_text(written[1], report.to_csv())  # left 0-byte files here
    written += write_condition_figures(report.table, folder)
    written += write_scale_figure(report.table, folder)
    band = report.table.uncertainty
    if band is not None and band.rank_intervals:
        from modelval.figures.benchmark import plot_benchmark_ranks
        from modelval.figures.style import REPORT_SAVE, save

        written += save(plot_benchmark_ranks(report.table), folder / "benchmark-ranks.png", pdf=True, **REPORT_SAVE)
    return written
