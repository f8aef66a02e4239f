"""``modelval shape-bias``: evaluate a registered model, or recompute from a decision CSV."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval import jsonio
from modelval.behaviour.categories import AGGREGATIONS
from modelval.behaviour.cue_conflict import EXPECTED_CONFLICTS, EXPECTED_IMAGES
from modelval.behaviour.decisions import read_decisions, write_decisions
from modelval.behaviour.shape_bias import compute_shape_bias
from modelval.cli._args import (
    batch_size,
    bootstrap_resamples,
    channel_values,
    device_name,
    input_size,
    thread_count,
    workers,
)
from modelval.datasets.cache import NO_CACHE_ENV
from modelval.datasets.fetch import ensure_stimuli
from modelval.evaluation import DEFAULT_BATCH_SIZE
from modelval.preprocessing import NORMALIZATION_CHOICES
from modelval.validation.expected import expected_for
from modelval.validation.reports import ReportRow, format_report, plot_per_category
from modelval.validation.sanity import SANITY_THRESHOLD, VERDICT, sanity_check


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by every command that loads a registered model."""
    parser.add_argument("--checkpoint-dir", help="weight cache (default: $MODELVAL_CHECKPOINT_DIR or checkpoints/)")
    parser.add_argument(
        "--offline",
        action="store_true",
        default=None,
        help="never download; fail with the fetch command if weights are not cached",
    )
    parser.add_argument("--device", type=device_name, default="auto", help="auto|cpu|cuda[:N]|mps (default: auto)")


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    """Options of ``--model SPEC``: weights, label map, preprocessing overrides, trust."""
    from modelval.preprocessing import INTERPOLATIONS

    group = parser.add_argument_group("model spec (see docs/models.md)")
    group.add_argument("--checkpoint", type=Path, help="state dict to load into the model (weights_only, strict)")
    group.add_argument(
        "--label-map", type=Path, help="JSON: each of the 16 categories -> output indices (heads not ImageNet-1k)"
    )
    group.add_argument("--mean", type=channel_values, help="override the normalization mean, e.g. 0.5,0.5,0.5")
    group.add_argument("--std", type=channel_values, help="override the normalization std, e.g. 0.5,0.5,0.5")
    group.add_argument("--interpolation", choices=INTERPOLATIONS, help="override the resize interpolation")
    group.add_argument("--input-size", type=input_size, help="resize the stimuli to this square size (pixels)")
    group.add_argument(
        "--trust-repo", action="store_true", help="allow hub: specs to run the repository's code in this process"
    )


def spec_options(args: argparse.Namespace) -> dict[str, object]:
    """``load_model`` keyword arguments from the spec options (absent ones: defaults)."""
    from modelval.preprocessing import PreprocessOverrides

    overrides = PreprocessOverrides(
        mean=getattr(args, "mean", None),
        std=getattr(args, "std", None),
        interpolation=getattr(args, "interpolation", None),
        input_size=getattr(args, "input_size", None),
    )
    return {
        "overrides": overrides,
        "checkpoint": getattr(args, "checkpoint", None),
        "trust_repo": getattr(args, "trust_repo", False),
    }


def read_spec_label_map(args: argparse.Namespace):
    from modelval.behaviour.label_map import read_label_map

    path = getattr(args, "label_map", None)
    return read_label_map(path) if path is not None else None


