"""The option groups commands share, and how parsed options become the front door's typed options.

One place for every option that more than one command has (the model spec, the evaluation protocol and
machinery, an observer that is a decision file or a model, the human reference data), so a flag means the
same everywhere and commands never import each other. Argument *types* (bounded numbers, file names) are in
:mod:`modelval.cli._args`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.api.options import EvaluationOptions, ModelOptions
from modelval.behaviour.categories import AGGREGATIONS
from modelval.behaviour.consistency import NA_HANDLING
from modelval.cli._args import (
    CHECKPOINT_DIR_HELP,
    DECISIONS_METAVAR,
    batch_size,
    channel_values,
    decision_spec,
    device_name,
    input_size,
    thread_count,
    workers,
)
from modelval.datasets.fetch import REFERENCE_DIR_ENV
from modelval.datasets.registry import list_datasets
from modelval.preprocessing import NORMALIZATION_CHOICES
from modelval.runtime import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    from modelval.models.zero_shot import ZeroShotSettings

DATASET_NAMES = tuple(entry.name for entry in list_datasets())


DATA_ROOT_HELP = (
    "the folder of the stimulus set itself (default: $MODELVAL_DATA_ROOT for cue-conflict; else "
    "<data home>/<set>, the data home (--data-home, $MODELVAL_DATA_HOME) being the parent folder of all sets; "
    "else the user cache)"
)
DATA_HOME_HELP = (
    "the data home: one folder holding every stimulus set (cue-conflict/, edges/, ...) and the human data "
    "(reference/raw-data/, reference/model-vs-human/raw-data/); sets $MODELVAL_DATA_HOME for this command. "
    "--data-root, --reference-dir and their variables still name one folder each (docs/data.md)"
)


def add_data_home_option(parser: argparse._ActionsContainer) -> None:
    """``--data-home DIR``, once per parser (several option groups of one command may ask for it)."""
    if "--data-home" not in parser._option_string_actions:
        parser.add_argument("--data-home", metavar="DIR", help=DATA_HOME_HELP)


@contextlib.contextmanager
def data_home_setting(data_home: str | None) -> Iterator[None]:
    """``$MODELVAL_DATA_HOME`` set to ``--data-home`` while a command runs (and restored after: a command run
    in-process, by a test or a notebook, leaves the caller's environment as it was)."""
    if not data_home:
        yield
        return
    from modelval.datasets.stimuli import DATA_HOME_ENV

    previous = os.environ.get(DATA_HOME_ENV)
    os.environ[DATA_HOME_ENV] = str(Path(data_home).expanduser().absolute())
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(DATA_HOME_ENV, None)
        else:
            os.environ[DATA_HOME_ENV] = previous


def add_dataset_option(parser: argparse.ArgumentParser, default: str | None = "cue-conflict") -> None:
    parser.add_argument("--dataset", choices=DATASET_NAMES, default=default, help=f"stimulus set (default: {default})")


def add_model_options(parser: argparse._ActionsContainer) -> None:
    """Options shared by every command that loads a registered model."""
    parser.add_argument("--checkpoint-dir", help=CHECKPOINT_DIR_HELP)
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
        "--checkpoint-key",
        metavar="KEY",
        help="the checkpoint's state dict under this key, e.g. state_dict_ema (default: the file itself, else "
        "'state_dict' or 'model')",
    )
    group.add_argument(
        "--strip-prefix", metavar="PREFIX", help="remove this prefix from the checkpoint's keys (Lightning: model.)"
    )
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
    zero_shot = parser.add_argument_group("zero-shot (open_clip: and hf: CLIP/SigLIP specs; see docs/zero-shot.md)")
    zero_shot.add_argument(
        "--class-space",
        choices=("imagenet1k", "16"),
        help="imagenet1k: the 1000 ImageNet names, then 1000 -> 16 (model-vs-human; default); 16: the 16 category "
        "names directly (Gavrikov et al.)",
    )
    zero_shot.add_argument(
        "--templates",
        metavar="SET",
        help="openai80 (default), simple7, one template with {} ('a photo of a {}.'), or a file of templates",
    )
    zero_shot.add_argument(
        "--logit-scale", metavar="SCALE", help="model (the learned scale; default) or a number such as 100"
    )


def model_options(args: argparse.Namespace) -> ModelOptions:
    """The :class:`ModelOptions` of the model and spec options (absent ones: defaults)."""
    return ModelOptions(
        checkpoint=getattr(args, "checkpoint", None),
        checkpoint_key=getattr(args, "checkpoint_key", None),
        strip_prefix=getattr(args, "strip_prefix", None),
        label_map=getattr(args, "label_map", None),
        mean=getattr(args, "mean", None),
        std=getattr(args, "std", None),
        interpolation=getattr(args, "interpolation", None),
        input_size=getattr(args, "input_size", None),
        trust_repo=getattr(args, "trust_repo", False),
        device=getattr(args, "device", "auto"),
        checkpoint_dir=getattr(args, "checkpoint_dir", None),
        offline=getattr(args, "offline", None),
        zero_shot=zero_shot_settings(args),
    )


def zero_shot_settings(args: argparse.Namespace) -> ZeroShotSettings | None:
    """The zero-shot head's settings when any of ``--class-space``, ``--templates``, ``--logit-scale`` is given."""
    given: dict[str, Any] = {
        key: getattr(args, key, None)
        for key in ("class_space", "templates", "logit_scale")
        if getattr(args, key, None) is not None
    }
    if not given:
        return None
    from modelval.models.zero_shot import ZeroShotSettings

    return ZeroShotSettings(**given)


