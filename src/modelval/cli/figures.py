"""``modelval human-figures``: the human-comparison figures for several models and datasets."""

from __future__ import annotations

import argparse

from modelval.cli._args import (
    add_bootstrap_options,
    add_report_dir_option,
    add_resample_option,
)
from modelval.cli._options import (
    REFERENCE_DIR_HELP,
    add_decision_specs,
    add_human_options,
    add_observer_options,
    add_reference_option,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out
from modelval.figures.style import HUMAN_MODES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "human-figures",
        help="shape-bias, accuracy, error-consistency and human-likeness figures of models against humans",
        description=(
            "Write the figures (PNG and PDF) and figures.json into --report-dir: the shape-bias matrix plot and "
            "box plot (cue-conflict, model-vs-human's orientation), accuracy by dataset (Wilson intervals), error "
            "consistency with kappa_max against the humans' mutual kappa, model-vs-human's benchmark views "
            "(accuracy difference, observed and error consistency) and the error-consistency matrix of all "
            "observers per experiment. Each --decisions [LABEL[:DATASET]=]FILE adds one observer on one experiment "
            "(read from the image names or the file name unless DATASET says); each --model NAME is evaluated on "
            "cue-conflict. Every figure names the file "
            "behind each label (published files by their texture-vs-shape path)."
        ),
    )
    add_decision_specs(parser)
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="registered model (cue-conflict), one per --model; repeat the option for each model",
    )
    parser.add_argument("--reference-dir", metavar="DIR", help=REFERENCE_DIR_HELP)
    add_report_dir_option(parser, "the figures (PNG and PDF) and figures.json", required=True)
    add_bootstrap_options(parser)
    add_resample_option(parser)
    add_human_options(parser)
    add_reference_option(parser)
    parser.add_argument(
        "--humans",
        choices=HUMAN_MODES,
        default="pooled",
        help="draw the humans' shape bias and accuracy over all their trials pooled (default, as model-vs-human) "
        "or as the mean over observers",
    )
    add_observer_options(parser)
    parser.set_defaults(handler=run, _parser=parser)


def run(args: argparse.Namespace) -> int:
    from modelval import api

    if not args.decisions and not args.model:
        args._parser.error("give at least one --decisions or --model")
    decisions = [(label, file, dataset) for label, dataset, file in args.decisions]
    report = api.human_figures(
        args.report_dir,
        decisions=decisions,
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
