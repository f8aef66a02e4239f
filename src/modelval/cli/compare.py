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
from modelval.behaviour.experiments import DATASET_NAMES, get_dataset
from modelval.behaviour.paired import PairedComparison
from modelval.behaviour.permutation import PermutationTest
from modelval.cli._args import add_figure_option, add_json_option, add_report_dir_option
from modelval.cli._options import (
    MANY_MODELS,
    STATISTICS,
    UNFLAGGED,
    add_settings,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval compare`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
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
    parser.add_argument(
        "a",
        metavar="[LABEL=]A",
        type=_labelled_observer,
        help="decision CSV or registered model name; LABEL= names it in the output (default: the CSV's subj "
        "column, or the model's label)",
    )
    parser.add_argument("b", metavar="[LABEL=]B", type=_labelled_observer, help="the second observer, as A")
    parser.add_argument("--dataset", choices=DATASET_NAMES, help="experiment (default: read from the image names)")
    # Two models take no loading flags (one checkpoint or label map for both makes no sense).
    add_settings(parser, *MANY_MODELS, *STATISTICS, "permutations", quiet=UNFLAGGED)
    add_figure_option(parser, "the per-category figure of A and B")
    add_report_dir_option(parser, "compare.json and the figure (PNG and PDF)")
    add_json_option(parser)
    parser.set_defaults(handler=_run, _parser=parser)


def _run(args: argparse.Namespace) -> int:
    from modelval import api

    (label_a, a), (label_b, b) = args.a, args.b
    report = api.compare(
        a, b, dataset=args.dataset, names=(label_a, label_b), options=evaluation_options(args),
        model_options=model_options(args),
    )  # fmt: skip
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
            out(_format_conditions(report.conditions))
        for path in written:
            out(f"wrote {path}")
    return 0


def _labelled_observer(text: str) -> tuple[str | None, str]:
    """``[LABEL=]A`` -> ``(label or None, A)``, as ``--decisions LABEL=FILE`` elsewhere; an existing file whose
    name holds ``=`` is taken whole."""
    label, sep, source = text.partition("=")
    if not sep or Path(text).exists():
        return None, text
    if not label.strip() or not source:
        raise argparse.ArgumentTypeError(f"{text!r}: give LABEL=FILE (or LABEL=MODEL) with both parts, or FILE alone")
    return label.strip(), source


def _format_conditions(rows: list[ConditionPair]) -> str:
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
    """The comparison in words: the difference with its interval and test, McNemar's test, per category.

    Parameters
    ----------
    result
        The paired comparison.
    """
    name = "shape bias" if result.statistic == "shape_bias" else "accuracy"
    a, b = result.names
    low, high = result.ci95
    entry = get_dataset(result.dataset)
    unit = entry.unit
    test, mcnemar = result.test, result.mcnemar
    flips = "exact, all sign flips" if test.exact else f"{test.permutations} permutations, seed {test.seed}"
    rate = "accuracy"
    if entry.has_conflicts:
        rate = "shape-decision rate (shape hits / conflict images; NOT the shape bias)"
    over = RESAMPLED.get(result.resampling, result.resampling)
    lines = [
        f"A = {a}, B = {b} on {result.dataset} ({result.images} {unit})",
        f"  {name}: A {result.value_a:.2%}   B {result.value_b:.2%}",
        f"  difference A - B   {_pp(result.difference)}   95% CI [{_pp(low, unit=False)}, {_pp(high)}]"
        f"   (paired bootstrap over {over}, {result.n_bootstrap} resamples: the difference on other {over})",
        f"  paired permutation test of the {name} difference over these {result.images} {unit}: {_test_p(test)} "
        f"({flips}; sign flips of the {test.discordant} discordant decisions: do A and B answer these {unit} "
        "differently?)",
        f"  McNemar (exact) of the {rate}: A {mcnemar.rate_a:.2%} B {mcnemar.rate_b:.2%}, p = {_p(mcnemar.p)};"
        f" discordant: {mcnemar.a_only} only A, {mcnemar.b_only} only B"
        f" ({'shape hit vs not' if entry.has_conflicts else 'correct vs not'})",
        f"  per category (A, B, A - B in percentage points with 95% CI; exact permutation p, Holm-adjusted over "
        f"{sum(not math.isnan(r.p) for r in result.per_category.values())} categories):",
    ]
    note = disagreement_note(result)
    if note:
        lines.insert(4, f"  note: {note}")
    for category, row in result.per_category.items():
        c_low, c_high = row.ci95
        lines.append(
            f"    {category:<9} {row.a:7.2%} {row.b:7.2%}  {_pp(row.difference, unit=False):>7}  "
            f"[{_pp(c_low, unit=False):>6}, {_pp(c_high, unit=False):>6}]"
            f"  p {_p(row.p):>7}  Holm {_p(row.p_holm):>7}"
        )
    return "\n".join(lines)


#: What a resampling unit of the paired bootstrap is, in words (``--resample``).
RESAMPLED = {
    "texture": "texture images",
    "shape": "shape images",
    "stimuli": "stimuli",
    "two-way": "shape and texture images",
    "images": "images",
}


def disagreement_note(result: PairedComparison, level: float = 0.05) -> str | None:
    """One line when the interval and the permutation p seem to disagree (the interval holds 0 and p < 0.05, or
    the other way round): they answer two questions over two units, so both can be right.

    Parameters
    ----------
    result
        The paired comparison.
    level
        The test's level.
    """
    low, high = result.ci95
    p = result.test.p
    if any(math.isnan(v) for v in (low, high, p)) or result.n_bootstrap == 0:
        return None
    holds_zero = low <= 0 <= high
    if holds_zero == (p < level):
        over = RESAMPLED.get(result.resampling, result.resampling)
        unit = get_dataset(result.dataset).unit
        if holds_zero:
            return (
                f"the interval holds 0 while p = {_p(p)}: not a contradiction; p says A and B differ on these "
                f"{result.images} {unit}, the interval that the size of the difference is not pinned down over "
                f"other {over} (docs/humans.md)"
            )
        return (
            f"the interval excludes 0 while p = {_p(p)}: not a contradiction; the interval is over resampled {over}, "
            f"p over sign flips of these {result.images} {unit} (docs/humans.md)"
        )
    return None


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
