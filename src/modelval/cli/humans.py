"""``modelval humans``: one observer (model or human) against the published human observers.

Accuracy, error consistency (Cohen's kappa on trial-wise correctness, Geirhos, Meding & Wichmann,
NeurIPS 2020) with each human observer, its bootstrap interval, the most kappa the observer's accuracy
allows (kappa_max), and the humans' mutual kappa (how much humans agree with each other). On
cue-conflict also the shape bias and the images where the observer chose the texture although at
least 9 of the 10 humans chose the shape.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from modelval import api, jsonio
from modelval.atomic import write_text
from modelval.behaviour.decisions import Decision
from modelval.behaviour.experiments import DATASET_NAMES, get_dataset
from modelval.behaviour.humans import HumanComparison
from modelval.cli._args import add_figure_option, add_json_option, add_report_dir_option
from modelval.cli._options import (
    ONE_MODEL,
    STATISTICS,
    UNFLAGGED,
    add_decision_specs,
    add_human_options,
    add_model_argument,
    add_settings,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json
from modelval.figures.style import HUMAN_MODES
from modelval.records.run_store import default_run_store


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval humans`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "humans",
        help="accuracy and error consistency with the published human observers; figures of several observers",
        description=(
            "One observer (a --model or a --decisions file) against the human observers of the same experiment "
            "(the 17 datasets of Geirhos et al., ICLR 2019 and NeurIPS 2021): accuracy, error consistency (Cohen's "
            "kappa on trial-wise correctness, Geirhos, Meding & Wichmann 2020) with a bootstrap 95% interval, "
            "kappa_max (the most kappa the two accuracies allow), the humans' mutual kappa (not a ceiling for "
            "models), observed consistency and the accuracy difference, over all trials and per condition "
            "(distortion level), and model-vs-human's benchmark values of the dataset. Several observers (repeat "
            "--decisions [LABEL[:DATASET]=]FILE and --model) are drawn into --report-dir as model-vs-human draws "
            "them: the shape-bias matrix and box plots, accuracy by dataset, error consistency with kappa_max, the "
            "human-likeness views and the error-consistency matrix per experiment, and figures.json."
        ),
    )
    add_decision_specs(parser)
    add_model_argument(parser, many=True)
    parser.add_argument("--dataset", choices=DATASET_NAMES, help="experiment (default: read from the image names)")
    add_human_options(parser)
    parser.add_argument(
        "--humans",
        choices=HUMAN_MODES,
        default="pooled",
        help="several observers' figures: the humans' shape bias and accuracy over all their trials pooled "
        "(default, as model-vs-human) or as the mean over observers",
    )
    add_figure_option(parser, "one observer's error-consistency figure")
    add_report_dir_option(
        parser, "humans.json and the figures (PNG and PDF; with several observers figures.json and all of "
        "model-vs-human's figures)"
    )  # fmt: skip
    add_json_option(parser)
    add_settings(parser, "reference_dir", "allow_modified_reference", *ONE_MODEL, *STATISTICS, quiet=UNFLAGGED)
    parser.set_defaults(handler=_run, _parser=parser)


def _run(args: argparse.Namespace) -> int:
    observers = len(args.decisions) + len(args.model)
    if observers == 0:
        args._parser.error("give a --model or a --decisions file (repeat them for several observers' figures)")
    if observers > 1:
        return _run_figures(args)
    if args.decisions:
        _, dataset, source = args.decisions[0]  # LABEL= names an observer among several (its figures)
        dataset = dataset or args.dataset
    else:
        source, dataset = args.model[0], args.dataset
    report = api.compare_with_humans(
        source,
        dataset=dataset,
        reference_dir=args.reference_dir,
        options=evaluation_options(args),
        model_options=model_options(args),
        resample_observers=args.resample_observers,
        na_handling=args.na,
        allow_modified_reference=args.allow_modified_reference,
        run_store=default_run_store(),
    )
    payload = report.to_dict()
    panel = report.panel
    written = _figures(args, report.comparison, report.trials, panel, report.observer)
    if args.report_dir and len(report.conditions) > 1:
        from modelval.behaviour.conditions import humans_by_condition
        from modelval.figures.conditions import write_lines

        dataset = report.comparison.dataset
        humans = {dataset: humans_by_condition(panel, na_handling=args.na)}
        written += write_lines({dataset: {report.observer: report.conditions}}, humans, args.report_dir)
    if written:
        payload["figures"] = [str(path) for path in written]
    if args.report_dir:
        written.append(write_text(args.report_dir / "humans.json", jsonio.dumps(payload, indent=2) + "\n"))
    if args.json:
        out_json(payload)
    else:
        out(_format_summary(report.comparison, report.observer, payload))
        for path in written:
            out(f"wrote {path}")
    return 0


def _run_figures(args: argparse.Namespace) -> int:
    """Several observers: model-vs-human's figures of them against the humans, into ``--report-dir``."""
    if not args.report_dir:
        args._parser.error("several observers are drawn into a folder: give --report-dir")
    if args.out or args.json:
        args._parser.error("several observers' figures go to --report-dir; --out and --json take one observer")
    if args.dataset:
        args._parser.error("several observers each name their experiment: --decisions LABEL:DATASET=FILE")
    report = api.human_figures(
        args.report_dir,
        decisions=[(label, file, dataset) for label, dataset, file in args.decisions],
        models=args.model,
        reference_dir=args.reference_dir,
        humans_mode=args.humans,
        resample_observers=args.resample_observers,
        na_handling=args.na,
        allow_modified_reference=args.allow_modified_reference,
        options=evaluation_options(args),
        model_options=model_options(args),
    )
    for path in report.written:
        out(f"wrote {path}")
    return 0


