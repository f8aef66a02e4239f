"""``modelval sensitivity``: which protocol choice moves a model's shape bias most."""

from __future__ import annotations

import argparse

from modelval.cli._args import add_figure_option, add_json_option
from modelval.cli._options import (
    LOADING,
    RUNNING,
    STATISTICS,
    UNFLAGGED,
    add_model_argument,
    add_settings,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json
from modelval.records.run_store import default_run_store


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval sensitivity`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "sensitivity",
        help="protocol-sensitivity card: how much resize, interpolation, normalization and aggregation move it",
        description="Varies each protocol choice alone against the reference protocol (own normalization, no "
        "resize, own interpolation, mean aggregation; interpolation under each resize, where it can act) and "
        "gives each variant its paired change of shape bias with a paired bootstrap 95% interval and a paired "
        "permutation p-value. Factors are ranked only where the data separate them. One forward pass per "
        "distinct input; the aggregations share one.",
    )
    add_model_argument(parser, required=True)
    # No protocol settings: the card varies each of them itself.
    add_settings(parser, *LOADING, *RUNNING, *STATISTICS, "permutations", quiet=UNFLAGGED)
    add_figure_option(parser, "the card as a figure")
    add_json_option(parser, "the card")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from modelval import api
    from modelval.api.protocol import format_card

    card = api.sensitivity(
        args.model, options=evaluation_options(args), model_options=model_options(args), run_store=default_run_store()
    )
    if args.out:
        from modelval.figures.sensitivity import DPI, plot_sensitivity_card
        from modelval.figures.style import save

        save(plot_sensitivity_card(card), args.out, dpi=DPI)
    if args.json:
        out_json(card.to_dict())
    else:
        out(format_card(card))
        if args.out:
            out(f"wrote {args.out}")
    return 0
