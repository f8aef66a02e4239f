"""``modelval calibration FILE``: the calibration card of saved logits or probabilities."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from modelval import jsonio
from modelval.cli._args import add_bootstrap_options, bin_count_or_auto
from modelval.metrics.calibration import CONVENTIONS


def register(subparsers: argparse._SubParsersAction) -> None:
    card = subparsers.add_parser(
        "calibration",
        help="calibration card (ECE with interval, MCE, RMS, Brier, NLL, classwise ECE, debiased L2, smooth ECE)",
        description=(
            "FILE is .npz with arrays 'labels' (N,) and either 'logits' or 'probs' (N, C), or .pt with a dict of "
            "those tensors (loaded with weights_only=True). Prints every calibration number with its definition's "
            "source; --json adds the per-definition notes and the library versions."
        ),
    )
    card.add_argument("path", metavar="FILE", type=Path)
    card.add_argument(
        "--bins",
        type=bin_count_or_auto,
        default=15,
        help="number of bins, or 'auto' for the cube-root rule ceil(n^(1/3)) (default 15)",
    )
    card.add_argument("--convention", choices=CONVENTIONS, default="default")
    add_bootstrap_options(card)
    card.add_argument(
        "--plot",
        type=Path,
        metavar="DIR",
        help="write reliability.png (bins with Wilson intervals) and smooth-reliability.png into DIR",
    )
    card.add_argument("--json", action="store_true", help="print the card as JSON")
    card.set_defaults(handler=_run_calibration)


def _read(path: Path) -> tuple[Any, dict[str, Any]]:
    """``(labels, {"logits": ...} or {"probs": ...})`` from FILE."""
    from modelval.errors import DataError
    from modelval.metrics.temperature import read_array_file

    content = read_array_file(path, "predictions")
    scores = [key for key in ("logits", "probs") if key in content]
    if "labels" not in content or len(scores) != 1:
        raise DataError(f"{path}: expected 'labels' and exactly one of 'logits' or 'probs', found {sorted(content)}")
    return content["labels"], {scores[0]: content[scores[0]]}


def _run_calibration(args: argparse.Namespace) -> int:
    from modelval.errors import DataError, InputValidationError
    from modelval.metrics.card import calibration_card

    labels, scores = _read(args.path)
    try:
        card = calibration_card(
            labels,
            **scores,
            n_bins=args.bins,
            convention=args.convention,
            n_bootstrap=args.bootstrap,
            seed=args.seed,
            stratify=args.stratify,
        )
    except InputValidationError as error:
        raise DataError(f"{args.path}: {error}") from error
    card = {"path": str(args.path), **card}
    if args.plot is not None:
        card["plots"] = _plots(args, labels, scores, card)
    if args.json:
        print(jsonio.dumps(card, indent=2))
        return 0
    print(_format(card))
    return 0


def _plots(args: argparse.Namespace, labels: Any, scores: dict[str, Any], card: dict[str, Any]) -> list[str]:
    import numpy as np

    from modelval.metrics.calibration import reliability_bins, top1_confidences
    from modelval.metrics.estimators import smooth_reliability_curve
    from modelval.metrics.plots import reliability_diagram, smooth_reliability_diagram
    from modelval.metrics.temperature import softmax

    probs = softmax(np.asarray(scores["logits"])) if "logits" in scores else np.asarray(scores["probs"])
    conf, correct = top1_confidences(probs, np.asarray(labels))
    bins = reliability_bins(conf, correct, card["n_bins"], convention=card["convention"])
    folder = args.plot
    folder.mkdir(parents=True, exist_ok=True)
    written = [
        reliability_diagram(
            bins, folder / "reliability.png", title=f"Reliability: {args.path.name}", ece_interval=card.get("ece_ci95")
        ),
        smooth_reliability_diagram(
            smooth_reliability_curve(conf, correct),
            folder / "smooth-reliability.png",
            title=f"Smooth reliability: {args.path.name}",
        ),
    ]
    return [str(p) for p in written]


def _ci(card: dict[str, Any], key: str) -> str:
    interval = card.get(f"{key}_ci95")
    return f"  [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else ""


def _format(card: dict[str, Any]) -> str:
    bins = f"{card['n_bins']} bins ({card['convention']})"
    if "n_bins_rule" in card:
        bins += f", {card['n_bins_rule']}"
    lines = [
        f"{card['path']}: {card['n']} predictions, {card['num_classes']} classes, from {card['input']}",
        f"  accuracy        {card['accuracy']:.4f}{_ci(card, 'accuracy')}",
        f"  ECE             {card['ece']:.4f}{_ci(card, 'ece')}   {bins}",
        f"  MCE             {card['mce']:.4f}",
        f"  RMS             {card['rms']:.4f}",
        f"  Brier           {card['brier']:.4f}   (multiclass, sum over classes)",
        f"  NLL             {card['nll']:.4f}",
        f"  classwise ECE   {card['classwise_ece']:.4f}",
        f"  debiased L2     {card['debiased_l2']:.4f}   (Kumar et al. 2019, equal-mass bins)",
        f"  smooth ECE      {card['smece']:.4f}   (Blasiok & Nakkiran 2023)",
        f"  ECE sweep       {card['ece_sweep']['ece']:.4f}   ({card['ece_sweep']['n_bins']} equal-mass bins)",
        "  ECE by bins     " + ", ".join(f"{k}: {v:.4f}" for k, v in card["ece_by_bins"].items()),
        f"  bins            {card['effective_bins']} non-empty of {card['n_bins']}; "
        f"smallest {card['min_bin_count']} examples",
    ]
    if "plots" in card:
        lines.append(f"  plots: {', '.join(card['plots'])}")
    if "bootstrap" in card:
        b = card["bootstrap"]
        how = "stratified by class, " if b["stratified"] else ""
        lines.append(f"  intervals: percentile bootstrap, {how}{b['n_resamples']} resamples, seed {b['seed']}")
    return "\n".join(lines)
