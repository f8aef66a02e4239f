"""The calibration card's figures and text (``modelval calibration card``): the diagrams of the task the card used,
and its table."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from modelval.cli._args import bins_text


def plots(args: argparse.Namespace, labels: Any, scores: dict[str, Any], card: dict[str, Any]) -> list[str]:
    """The diagrams of the task the card used, from the same arrays, bins and convention."""
    from modelval.metrics.tasks import detect_task

    folder = args.report_dir
    chosen = detect_task(labels, **scores, task=card["task"])
    if chosen.task == "binary":
        return _binary_plots(args, chosen, card, folder)
    if chosen.task == "multilabel":
        return _multilabel_plots(args, chosen, card, folder)
    return _multiclass_plots(args, chosen, card, folder)


def _multiclass_plots(args: argparse.Namespace, chosen: Any, card: dict[str, Any], folder: Path) -> list[str]:
    import numpy as np

    from modelval.figures.calibration import DPI, plot_reliability, plot_smooth_reliability
    from modelval.figures.style import save
    from modelval.metrics.calibration import reliability_bins, top1_confidences
    from modelval.metrics.estimators import smooth_reliability_curve
    from modelval.metrics.temperature import softmax

    probs = softmax(np.asarray(chosen.scores, dtype=np.float64)) if chosen.from_logits else np.asarray(chosen.scores)
    conf, correct = top1_confidences(probs, np.asarray(chosen.labels))
    bins = reliability_bins(conf, correct, card["n_bins"], convention=card["convention"])
    figure = plot_reliability(bins, title=f"Reliability: {args.path.name}", ece_interval=card.get("ece_ci95"))
    written = save(figure, folder / "reliability.png", dpi=DPI)
    curve = smooth_reliability_curve(conf, correct)
    figure = plot_smooth_reliability(curve, title=f"Smooth reliability: {args.path.name}")
    written += save(figure, folder / "smooth-reliability.png", dpi=DPI)
    return [str(p) for p in written]


def _binary_plots(args: argparse.Namespace, chosen: Any, card: dict[str, Any], folder: Path) -> list[str]:
    from modelval.figures.calibration import DPI, plot_reliability, plot_smooth_reliability
    from modelval.figures.style import save
    from modelval.metrics.binary import FRACTION_OF_POSITIVES, binary_reliability_bins, binary_smooth_reliability_curve

    bins = binary_reliability_bins(
        chosen.scores, chosen.labels, card["n_bins"], logits=chosen.from_logits, convention=card["convention"]
    )
    figure = plot_reliability(
        bins, title=f"Positive-class reliability: {args.path.name}", ece_interval=card.get("ece_ci95")
    )
    written = save(figure, folder / "reliability.png", dpi=DPI)
    figure = plot_smooth_reliability(
        binary_smooth_reliability_curve(chosen.scores, chosen.labels, logits=chosen.from_logits),
        title=f"Smooth positive-class reliability: {args.path.name}",
        target=FRACTION_OF_POSITIVES,
    )
    written += save(figure, folder / "smooth-reliability.png", dpi=DPI)
    return [str(p) for p in written]


def _multilabel_plots(args: argparse.Namespace, chosen: Any, card: dict[str, Any], folder: Path) -> list[str]:
    from modelval.figures.calibration import DPI, plot_multilabel_reliability
    from modelval.figures.style import save
    from modelval.metrics.binary import binary_reliability_bins
    from modelval.metrics.multilabel import validate_multilabel

    probs, labels = validate_multilabel(chosen.scores, chosen.labels, logits=chosen.from_logits)
    bins = [
        binary_reliability_bins(probs[:, k], labels[:, k], card["n_bins"], convention=card["convention"])
        for k in range(probs.shape[1])
    ]
    summary = {f"{average} ECE": card[average]["ece"] for average in ("macro", "micro", "weighted")}
    figure = plot_multilabel_reliability(
        bins,
        [row["label"] for row in card["labels"]],
        title=f"Per-label reliability: {args.path.name}",
        summary={name: value for name, value in summary.items() if isinstance(value, float)},
    )
    return [str(path) for path in save(figure, folder / "reliability.png", dpi=DPI)]


def _ci(card: dict[str, Any], key: str) -> str:
    interval = card.get(f"{key}_ci95")
    return f"  [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else ""


def _head(card: dict[str, Any], what: str) -> str:
    first = f"{card['path']}: {card['n']} predictions, {what}, from {card['input']}"
    return f"{first}\n  task            {card['task']} ({card['task_detection']})"


def _bins_text(card: dict[str, Any]) -> str:
    bins = bins_text(card["n_bins"], card["convention"])
    if "n_bins_rule" in card:
        bins += f", {card['n_bins_rule']}"
    return bins


def _tail(card: dict[str, Any]) -> list[str]:
    lines = []
    if "plots" in card:
        lines.append(f"  plots: {', '.join(card['plots'])}")
    if "bootstrap" in card:
        b = card["bootstrap"]
        how = "stratified by class, " if b["stratified"] else ""
        scope = ", per label" if card["task"] == "multilabel" else ""
        lines.append(f"  intervals: percentile bootstrap{scope}, {how}{b['n_resamples']} resamples, seed {b['seed']}")
    lines += [f"  note: {note}" for note in card.get("interval_notes", {}).values()]
    return lines


def format_card(card: dict[str, Any]) -> str:
    if card["task"] == "binary":
        return _format_binary(card)
    if card["task"] == "multilabel":
        return _format_multilabel(card)
    lines = [
        _head(card, f"{card['num_classes']} classes"),
        f"  accuracy        {card['accuracy']:.4f}{_ci(card, 'accuracy')}",
        f"  ECE             {card['ece']:.4f}{_ci(card, 'ece')}   {_bins_text(card)}",
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
    return "\n".join(lines + _tail(card))


def _format_binary(card: dict[str, Any]) -> str:
    lines = [
        _head(card, f"{card['n_positive']} positive"),
        f"  positive rate   {card['positive_rate']:.4f}{_ci(card, 'positive_rate')}",
        f"  accuracy        {card['accuracy']:.4f}{_ci(card, 'accuracy')}   (predicted positive iff p > 0.5)",
        f"  ECE             {card['ece']:.4f}{_ci(card, 'ece')}   positive class: fraction of positives vs p; "
        f"{_bins_text(card)}",
        f"  MCE             {card['mce']:.4f}{_ci(card, 'mce')}",
        f"  RMS             {card['rms']:.4f}{_ci(card, 'rms')}",
        f"  top-label ECE   {card['top_label_ece']:.4f}{_ci(card, 'top_label_ece')}   (confidence max(p, 1 - p); "
        "not the positive-class ECE)",
        f"  Brier           {card['brier']:.4f}   (binary, mean (p - y)^2)",
        f"  NLL             {card['nll']:.4f}   (binary cross-entropy)",
        f"  debiased L2     {card['debiased_l2']:.4f}   (Kumar et al. 2019, equal-mass bins, positive class)",
        f"  smooth ECE      {card['smece']:.4f}   (Blasiok & Nakkiran 2023, positive class)",
        f"  ECE sweep       {card['ece_sweep']['ece']:.4f}   ({card['ece_sweep']['n_bins']} equal-mass bins)",
        "  ECE by bins     " + ", ".join(f"{k}: {v:.4f}" for k, v in card["ece_by_bins"].items()),
        f"  bins            {card['effective_bins']} non-empty of {card['n_bins']}; "
        f"smallest {card['min_bin_count']} examples",
    ]
    return "\n".join(lines + _tail(card))


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else "  n/a "


def _format_multilabel(card: dict[str, Any]) -> str:
    lines = [
        _head(card, f"{card['num_labels']} labels, {card['n_positive']} positive label entries"),
        f"  bins            {_bins_text(card)}, per label (positive class: fraction of positives vs p)",
        f"  {'':<14}  {'macro':>7} {'micro':>7} {'weighted':>8}",
    ]
    for metric, name in (
        ("ece", "ECE"),
        ("mce", "MCE"),
        ("rms", "RMS"),
        ("brier", "Brier"),
        ("nll", "NLL"),
        ("debiased_l2", "debiased L2"),
        ("smece", "smooth ECE"),
    ):
        row = [_number(card[average][metric]) for average in ("macro", "micro", "weighted")]
        lines.append(f"  {name:<14}  {row[0]:>7} {row[1]:>7} {row[2]:>8}")
    width = max(5, *(len(str(row["label"])) for row in card["labels"]))
    ci_head = f" {'ECE 95% CI':>17}" if any("ece_ci95" in row for row in card["labels"]) else ""
    lines.append(
        f"  {'label':<{width}} {'pos.':>6} {'prev.':>6} {'ECE':>7}{ci_head} {'MCE':>7} {'Brier':>7} {'NLL':>7}"
    )
    for row in card["labels"]:
        interval = ""
        if "ece_ci95" in row:
            low, high = row["ece_ci95"]
            interval = f" {f'[{low:.4f}, {high:.4f}]':>17}"
        lines.append(
            f"  {row['label']!s:<{width}} {row['n_positive']:>6} {row['prevalence']:>6.3f} {row['ece']:>7.4f}"
            f"{interval} {row['mce']:>7.4f} {row['brier']:>7.4f} {row['nll']:>7.4f}"
        )
    return "\n".join(lines + _tail(card))
