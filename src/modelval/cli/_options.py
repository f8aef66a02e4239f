"""How a command takes the settings of :mod:`modelval.settings`, and how they become the front door's options.

A command names the settings it takes (:func:`add_settings`); their flags, help, checks and defaults come from
the one declaration in :mod:`modelval.settings`. After parsing, :func:`resolve_settings` gives each the value
of the one precedence (the flag, the variable, the config file's ``[settings]``, the default), and
:func:`settings_environment` hands the lower layers, which read variables, what the flag or the config file
said. Argument *types* of a command's own arguments (output files, decision specs) are in
:mod:`modelval.cli._args`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.api.options import EvaluationOptions, ModelOptions
from modelval.settings import SETTINGS, Setting, config_settings, find_config_file, value

if TYPE_CHECKING:
    from modelval.models.zero_shot import ZeroShotSettings

#: How ``--help`` titles each group of settings.
GROUP_TITLES = {
    "model": "the model (a spec's weights, label map and preprocessing; docs/models.md)",
    "protocol": "the evaluation protocol",
    "data": "the stimuli and data (docs/data.md)",
    "run": "how it runs",
    "statistics": "statistics",
    "validation": "validation",
}

#: How a spec is loaded (flags of the commands that evaluate one model); the zero-shot head's settings apart.
LOADING = (
    "checkpoint", "checkpoint_key", "strip_prefix", "label_map", "mean", "std", "interpolation", "input_size",
    "trust_repo",
)  # fmt: skip
ZERO_SHOT = ("class_space", "templates", "logit_scale")
PROTOCOL = ("normalization", "resize", "aggregation")
#: Where the stimuli are and how a model runs on them, this run.
RUNNING = ("device", "data_root", "allow_modified_stimuli", "batch_size", "cache")
#: A machine's or a session's settings: a model command takes them from their variable or the config file.
UNFLAGGED = ("threads", "workers", "progress", "channels_last", "checkpoint_dir", "data_home", "offline")
STATISTICS = ("bootstrap", "seed", "resample")
#: The flags of a command that evaluates one model (it takes :data:`UNFLAGGED` too, with ``quiet=``).
ONE_MODEL = (*LOADING, *ZERO_SHOT, *PROTOCOL, *RUNNING)
#: A command that evaluates several models: one loading for all of them makes no sense (a models file describes
#: each model).
MANY_MODELS = (*PROTOCOL, *RUNNING)


def _argparse_type(declared: Setting):
    def parse(text: str) -> Any:
        try:
            return declared.parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = getattr(declared.parse, "__name__", "value")
    return parse


def add_settings(
    parser: argparse.ArgumentParser,
    *names: str,
    quiet: tuple[str, ...] = (),
    help: Mapping[str, str] | None = None,
    **defaults: Any,
) -> None:
    """Offer ``names`` on ``parser``, in ``--help``'s groups; a setting without a flag, and each of ``quiet``, is
    taken without one (a variable or the config file sets it).

    ``help`` replaces a setting's help text in this command; ``defaults`` its default (``bootstrap=0``).
    """
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name in names:
        declared = SETTINGS[name]
        if declared.option is None:
            continue
        if declared.group not in groups:
            groups[declared.group] = parser.add_argument_group(GROUP_TITLES[declared.group])
        text = (help or {}).get(name) or declared.describe(flag=True)
        if name in defaults:
            text = f"{text.split(' (default')[0]} (default {defaults[name]})"
        kwargs: dict[str, Any] = {"dest": name, "default": None, "help": text.replace("%", "%%")}
        if declared.is_flag:
            kwargs.update(action="store_const", const=declared.default is not True)
        else:
            kwargs.update(type=_argparse_type(declared), choices=declared.choices, metavar=declared.metavar)
        groups[declared.group].add_argument(declared.option, **kwargs)
    taken = parser.get_default("_settings") or {}
    parser.set_defaults(_settings={**taken, **{name: defaults.get(name) for name in (*names, *quiet)}})


def resolve_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Each setting the command takes, by the one precedence; returns the config file's ``[settings]`` (read for
    every command: a machine's settings there, such as ``runs_db`` or ``cache_dir``, reach ``runs`` and ``cache``
    through :func:`settings_environment`)."""
    taken: dict[str, Any] = getattr(args, "_settings", None) or {}
    config = config_settings(find_config_file())
    given = {}
    for name, default in taken.items():
        flag = getattr(args, name, None)
        given[name] = flag
        setattr(args, name, value(name, flag, config, default))
    args._given = given
    return config


