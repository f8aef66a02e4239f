"""``modelval baseline save|compare|preprocess-diff``: the regression check after preprocessing changes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval.api.pipeline import run_model
from modelval.cli._args import add_json_option, bounded_float, bounded_int, output_file
from modelval.cli._options import (
    LOADING,
    PROTOCOL,
    RUNNING,
    UNFLAGGED,
    ZERO_SHOT,
    add_model_argument,
    add_settings,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json
from modelval.errors import DataError
from modelval.judgement.baseline_file import REAPPLIED
from modelval.settings import SETTINGS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval baseline`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "baseline",
        help="save per-image decisions as a baseline, compare a fresh run with one, or diff two preprocessing "
        "pipelines stage by stage",
        description="Regression baselines: per-image decisions and top-5 category probabilities.",
    )
    actions = parser.add_subparsers(dest="baseline_action", required=True, metavar="ACTION")

    save = actions.add_parser("save", help="evaluate a model and store its per-image decisions")
    add_model_argument(save, required=True)
    save.add_argument("--out", type=output_file, required=True, metavar="FILE.json", help="the baseline file to write")
    add_settings(save, *LOADING, *ZERO_SHOT, *PROTOCOL, *RUNNING, "amp", quiet=UNFLAGGED)
    save.set_defaults(handler=_run_save)

    compare = actions.add_parser(
        "compare",
        help="re-run a baseline's evaluation and report flipped decisions",
        description="Re-runs the baseline's model with every setting it recorded (its normalization, resize, "
        "aggregation, input size, mean/std, interpolation, checkpoint, label map, zero-shot head, precision), "
        "each unless given again here, and reports flipped decisions (counted by transition), the shape-bias "
        "delta, the largest probability shifts and what differs in the effective preprocessing. Exit status 1 "
        "when a threshold is exceeded.",
    )
    compare.add_argument("baseline", type=Path)
    compare.add_argument(
        "--model",
        metavar="NAME|SPEC",
        help="the model to run (default: the baseline's own; a baseline whose model runs code, file.py:fn, "
        "module:fn or hub:, needs it given here again or --trust-repo)",
    )
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
    overriding = "override the baseline's: "
    # The zero-shot head's settings are re-applied from the baseline, never given again (save another baseline).
    add_settings(compare, *LOADING, *PROTOCOL, *RUNNING, "amp", quiet=UNFLAGGED, help={
        name: overriding + SETTINGS[name].help
        for name in ("normalization", "resize", "aggregation", *REAPPLIED) if name not in ZERO_SHOT
    })  # fmt: skip
    compare.set_defaults(handler=_run_compare)
    _register_diff(actions)


def _register_diff(actions: argparse._SubParsersAction) -> None:
    from modelval.preprocessing import STIMULUS_COPIES as VARIANTS

    diff = actions.add_parser(
        "preprocess-diff",
        help="two preprocessing pipelines on the same stimuli: where they first diverge, and what it does to the model",
        description="Runs pipelines A and B on the same stimuli and compares them after every stage (decode, channel "
        "order, dtype and range, resize, crop, normalize, device and batch): the largest and mean difference in grey "
        "levels and the share of pixels changed; then the model's logits, the flipped decisions by transition, and "
        "the change of shape bias and cue-conflict accuracy with paired 95% intervals. Names the first stage that "
        "diverges. Exit status 0 when nothing differs, 1 when something does (docs/regression.md).",
    )
    specs = ("model (the model's declared preprocessing), model+KEY=VALUE+... (changed: backend=tensor, "
             "antialias=false, interpolation=, resize=, crop=, crop_pct=, mean=, std=, channels=bgr, range=255, "
             "resize_dtype=, batch=, device=, decoder=nearest-chroma, channels_last, compile), timm:NAME, hf:NAME, "
             "FILE.py:NAME")
    diff.add_argument("a", metavar="A", help=f"the pipeline before: {specs}")
    diff.add_argument("b", metavar="B", help="the pipeline after, in the same forms")
    diff.add_argument("copies", metavar="COPY", nargs="*", choices=[[], *VARIANTS], default=[],
                      help=f"the stimulus copies to run, of {', '.join(VARIANTS)} (default jpeg: the 288 px upscale "
                      "as a 4:2:0 JPEG, so that decoders, resizers and crops all act)")  # fmt: skip
    diff.add_argument("--model", metavar="NAME|SPEC", default="efficientnet_lite0",
                      help="the model both pipelines feed (default: the bundled efficientnet_lite0)")  # fmt: skip
    add_json_option(diff, "the diff")
    # The machine's settings come from their variables or modelval.toml (no flags: the option budget).
    add_settings(diff, quiet=(*UNFLAGGED, "data_root", "allow_modified_stimuli", "device", "trust_repo"))
    diff.set_defaults(handler=_run_diff)


def _run_diff(args: argparse.Namespace) -> int:
    from modelval.api.options import ModelOptions
    from modelval.api.preprocessing_diff import preprocess_diff

    result = preprocess_diff(
        args.a, args.b, model=args.model, stimuli=args.copies or ["jpeg"], device=args.device,
        data_root=args.data_root, allow_modified_stimuli=args.allow_modified_stimuli, offline=args.offline,
        model_options=ModelOptions(trust_repo=bool(args.trust_repo), checkpoint_dir=args.checkpoint_dir),
        progress=bool(args.progress) and sys.stderr.isatty() and not args.json,
    )  # fmt: skip
    if args.json:
        out_json(result.to_dict())
    else:
        out(result.text())
    return 0 if result.passed else 1


def _run_save(args: argparse.Namespace) -> int:
    from modelval.judgement.baseline_file import baseline_from_evaluation, save_baseline

    evaluation = run_model(args.model, options=evaluation_options(args), model_options=model_options(args)).evaluation
    baseline = baseline_from_evaluation(
        evaluation, normalization=args.normalization, resize=args.resize, settings=vars(args)
    )
    save_baseline(args.out, baseline)
    result = evaluation.result
    out(
        f"baseline of {args.model} ({args.normalization} normalization, resize {args.resize}) written to {args.out}: "
        f"{len(evaluation.decisions)} images, shape bias {result.shape_bias:.4f}"
    )
    return 0


def _run_compare(args: argparse.Namespace) -> int:
    from modelval.judgement.baseline import compare_to_baseline, record_comparison
    from modelval.judgement.baseline_file import baseline_model, load_baseline, reapplied_settings
    from modelval.records.run_store import default_run_store

    baseline = load_baseline(args.baseline)
    model = baseline_model(baseline, args.baseline, model=args.model, trust_code=args.trust_repo)
    given = args._given  # the protocol and the settings of the baseline unless a flag overrides them
    settings, overrides = reapplied_settings(baseline, given)
    for name, recorded in settings.items():  # read as the flag's text is: one parser per setting
        text = ",".join(map(str, recorded)) if isinstance(recorded, list) else str(recorded)
        try:
            setattr(args, name, SETTINGS[name].parse(text))
        except ValueError as error:
            raise DataError(f'{args.baseline}: "settings".{name} {text!r}: {error}') from None
    options = evaluation_options(
        args,
        normalization=given["normalization"] or str(baseline["normalization"]),
        resize=given["resize"] or str(baseline.get("resize", "none")),
        aggregation=given["aggregation"] or str(baseline.get("aggregation", "mean")),
    )
    run = run_model(model, options=options, model_options=model_options(args))
    comparison = compare_to_baseline(
        baseline,
        run.evaluation,
        max_flips=args.max_flips,
        max_shape_bias_delta=args.max_shape_bias_delta,
        max_probability_shift=args.max_probability_shift,
        overrides=overrides,
    )
    record_comparison(
        comparison, run.evaluation, run.provenance(), label=f"baseline {args.baseline}", run_store=default_run_store()
    )
    if args.json:
        out_json(comparison.to_dict())
    else:
        out(comparison.format())
    return 0 if comparison.passed else 1