def add_evaluation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-root", help="cue-conflict folder (default: $MODELVAL_DATA_ROOT or the user cache)")
    parser.add_argument("--batch-size", type=batch_size, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--workers", type=workers, default=0, help="decoding worker processes (default: 0)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help=f"decode the PNGs instead of using the per-user decode cache (or set {NO_CACHE_ENV}=1)",
    )
    parser.add_argument(
        "--threads",
        type=thread_count,
        default="auto",
        help="torch CPU threads: a number, or auto = CPUs not busy with other processes (default: auto)",
    )
    parser.add_argument(
        "--amp",
        choices=("bf16",),
        default=None,
        help="bfloat16 autocast for the forward (also on CPU); reports decisions flipped against an fp32 run",
    )
    parser.add_argument("--channels-last", action="store_true", help="NHWC memory layout (faster on recent GPUs)")
    parser.add_argument(
        "--allow-modified-stimuli",
        action="store_true",
        help="evaluate a stimulus folder that differs from the published manifest, or a subset of it "
        "(the output says what differs)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "shape-bias",
        help="cue-conflict shape bias of a model, or of a published decision CSV",
        description=(
            "Shape bias (Geirhos et al., ICLR 2019): shape hits / (shape + texture hits) over the 1200 "
            "cue-conflict images. Either evaluate --model on the stimuli, or recompute from --decisions."
        ),
    )
    parser.add_argument("--decisions", type=Path, help="per-image decision CSV (published raw-data format)")
    parser.add_argument(
        "--model", help="registry name (`modelval models`) or spec: timm:, hf:, torchvision:, hub:, file.py:fn, ..."
    )
    parser.add_argument("--normalization", choices=NORMALIZATION_CHOICES, default="model")
    parser.add_argument(
        "--resize",
        choices=("none", "256"),
        default="none",
        help="none: feed the 224 px stimuli as they are (official protocol); 256: resize 256, center-crop 224",
    )
    parser.add_argument("--aggregation", choices=AGGREGATIONS, default="mean")
    add_evaluation_options(parser)
    add_model_options(parser)
    add_spec_options(parser)
    parser.add_argument("--decisions-out", type=Path, help="write per-image decisions (raw-data CSV format)")
    parser.add_argument("--plot", type=Path, help="write the per-category shape-bias plot (PNG)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--no-sanity-gate",
        action="store_true",
        help=f"report the shape bias even when cue-conflict accuracy is below {SANITY_THRESHOLD:.0%}",
    )
    parser.add_argument(
        "--bootstrap", type=bootstrap_resamples, default=1000, help="bootstrap resamples for the 95%% interval"
    )
    parser.add_argument("--seed", type=int, default=0)
    # --model alone evaluates; with --decisions it only names the observer (for its expected value).
    parser.set_defaults(handler=run, _parser=parser)


def run(args: argparse.Namespace) -> int:
    if args.decisions is None and not args.model:
        args._parser.error("one of --model or --decisions is required")
    if args.decisions is not None:
        decisions = read_decisions(args.decisions)
        expected = expected_for(args.model) if args.model else None
        label = expected.label if expected else (args.model or args.decisions.stem)
        result = compute_shape_bias(decisions, n_bootstrap=args.bootstrap, seed=args.seed)
        if len(decisions) != EXPECTED_IMAGES:
            print(
                f"modelval: warning: {args.decisions} covers {len(decisions)} of the {EXPECTED_IMAGES} cue-conflict "
                f"images ({result.conflict_images} of {EXPECTED_CONFLICTS} conflicts); the result is not comparable "
                "with published values",
                file=sys.stderr,
            )
        row = ReportRow(args.model or label, label, "decision file", "n/a", result, expected)
        extra: dict[str, object] = {"decisions_file": str(args.decisions), "images": len(decisions)}
    else:
        row, extra, decisions = _evaluate(args)
    if args.decisions_out and args.decisions is None:
        write_decisions(args.decisions_out, decisions, subject=row.model)
    sanity = sanity_check(row.result)
    gate = not args.no_sanity_gate and not sanity.passed
    extra["sanity"] = sanity.to_dict()
    if gate:
        extra["verdict"] = VERDICT
    if args.plot:
        plot_per_category({f"{row.label} ({row.normalization})": row.result}, args.plot)
    if args.json:
        payload = {**row.to_dict(), **extra}
        if row.result.shape_hits + row.result.texture_hits == 0:
            why = jsonio.Undefined("no shape or texture hits among the conflict images: the shape bias is 0/0")
            payload.update({key: why for key in ("shape_bias", "difference") if key in payload})
        print(jsonio.dumps(payload, indent=2))
    else:
        preprocessing = extra.get("preprocessing")
        if isinstance(preprocessing, dict):
            print(format_preprocessing(preprocessing))
        print(format_report([row]))
        for name, value in extra.items():
            if name == "audit":
                for note in value:  # type: ignore[attr-defined]
                    print(f"audit: {note}")
            elif name not in ("preprocessing", "sanity", "verdict", "spec") and value is not None:
                print(f"{name}: {value}")
        print(sanity.message())
    if gate:
        print(f"modelval: {sanity.message()}", file=sys.stderr)
        return 1
    return 0


