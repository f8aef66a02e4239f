"""``modelval compare A B``: a paired test of whether two observers (models, protocols) really differ.

The interval and the test belong to the printed difference (shape bias on cue-conflict, accuracy
elsewhere); the McNemar test of the shape-decision rate is printed as what it is, another quantity.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from modelval import jsonio
from modelval.atomic import write_text
from modelval.behaviour.conditions import ConditionPair
from modelval.behaviour.paired import PairedComparison
from modelval.behaviour.permutation import PermutationTest
from modelval.behaviour.trials import DATASETS
from modelval.cli._args import (
    add_bootstrap_options,
    add_figure_option,
    add_json_option,
    add_permutation_option,
    add_report_dir_option,
    add_resample_option,
)
from modelval.cli._options import add_observer_options, evaluation_options, model_options
from modelval.cli._output import out, out_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="paired comparison of two models or decision CSVs on the same images (bootstrap CI, permutation test)",
        description=(
            "A - B on the same images: the shape-bias difference on cue-conflict (accuracy on edges and "
            "filled-silhouettes) with a paired bootstrap 95% interval (texture images resampled on cue-conflict, "
            "images elsewhere; the same resamples for A and B) and a paired permutation test of that difference; "
            "per category the difference with its interval and an exact permutation test, Holm-adjusted. The "
            "exact McNemar test is reported under its own name: on cue-conflict it tests the shape-decision rate "
            "(shape hits / conflict images), not the shape bias. A and B are decision CSVs or registered model "
            "names (models are evaluated on cue-conflict)."
        ),
    )
    parser.add_argument("a", metavar="A", help="decision CSV or registered model name")
    parser.add_argument("b", metavar="B", help="decision CSV or registered model name")
    parser.add_argument("--dataset", choices=DATASETS, help="experiment (default: read from the image names)")
    add_bootstrap_options(parser, permutations=True)
    add_resample_option(parser)
    add_permutation_option(parser)
    add_figure_option(parser, "the per-category figure of A and B")
    add_report_dir_option(parser, "compare.json and the figure (PNG and PDF)")
    add_json_option(parser)
    add_observer_options(parser)
    parser.set_defaults(handler=run, _parser=parser)


def run(args: argparse.Namespace) -> int:
    from modelval import api

    report = api.compare(
        args.a, args.b, dataset=args.dataset, options=evaluation_options(args), model_options=model_options(args)
    )
    written = _figures(args, report.result)
    report.figures = [str(path) for path in written]
    payload = report.to_dict()
    if args.report_dir:
        written.append(write_text(args.report_dir / "compare.json", jsonio.dumps(payload, indent=2) + "\n"))
    if args.json:
        out_json(payload)
    else:
        out(format_summary(report.result))
        if len(report.conditions) > 1:
            out(format_conditions(report.conditions))
        for path in written:
            out(f"wrote {path}")
    return 0


def format_conditions(rows: list[ConditionPair]) -> str:
    """The per-condition table of ``compare`` (datasets with distortion levels)."""
    lines = [
        "  per condition (accuracy; exact McNemar p; kappa between A and B; * left out of model-vs-human's benchmark):",
        f"    {'condition':<10} {'trials':>6} {'A':>7} {'B':>7} {'A - B':>8} {'p':>8} {'kappa':>7}",
    ]
    for row in rows:
        mark = "" if row.in_benchmark else " *"
        lines.append(
            f"    {row.condition:<10} {row.n_trials:>6} {row.accuracy_a:>7.1%} {row.accuracy_b:>7.1%} "
            f"{row.difference:>+8.1%} {_p(row.p):>8} {row.error_consistency:>7.3f}{mark}"
        )
    return "\n".join(lines)


def _figures(args: argparse.Namespace, result: PairedComparison) -> list[Path]:
    if not args.out and not args.report_dir:
        return []
    from modelval.figures.humans import plot_paired_categories
    from modelval.figures.style import REPORT_SAVE, save

    written: list[Path] = []
    if args.out:  # --out FILE: the suffix picks the one format
        written += save(plot_paired_categories(result), args.out)
    if args.report_dir:  # PNG and PDF
        target = args.report_dir / f"compare-{result.dataset}.png"
        written += save(plot_paired_categories(result), target, pdf=True, **REPORT_SAVE)
    return written


def format_summary(result: PairedComparison) -> str:
    name = "shape bias" if result.statistic == "shape_bias" else "accuracy"
    a, b = result.names
    low, high = result.ci95
    unit = "conflict images" if result.dataset == "cue-conflict" else "images"
    test, mcnemar = result.test, result.mcnemar
    flips = "exact, all sign flips" if test.exact else f"{test.permutations} permutations, seed {test.seed}"
    rate = (
        "shape-decision rate (shape hits / conflict images; NOT the shape bias)"
        if result.dataset == ("cue-conflict")
        else "accuracy"
    )
    lines = [
        f"{a} vs {b} on {result.dataset} ({result.images} {unit})",
        f"  {name}: A {result.value_a:.2%}   B {result.value_b:.2%}",
        f"  difference A - B   {_pp(result.difference)}   95% CI [{_pp(low, unit=False)}, {_pp(high)}]"
        f"   (paired bootstrap, {result.n_bootstrap} resamples of {result.resampling})",
        f"  paired permutation test of the {name} difference: {_test_p(test)} ({flips})",
        f"  McNemar (exact) of the {rate}: A {mcnemar.rate_a:.2%} B {mcnemar.rate_b:.2%}, p = {_p(mcnemar.p)};"
        f" discordant: {mcnemar.a_only} only A, {mcnemar.b_only} only B"
        f" ({'shape hit vs not' if result.dataset == 'cue-conflict' else 'correct vs not'})",
        f"  per category (A, B, A - B in percentage points with 95% CI; exact permutation p, Holm-adjusted over "
        f"{sum(not math.isnan(r.p) for r in result.per_category.values())} categories):",
    ]
    for category, row in result.per_category.items():
        c_low, c_high = row.ci95
        lines.append(
            f"    {category:<9} {row.a:7.2%} {row.b:7.2%}  {_pp(row.difference, unit=False):>7}  "
            f"[{_pp(c_low, unit=False):>6}, {_pp(c_high, unit=False):>6}]"
            f"  p {_p(row.p):>7}  Holm {_p(row.p_holm):>7}"
        )
    return "\n".join(lines)


def _pp(value: float, *, unit: bool = True) -> str:
    """A difference of two percentages in percentage points, ``+3.26 pp`` (``0.00``, never ``-0.00``)."""
    from modelval.judgement.rows import signed_pp

    text = signed_pp(value)
    return text if unit else text.removesuffix(" pp")


def _test_p(test: PermutationTest) -> str:
    """``p = 0.03``, or at the Monte Carlo floor ``p < 2/(N+1) = ...`` with the exact p where it was counted."""
    if not test.at_floor:
        return f"p = {_p(test.p)}"
    text = f"p < 2/({test.permutations}+1) = {_p(test.floor)}"
    return text + (
        f"; exact p = {_p(test.exact_p)} (all 2^{test.discordant} sign flips)" if test.exact_p is not None else ""
    )


def _p(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:.2g}" if value >= 0.001 else f"{value:.1e}"
