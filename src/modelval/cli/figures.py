"""``modelval human-figures``: the human-comparison figures for several models and datasets."""

from __future__ import annotations

import argparse
from pathlib import Path

from modelval import jsonio
from modelval.atomic import write_text
from modelval.behaviour.humans import HumanComparison, compare_with_humans
from modelval.behaviour.trials import Trial
from modelval.cli._args import add_bootstrap_options, add_report_dir_option, add_resample_option
from modelval.cli._options import (
    REFERENCE_DIR_HELP,
    add_human_options,
    add_observer_options,
    add_reference_option,
    model_trials,
    observer_trials,
)
from modelval.cli._output import out
from modelval.datasets.fetch import RAW_DATA_REPOSITORY, published_path
from modelval.datasets.human_data import human_data_dir
from modelval.datasets.reference import load_reference_panel
from modelval.errors import DataError
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
            "observers per experiment. Each --decisions [LABEL=]FILE adds one observer on one experiment (read "
            "from the image names); each --model NAME is evaluated on cue-conflict. Every figure names the file "
            "behind each label (published files by their texture-vs-shape path)."
        ),
    )
    parser.add_argument("--decisions", action="append", default=[], metavar="[LABEL=]FILE", help="decision CSV")
    parser.add_argument("--model", action="append", default=[], metavar="NAME", help="registered model (cue-conflict)")
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
    if not args.decisions and not args.model:
        args._parser.error("give at least one --decisions or --model")
    observers: dict[str, dict[str, list[Trial]]] = {}
    sources: dict[str, dict[str, str]] = {}
    for spec in args.decisions:
        label, _, file = spec.rpartition("=")
        observed = observer_trials(args, file, None)
        trials, dataset, found_label = observed.trials, observed.dataset, observed.label
        name = label or found_label
        observers.setdefault(name, {})
        if dataset in observers[name]:
            raise DataError(f"two decision files for {name} on {dataset}")
        observers[name][dataset] = trials
        published = published_path(file)
        where = f"{RAW_DATA_REPOSITORY} {published}" if published else f"{Path(file).name} (not a published file)"
        sources.setdefault(name, {})[dataset] = where
    for model in args.model:
        observers.setdefault(model, {})["cue-conflict"] = model_trials(args, model, "cue-conflict")
        sources.setdefault(model, {})["cue-conflict"] = f"evaluated now: modelval model {model}"
    datasets = sorted({dataset for per in observers.values() for dataset in per})
    panels, verification = {}, {}
    for dataset in datasets:
        panels[dataset], verification[dataset] = load_reference_panel(
            human_data_dir(dataset, args.reference_dir), dataset, allow_modified=args.allow_modified_reference
        )
    comparisons: dict[str, dict[str, HumanComparison]] = {
        label: {
            dataset: compare_with_humans(
                trials,
                panels[dataset],
                n_bootstrap=args.bootstrap,
                seed=args.seed,
                resample=args.resample if dataset == "cue-conflict" else None,
                resample_observers=args.resample_observers,
                na_handling=args.na,
            )
            for dataset, trials in per.items()
        }
        for label, per in observers.items()
    }
    from modelval.behaviour.consistency import kappa_matrix
    from modelval.figures.humans import write_human_figures

    written = write_human_figures(
        observers, panels, comparisons, args.report_dir, sources=sources, humans_mode=args.humans, na_handling=args.na
    )
    payload = {
        "figures": [str(path) for path in written],
        "humans_mode": args.humans,
        "reference_data": verification,
        "sources": sources,
        "observers": {
            label: {dataset: result.to_dict() for dataset, result in per.items()} for label, per in comparisons.items()
        },
        "kappa_matrix": {
            dataset: kappa_matrix(
                {**panel.observers, **{label: per[dataset] for label, per in observers.items() if dataset in per}},
                na_handling=args.na,
            ).to_dict()
            for dataset, panel in panels.items()
        },
    }
    conditions, condition_figures = _condition_figures(args, observers, panels)
    written += condition_figures
    payload["figures"] = [str(path) for path in written]
    payload["conditions"] = conditions
    written.append(write_text(args.report_dir / "figures.json", jsonio.dumps(payload, indent=2) + "\n"))
    for path in written:
        out(f"wrote {path}")
    return 0


def _condition_figures(args, observers: dict[str, dict[str, list[Trial]]], panels) -> tuple[dict, list[Path]]:
    """Per condition: every observer against the humans (for figures.json), and model-vs-human's line plots
    of the datasets with distortion levels."""
    from modelval.behaviour.conditions import compare_by_condition, humans_by_condition
    from modelval.figures.conditions import write_lines

    rows = {
        label: {d: compare_by_condition(trials, panels[d], na_handling=args.na) for d, trials in per.items()}
        for label, per in observers.items()
    }
    parametric = [d for d in panels if len(next(r[d] for r in rows.values() if d in r)) > 1]
    lines = {d: {label: per[d] for label, per in rows.items() if d in per} for d in parametric}
    humans = {d: humans_by_condition(panels[d], na_handling=args.na) for d in parametric}
    written = write_lines(lines, humans, args.report_dir, styles={label: i for i, label in enumerate(observers)})
    payload = {label: {d: [row.to_dict() for row in found] for d, found in per.items()} for label, per in rows.items()}
    return payload, written
