"""``modelval rescore DIR``: the shape bias of saved outputs under another aggregation, label map or categories."""

from __future__ import annotations

import argparse
from pathlib import Path

from modelval.behaviour.categories import AGGREGATIONS
from modelval.cli._args import add_bootstrap_options, add_json_option, add_resample_option
from modelval.cli._output import out, out_json
from modelval.records.run_store import default_run_store


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rescore",
        help="recompute the shape bias from saved outputs (--save-outputs DIR), without the model",
        description="Read a folder written by `shape-bias --save-outputs DIR` and recompute the shape bias under "
        "another aggregation, label map or subset of the 16 categories, with the code that scores a fresh run "
        "(so the numbers equal a fresh run's exactly). --rank adds REFINED-BIAS's mean reciprocal ranks of the "
        "shape and texture labels over all outputs (Kim et al. 2026).",
    )
    parser.add_argument("folder", type=Path, metavar="DIR", help="a folder written by --save-outputs")
    parser.add_argument("--aggregation", choices=AGGREGATIONS, help="default: the saved run's")
    parser.add_argument("--label-map", type=Path, help="JSON map category -> output indices (default: the saved one)")
    parser.add_argument(
        "--categories", help="comma-separated subset of the 16 categories: decisions and conflicts among them only"
    )
    parser.add_argument("--rank", action="store_true", help="add the shape and texture mean reciprocal ranks")
    add_bootstrap_options(parser)
    add_resample_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from modelval.api.saved_outputs import rescore

    categories = [c.strip() for c in args.categories.split(",") if c.strip()] if args.categories else None
    report = rescore(
        args.folder,
        aggregation=args.aggregation,
        label_map=args.label_map,
        categories=categories,
        bootstrap=args.bootstrap,
        seed=args.seed,
        resample=args.resample,
        ranks=args.rank,
        run_store=default_run_store(),
    )
    if args.json:
        out_json(report.to_json())
        return 0
    result = report.result
    low, high = result.ci_low * 100, result.ci_high * 100
    out(f"{report.model} (saved outputs, {report.aggregation} aggregation, label map: {report.label_map})")
    out(
        f"shape bias {result.shape_bias * 100:.2f}% [{low:.2f}, {high:.2f}] ({result.ci_resampling} resampled); "
        f"shape {result.shape_hits} / texture {result.texture_hits} / other {result.other} of "
        f"{result.conflict_images} conflicts"
    )
    if len(report.categories) < 16:
        out("categories: " + ", ".join(report.categories))
    if report.ranks is not None:
        ranks = report.ranks
        out(
            f"REFINED-BIAS ranks over all outputs: shape MRR {ranks.shape_mrr:.4f}, "
            f"texture MRR {ranks.texture_mrr:.4f} ({ranks.images} conflict images)"
        )
    return 0