def evaluation_options(args: argparse.Namespace, **protocol: str) -> EvaluationOptions:
    """The :class:`EvaluationOptions` of the evaluation options; ``protocol`` overrides the parsed
    normalization/resize/aggregation/dataset (e.g. a baseline's own)."""
    values: dict[str, object] = dict(
        dataset=getattr(args, "dataset", None) or "cue-conflict",
        normalization=getattr(args, "normalization", "model"),
        resize=getattr(args, "resize", "none"),
        aggregation=getattr(args, "aggregation", "mean"),
        data_root=args.data_root,
        batch_size=args.batch_size,
        workers=args.workers,
        decode_cache=not args.no_cache,
        threads=args.threads,
        amp=getattr(args, "amp", None),
        channels_last=getattr(args, "channels_last", False),
        allow_modified_stimuli=args.allow_modified_stimuli,
        progress=not args.no_progress and sys.stderr.isatty(),
        bootstrap=getattr(args, "bootstrap", 1000),
        seed=getattr(args, "seed", 0),
        resample=getattr(args, "resample", None),
        permutations=getattr(args, "permutations", 10_000),
        output_cache=False if getattr(args, "no_output_cache", False) else None,
    )
    values.update(protocol)
    return EvaluationOptions(**values)  # type: ignore[arg-type]


NORMALIZATION_HELP = (
    "model: the model's own mean/std (default); imagenet: ImageNet's mean/std; half: mean = std = 0.5 per "
    "channel (the last two forced on any model, to see what a wrong normalization does)"
)


RESIZE_HELP = "none: feed the 224 px stimuli as they are (default, the official protocol); 256: resize 256, crop 224"


AGGREGATION_HELP = "how each category's ImageNet probabilities combine: mean (default, model-vs-human), sum or max"


def add_protocol_options(parser: argparse._ActionsContainer) -> None:
    """``--normalization``, ``--resize``, ``--aggregation``: the evaluation protocol."""
    parser.add_argument("--normalization", choices=NORMALIZATION_CHOICES, default="model", help=NORMALIZATION_HELP)
    parser.add_argument("--resize", choices=("none", "256"), default="none", help=RESIZE_HELP)
    parser.add_argument("--aggregation", choices=AGGREGATIONS, default="mean", help=AGGREGATION_HELP)


def add_evaluation_options(parser: argparse._ActionsContainer) -> None:
    add_data_home_option(parser)
    parser.add_argument("--data-root", metavar="DIR", help=DATA_ROOT_HELP)
    parser.add_argument(
        "--batch-size",
        type=batch_size,
        default=DEFAULT_BATCH_SIZE,
        help=f"images per batch (default {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument("--workers", type=workers, default=0, help="decoding worker processes (default: 0)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="decode the PNGs instead of using the per-user decode cache (or set MODELVAL_NO_CACHE=1)",
    )
    parser.add_argument(
        "--threads",
        type=thread_count,
        default="auto",
        help="torch CPU threads: a number, or auto = CPUs not busy with other processes (default: auto)",
    )
    parser.add_argument(
        "--amp",
        choices=("bf16", "fp16"),
        default=None,
        help="bfloat16 (also on CPU) or float16 autocast for the forward; reports decisions flipped against an "
        "fp32 run",
    )
    parser.add_argument("--channels-last", action="store_true", help="NHWC memory layout (faster on recent GPUs)")
    parser.add_argument(
        "--no-output-cache",
        action="store_true",
        help="run the model even when its outputs on these stimuli are stored (or set MODELVAL_NO_CACHE=1; "
        "`modelval cache info` shows the cache)",
    )
    parser.add_argument(
        "--allow-modified-stimuli",
        action="store_true",
        help="evaluate a stimulus folder that differs from the published manifest, or a subset of it "
        "(the output says what differs)",
    )


#: ``--reference-dir`` means the same wherever human data are read.
REFERENCE_DIR_HELP = (
    f"the published raw-data folder (default: ${REFERENCE_DIR_ENV}, else <data home>/reference/raw-data, else the "
    "user cache; `modelval download-data --humans` fills it)"
)


def add_observer_options(parser: argparse.ArgumentParser) -> None:
    """Options for commands that may evaluate a registered model first (same pipeline as shape-bias)."""

    group = parser.add_argument_group("evaluating a model (--model), as shape-bias does")
    add_protocol_options(group)
    add_evaluation_options(group)
    add_model_options(group)
    add_spec_options(parser)


def add_decision_specs(parser: argparse.ArgumentParser) -> None:
    """``--decisions [LABEL[:DATASET]=]FILE``, repeatable: the observers' decision files of a multi-model command."""
    parser.add_argument(
        "--decisions",
        action="append",
        default=[],
        type=decision_spec,
        metavar=DECISIONS_METAVAR,
        help="one decision CSV per --decisions; repeat the option for each observer (--decisions VGG-16=vgg.csv "
        "--decisions ResNet-50=r50.csv); DATASET names its experiment when the image and file names cannot "
        "(model-vs-human's bare edge and silhouette names in a renamed file)",
    )


def add_human_options(parser: argparse.ArgumentParser) -> None:
    """``--resample-observers`` and ``--na``: how the human panel enters the statistics."""
    parser.add_argument(
        "--resample-observers",
        action="store_true",
        help="the bootstrap also draws the human observers with replacement (default: the published observers "
        "are held fixed, so the interval covers other trials only)",
    )
    parser.add_argument(
        "--na",
        choices=NA_HANDLING,
        default="wrong",
        help="a human trial without an answer ('na', a timeout): wrong (default, as model-vs-human), or exclude: "
        "left out of every pair it occurs in",
    )


def add_reference_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-modified-reference``: compare against human files that differ from the published ones."""
    parser.add_argument(
        "--allow-modified-reference",
        action="store_true",
        help="use a reference folder whose human observer files differ from the published manifest (changed, "
        "missing or extra files); the output says what differs",
    )
