"""``modelval sensitivity``: which protocol choice moves a model's shape bias most."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval import jsonio
from modelval.cli.shape_bias import (
    add_evaluation_options,
    add_model_options,
    add_spec_options,
    read_spec_label_map,
    spec_options,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sensitivity",
        help="protocol-sensitivity card: how much resize, interpolation, normalization and aggregation move it",
        description="Varies each protocol choice alone against the reference protocol (own normalization, no "
        "resize, own interpolation, mean aggregation) and ranks the factors by their effect on the shape bias. "
        "One forward pass per distinct input; the aggregations share one.",
    )
    parser.add_argument(
        "--model", required=True, metavar="NAME|SPEC", help="registered name or model spec (see docs/zoo.md)"
    )
    add_evaluation_options(parser)
    add_model_options(parser)
    add_spec_options(parser)
    parser.add_argument("--plot", type=Path, help="write the card as a figure (PNG or PDF)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the card")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from modelval.datasets.fetch import ensure_stimuli
    from modelval.evaluation import StimulusSet
    from modelval.models import get_entry, load_model, parse_spec
    from modelval.runtime import set_threads
    from modelval.validation.sensitivity import format_card, plot_card, sensitivity_card

    progress = not args.no_progress and sys.stderr.isatty()
    if parse_spec(args.model).is_registry:
        get_entry(args.model)  # an unknown name fails first, with suggestions
    label_map = read_spec_label_map(args)  # a bad map fails before anything is loaded
    set_threads(args.threads)
    stimuli = StimulusSet.load(
        ensure_stimuli(args.data_root, offline=args.offline, progress=progress),
        workers=args.workers,
        progress=progress,
        cache=not args.no_cache,
        allow_modified=args.allow_modified_stimuli,
    )
    loaded = load_model(
        args.model, checkpoint_dir=args.checkpoint_dir, device=args.device, offline=args.offline, progress=progress,
        imagenet_head=label_map is None, **spec_options(args),  # type: ignore[arg-type]
    )  # fmt: skip
    card = sensitivity_card(
        loaded.model,
        loaded.config.preprocess,
        stimuli,
        model_name=args.model,
        batch_size=args.batch_size,
        device=args.device,
        progress=progress,
        label_map=label_map,
    )
    if args.plot:
        plot_card(card, args.plot)
    if args.json:
        print(jsonio.dumps(card.to_dict(), indent=2))
    else:
        print(format_card(card))
        if args.plot:
            print(f"figure written to {args.plot}")
    return 0