def _figures(
    args: argparse.Namespace, result: HumanComparison, trials: list[Decision], panel, label: str
) -> list[Path]:
    if not args.out and not args.report_dir:
        return []
    from modelval.figures.consistency import plot_error_consistency
    from modelval.figures.humans import plot_shape_bias_figure
    from modelval.figures.style import REPORT_SAVE, save

    written: list[Path] = []
    if args.out:  # --out FILE: the suffix picks the one format
        written += save(plot_error_consistency({label: {result.dataset: result}}), args.out)
    if args.report_dir:  # PNG and PDF
        target = args.report_dir / f"error-consistency-{result.dataset}.png"
        written += save(plot_error_consistency({label: {result.dataset: result}}), target, pdf=True, **REPORT_SAVE)
    if args.report_dir and get_dataset(result.dataset).has_conflicts:
        figure = plot_shape_bias_figure({label: trials}, panel)
        written += save(figure, args.report_dir / "shape-bias.png", pdf=True, **REPORT_SAVE)
    return written


def _format_summary(result: HumanComparison, label: str, payload: dict[str, object]) -> str:
    low, high = result.ci95
    observers = "observers resampled" if result.resample_observers else "the published observers held fixed"
    agreement = result.agreement
    lines = [
        f"{label} vs {len(result.observers)} human observers ({result.dataset}, {result.images} images)",
        f"  accuracy                {result.accuracy:.2%}   humans {result.human_accuracy['mean']:.2%} "
        f"(range {result.human_accuracy['min']:.2%}-{result.human_accuracy['max']:.2%})",
        f"  error consistency       {result.error_consistency:.3f}   95% CI [{low:.3f}, {high:.3f}] "
        f"({result.resampling} resampled, {observers})",
        f"  kappa_max               {result.kappa_max:.3f}   (the most kappa this accuracy allows against "
        "these humans)",
        f"  humans' mutual kappa    {agreement.mean:.3f}   (mean over {len(agreement.pairs)} pairs of humans; "
        f"their kappa_max {agreement.mean_kappa_max:.3f}; not a ceiling for this observer)",
        f"  observed consistency    {result.observed_consistency:.3f}   expected {result.expected_consistency:.3f}",
        f"  accuracy difference     {result.accuracy_difference:.4f}   (mean squared difference to each human)",
        f"  no answer ('na')        {result.na_handling}: {sum(result.no_response.values())} human trials "
        "without an answer",
    ]
    reference = payload.get("reference_data")
    if isinstance(reference, str) and reference != "verified":
        lines.append(f"  reference data          {reference}")
    if result.excluded_self:
        lines.append(
            f"  {result.excluded_self} is a human of the panel: left out of the comparison and of the humans' reference"
        )
    lines += _condition_lines(payload)
    shape = payload.get("shape_bias")
    if isinstance(shape, dict) and shape.get("value") is not None:
        ci = shape["ci95"]
        interval = f"[{ci[0]:.2%}, {ci[1]:.2%}]" if None not in ci else "n/a"
        lines.append(
            f"  shape bias              {shape['value']:.2%}   95% CI {interval} "
            f"({shape['ci95_resampling']} resampled); humans pooled {shape['humans_pooled']:.2%}"
        )
    despite = payload.get("texture_despite_humans")
    if isinstance(despite, dict):
        lines.append(
            f"  texture chosen although >= {despite['min_humans']} of 10 humans chose the shape: "
            f"{despite['count']} images"
        )
        for item in despite["images"][:10]:
            votes = f"{item['humans_shape']}/{item['humans']} humans: {item['shape']}"
            lines.append(f"    {item['image']}: answered {item['response']} ({votes})")
    return "\n".join(lines)


def _condition_lines(payload: dict[str, object]) -> list[str]:
    """The per-condition table (datasets with distortion levels) and model-vs-human's benchmark values."""
    rows = payload.get("conditions")
    lines: list[str] = []
    if isinstance(rows, list) and len(rows) > 1:
        lines += [
            f"  (the values above pool the {len(rows)} conditions: kappa over pooled conditions also counts the "
            "accuracy differences between them; model-vs-human compares within each condition, below)",
            "  per condition (trials matched within the condition; * left out of model-vs-human's benchmark):",
            f"    {'condition':<10} {'trials':>6} {'accuracy':>8} {'humans':>7} {'kappa':>7} {'95% CI':>16} "
            f"{'humans-humans kappa':>20} {'c_obs':>6} {'acc. diff.':>10}",
        ]
        for row in rows:
            low, high = row["error_consistency_ci95"]
            interval = "n/a" if low is None or math.isnan(low) else f"[{low:.3f}, {high:.3f}]"
            mark = "" if row["in_benchmark"] else " *"
            lines.append(
                f"    {row['condition']:<10} {row['n_trials']:>6} {row['accuracy']:>8.1%} "
                f"{row['human_accuracy_mean']:>7.1%} {row['error_consistency']:>7.3f} {interval:>16} "
                f"{row['human_human_kappa_mean']:>20.3f} {row['observed_consistency']:>6.3f} "
                f"{row['accuracy_difference']:>10.4f}{mark}"
            )
    summary = payload.get("benchmark")
    if isinstance(summary, dict):
        kept = ", ".join(summary["conditions"])
        lines.append(
            f"  benchmark (model-vs-human; conditions {kept}): OOD accuracy {summary['ood_accuracy']:.2%}, "
            f"accuracy difference {summary['accuracy_difference']:.4f}, observed consistency "
            f"{summary['observed_consistency']:.3f}, error consistency {summary['error_consistency']:.3f}"
        )
    return lines
