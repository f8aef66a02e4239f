"""``modelval baseline save|compare``: the regression check after preprocessing changes."""

from __future__ import annotations

import argparse
from pathlib import Path

from modelval.api.pipeline import run_model
from modelval.cli._args import add_json_option, bounded_float, bounded_int, output_file
from modelval.cli._options import (
    NORMALIZATION_HELP,
    RESIZE_HELP,
    add_evaluation_options,
    add_model_options,
    add_protocol_options,
    add_spec_options,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json
from modelval.preprocessing import NORMALIZATION_CHOICES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "baseline",
        help="save per-image decisions as a baseline, or compare a fresh run with one",
        description="Regression baselines: per-image decisions and top-5 category probabilities.",
    )
    actions = parser.add_subparsers(dest="baseline_action", required=True, metavar="ACTION")

    save = actions.add_parser("save", help="evaluate a model and store its per-image decisions")
    save.add_argument("--model", required=True, metavar="NAME|SPEC", help="registered name or model spec")
    add_protocol_options(save)
    save.add_argument("--out", type=output_file, required=True, metavar="FILE.json", help="the baseline file to write")
    add_evaluation_options(save)
    add_model_options(save)
    add_spec_options(save)
    save.set_defaults(handler=run_save)

    compare = actions.add_parser(
        "compare",
        help="re-run a baseline's evaluation and report flipped decisions",
        description="Re-runs the baseline's model with its settings (or the overrides given) and reports "
        "flipped decisions, the shape-bias delta and the largest probability shifts. Exit status 1 when a "
        "threshold is exceeded.",
    )
    compare.add_argument("baseline", type=Path)
    compare.add_argument(
        "--model",
        metavar="NAME|SPEC",
        help="the model to run (default: the baseline's own; a baseline whose model runs code, file.py:fn, "
        "module:fn or hub:, needs it given here again or --trust-repo)",
    )
    compare.add_argument(
        "--normalization", choices=NORMALIZATION_CHOICES, help="override the baseline's; " + NORMALIZATION_HELP
    )
    compare.add_argument("--resize", choices=("none", "256"), help="override the baseline's; " + RESIZE_HELP)
    compare.add_argument(
        "--max-flips",
        type=bounded_int(0, 10**9, "flipped decisions allowed are 0 or more"),
        default=0,
        help="flipped decisions allowed (default 0)",
    )
    compare.add_argument(
        "--max-shape-bias-delta",
        type=bounded_float(0, 1, "a shape-bias change is 0 to 1 (a fraction: 0.005 = 0.5 pp)"),
        default=0.005,
        help="allowed |shape-bias change|, as a fraction (default 0.005 = 0.5 percentage points)",
    )
    compare.add_argument(
        "--max-probability-shift",
        type=bounded_float(0, 1, "a probability change is 0 to 1"),
        help="allowed largest change of a category probability (0 to 1)",
    )
    add_json_option(compare, "the comparison")
    add_evaluation_options(compare)
    add_model_options(compare)
    add_spec_options(compare)  # a spec's --checkpoint / --label-map / overrides are not stored: give them again
    compare.set_defaults(handler=run_compare)


def run_save(args: argparse.Namespace) -> int:
    from modelval.judgement.baseline import baseline_from_evaluation, save_baseline

    evaluation = run_model(args.model, options=evaluation_options(args), model_options=model_options(args)).evaluation
    baseline = baseline_from_evaluation(evaluation, normalization=args.normalization, resize=args.resize)
    save_baseline(args.out, baseline)
    result = evaluation.result
    out(
        f"baseline of {args.model} ({args.normalization} normalization, resize {args.resize}) written to {args.out}: "
        f"{len(evaluation.decisions)} images, shape bias {result.shape_bias:.4f}"
    )
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from modelval.judgement.baseline import baseline_model, compare_to_baseline, load_baseline, record_comparison
    from modelval.records.run_store import default_run_store

    baseline = load_baseline(args.baseline)
    model = baseline_model(baseline, args.baseline, model=args.model, trust_code=args.trust_repo)
    options = evaluation_options(
        args,
        normalization=args.normalization or str(baseline["normalization"]),
        resize=args.resize or str(baseline.get("resize", "none")),
        aggregation=str(baseline.get("aggregation", "mean")),
    )
    run = run_model(model, options=options, model_options=model_options(args))
    comparison = compare_to_baseline(
        baseline,
        run.evaluation,
        max_flips=args.max_flips,
        max_shape_bias_delta=args.max_shape_bias_delta,
        max_probability_shift=args.max_probability_shift,
    )
    record_comparison(
        comparison, run.evaluation, run.provenance(), label=f"baseline {args.baseline}", run_store=default_run_store()
    )
    if args.json:
        out_json(comparison.to_dict())
    else:
        out(comparison.format())
    return 0 if comparison.passed else 1