@contextlib.contextmanager
def settings_environment(args: argparse.Namespace, config: Mapping[str, Any]) -> Iterator[None]:
    """The variables of the settings a flag or the config file set, while the command runs (and restored after:
    a command run in-process, by a test or a notebook, leaves the caller's environment as it was).

    Lower layers read a machine's settings (the data home, the weights' folder, the caches) from their variables;
    a flag or the config file sets them this way for the command, with the flag first and a variable already set
    winning over the config file.
    """
    given: Mapping[str, Any] = getattr(args, "_given", {})
    wanted: dict[str, str] = {}
    for name, declared in SETTINGS.items():
        if declared.env is None:
            continue
        if given.get(name) is not None:
            wanted[declared.env] = _env_text(declared, given[name])
        elif name in config and not os.environ.get(declared.env):
            wanted[declared.env] = _env_text(declared, config[name])
    saved = {env: os.environ.get(env) for env in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for env, previous in saved.items():
            if previous is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = previous


def _env_text(declared: Setting, setting_value: Any) -> str:
    if declared.is_flag:
        on = bool(setting_value) != declared.env.startswith("MODELVAL_NO_")  # type: ignore[union-attr]
        return "1" if on else "0"
    if isinstance(setting_value, Path):
        return str(setting_value.expanduser().absolute())
    return str(setting_value)


# --- the settings as the front door's options ----------------------------------------------------------------

_EVALUATION_FIELDS = {field.name for field in dataclasses.fields(EvaluationOptions)}
_MODEL_FIELDS = {field.name for field in dataclasses.fields(ModelOptions)}


def model_options(args: argparse.Namespace) -> ModelOptions:
    """The :class:`ModelOptions` of the settings the command took (the others: their defaults)."""
    values = {name: getattr(args, name) for name in _MODEL_FIELDS if getattr(args, name, None) is not None}
    return ModelOptions(**values, zero_shot=zero_shot_settings(args))


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


def evaluation_options(args: argparse.Namespace, **protocol: Any) -> EvaluationOptions:
    """The :class:`EvaluationOptions` of the settings the command took; ``protocol`` overrides single fields
    (a baseline's own normalization, ...)."""
    values: dict[str, Any] = {
        name: getattr(args, name) for name in _EVALUATION_FIELDS if getattr(args, name, None) is not None
    }
    values["dataset"] = getattr(args, "dataset", None) or "cue-conflict"
    values["progress"] = bool(getattr(args, "progress", False)) and sys.stderr.isatty()
    values.update(protocol)
    return EvaluationOptions(**values)


# --- a command's own arguments that several commands share -------------------------------------------------------

#: ``--decisions`` in commands that take several observers: ``[LABEL[:DATASET]=]FILE``.
DECISIONS_METAVAR = "[LABEL[:DATASET]=]FILE"


def decision_spec(text: str) -> tuple[str, str | None, str]:
    """``[LABEL[:DATASET]=]FILE`` -> ``(label, dataset or None, file)``; the dataset checked, the file must exist.

    ``DATASET`` names the experiment of that one file (model-vs-human's ``edge``/``silhouette`` accepted),
    for files whose image names cannot tell it (model-vs-human's bare edge and silhouette names).
    """
    from modelval.behaviour.experiments import experiment
    from modelval.errors import DataError

    head, _, file = text.rpartition("=")
    label, dataset = head, None
    if ":" in head:
        label, _, name = head.rpartition(":")
        try:
            dataset = experiment(name.strip()).dataset
        except DataError as error:
            raise argparse.ArgumentTypeError(f"{text}: {error}") from None
    if Path(file).is_dir():
        raise argparse.ArgumentTypeError(f"{file} is a folder; pass the decision file (a CSV file) itself")
    if not Path(file).is_file():
        raise argparse.ArgumentTypeError(f"decision file not found: {file}")
    return label, dataset, file



def add_model_argument(parser: argparse.ArgumentParser, *, required: bool = False, many: bool = False) -> None:
    """``--model NAME|SPEC`` (``many``: repeatable, one model each)."""
    what = "registry name (`modelval models list`) or spec: timm:, hf:, open_clip:, torchvision:, hub:, file.py:fn"
    if many:
        parser.add_argument("--model", action="append", default=[], metavar="NAME|SPEC",
                            help=f"{what}; one per --model; repeat the option for each model")  # fmt: skip
    else:
        parser.add_argument("--model", required=required, metavar="NAME|SPEC", help=what)


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
    from modelval.behaviour.consistency import NA_HANDLING

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