def format_preprocessing(preprocessing: dict) -> str:
    """The resolved preprocessing and where each value came from, as the table's header lines."""
    size = preprocessing.get("input_size") or "as published (224 px)"
    lines = [
        f"preprocessing: mean={tuple(preprocessing['mean'])} std={tuple(preprocessing['std'])} "
        f"interpolation={preprocessing['interpolation']} input size={size}"
    ]
    sources = preprocessing.get("sources") or {}
    grouped: dict[str, list[str]] = {}
    for key, origin in sources.items():
        grouped.setdefault(origin, []).append(key.replace("_", " "))
    lines += [f"  {', '.join(keys)} from {origin}" for origin, keys in grouped.items()]
    if preprocessing.get("native_input_size"):
        lines.append(f"  the source's own input size: {preprocessing['native_input_size']} px")
    return "\n".join(lines)


def evaluate_registered(
    args: argparse.Namespace,
    *,
    model: str,
    normalization: str,
    resize: str,
    aggregation: str,
    dataset: str = "cue-conflict",
):
    """Load a registered model and evaluate it on the stimuli with the options in ``args``.

    Shared by ``shape-bias`` and ``baseline``, so both run exactly the same pipeline. Returns the
    loaded model, the evaluation and run facts for reports (threads, cache, precision, amp flips).
    """
    from modelval.evaluation import StimulusSet, decision_flips, evaluate
    from modelval.models import get_entry, load_model, parse_spec
    from modelval.runtime import set_threads

    progress = not args.no_progress and sys.stderr.isatty()
    spec = parse_spec(model)
    if spec.is_registry:
        get_entry(model)  # an unknown name fails first, with suggestions
    label_map = read_spec_label_map(args)  # a bad map fails before anything is loaded
    threads = set_threads(args.threads)
    # Stimuli before weights: a missing or broken data folder should fail before any download starts.
    stimuli = StimulusSet.load(
        ensure_stimuli(args.data_root, dataset=dataset, offline=args.offline, progress=progress),
        workers=args.workers,
        progress=progress,
        cache=not args.no_cache,
        dataset=dataset,
        allow_modified=args.allow_modified_stimuli,
    )
    loaded = load_model(
        model,
        normalization=normalization,
        checkpoint_dir=args.checkpoint_dir,
        device=args.device,
        offline=args.offline,
        progress=progress,
        imagenet_head=label_map is None,
        **spec_options(args),  # type: ignore[arg-type]
    )
    config = loaded.config.preprocess.for_stimuli(resize)
    options = dict(
        model_name=model,
        batch_size=args.batch_size,
        device=args.device,
        aggregation=aggregation,
        progress=progress,
        n_bootstrap=getattr(args, "bootstrap", 1000),
        seed=getattr(args, "seed", 0),
        channels_last=args.channels_last,
        label_map=label_map,
    )
    evaluation = evaluate(loaded.model, config, stimuli, amp=args.amp, **options)
    facts: dict[str, object] = {
        "stimuli": stimuli.verification,
        "threads": threads,
        "decode_cache": stimuli.cache_status,
        "precision": args.amp or "fp32",
    }
    if args.amp:
        # Validation numbers come from fp32; with --amp, say how many decisions the cheaper run changed.
        reference = evaluate(loaded.model, config, stimuli, **options)
        flips = decision_flips(reference.decisions, evaluation.decisions)
        facts["amp_flips"] = flips.count
        facts["amp_flips_detail"] = flips.flipped[:20]
    return loaded, evaluation, facts


def _evaluate(args: argparse.Namespace):
    loaded, evaluation, facts = evaluate_registered(
        args, model=args.model, normalization=args.normalization, resize=args.resize, aggregation=args.aggregation
    )
    config = evaluation.config
    normalization = f"{args.normalization} ({config.normalization_name})"
    row = ReportRow(
        args.model, loaded.entry.display_name, loaded.entry.source, normalization, evaluation.result,
        expected_for(args.model),
    )  # fmt: skip
    extra = {
        "preprocessing": {
            **config.to_dict(),
            "sources": loaded.config.preprocess_sources,
            "native_input_size": loaded.config.native_input_size,
        },
        "spec": args.model,
        "checkpoint": loaded.config.checkpoint,
        "audit": list(loaded.config.audit_notes),
        "label_map": None if getattr(args, "label_map", None) is None else str(args.label_map),
        "aggregation": args.aggregation,
        "images": len(evaluation.stimuli),
        "seconds": round(evaluation.timings["total"], 2),
        **facts,
    }
    return row, extra, evaluation.decisions
