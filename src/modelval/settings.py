"""Every setting of modelval, declared once: its flag, variable, pytest option, config and models-file key.

A :class:`Setting` names what a user can set (``device``, ``batch_size``, ``data_home``, ...), how a text
value is read and checked, its default and its help. From these declarations come:

- the command line's flags (``--device``; :mod:`modelval.cli._options` adds the ones a command takes);
- the environment variables (``MODELVAL_DEVICE``; only the settings of a machine or a session have one);
- the pytest plugin's options and ini keys (``--modelval-device``, ``modelval_device``);
- the keys of the config file's ``[settings]`` table (``modelval.toml``, or ``[tool.modelval.settings]`` in
  ``pyproject.toml``) and of a models-file entry (``[models.<id>]``).

**One precedence for every setting:** the flag (or the Python argument), then the variable, then the config
file (the plugin's: its ini file), then the default. docs/settings.md lists every setting.

Nothing here imports torch or a wing of the package: every module may read a variable through
:func:`value`, and importing this module is as light as ``import os``.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelval.errors import DataError
from modelval.parsing import (
    BATCH_SIZE,
    BOOTSTRAP,
    PERMUTATIONS,
    WORKERS,
    IntRange,
    boolean,
    channels,
    device,
    number,
    path,
    size,
    threads,
    whole,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: The config file modelval looks for in the current folder (its ``[settings]`` and ``[models.<id>]`` tables).
CONFIG_FILE = "modelval.toml"


# --- the declaration -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting: what it is, how its text is read and where it can be given."""

    name: str
    help: str
    default: Any = None
    #: Reads a text value (a flag, a variable, an ini key); raises ``ValueError`` with what is allowed.
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    #: The environment variable (only settings of a machine or a session have one).
    env: str | None = None
    #: The command line's flag, or ``None`` where the setting has none (a variable or the config file sets it).
    flag: str | None = ""
    metavar: str | None = None
    #: How ``--help`` groups it: model, protocol, data, run, statistics, output, validation.
    group: str = "run"
    #: The pytest plugin's option ``--modelval-<name>`` and ini key ``modelval_<name>``.
    plugin: bool = False
    #: A key of the config file's ``[settings]`` table.
    config: bool = True
    #: A key of a models-file entry (``[models.<id>]``).
    models_file: bool = False
    #: The help of a flag that turns an on-by-default setting off (``--no-cache``), where ``help`` says what it is.
    flag_help: str = ""

    @property
    def is_flag(self) -> bool:
        """A yes/no setting: its flag takes no value (``--offline``; ``--no-cache`` for one that is on)."""
        return self.parse is boolean

    @property
    def option(self) -> str | None:
        """The command line's flag: ``--batch-size``, ``--no-cache`` for a yes/no setting that is on by default."""
        if self.flag is None:
            return None
        if self.flag:
            return self.flag
        stem = self.name.replace("_", "-")
        return f"--no-{stem}" if self.is_flag and self.default is True else f"--{stem}"

    @property
    def plugin_option(self) -> str:
        return "--modelval-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return f"modelval_{self.name}"

    def read(self, text: str, where: str) -> Any:
        """``text`` read as this setting's value; a bad one is one :class:`DataError` line naming ``where``.

        Parameters
        ----------
        text
            The value as written.
        where
            Where it was given (a flag, a variable, a file's key), for the error.
        """
        try:
            value = self.parse(text)
        except ValueError as error:
            raise DataError(f"{where}: {error}") from None
        if self.choices is not None and value not in self.choices:
            raise DataError(f"{where}: {value!r} is not one of {', '.join(self.choices)}")
        return value

    def from_env(self) -> Any:
        """The variable's value, read (``None`` when the variable is unset or empty)."""
        if self.env is None:
            return None
        text = os.environ.get(self.env, "").strip()
        if not text:
            return None
        value = self.read(text, f"${self.env}")
        # A MODELVAL_NO_X variable turns the setting x off.
        return (not value) if self.env.startswith("MODELVAL_NO_") else value

    def describe(self, *, flag: bool = False) -> str:
        """The help text with its variable and default, as ``--help`` (``flag``) and the docs show it.

        Parameters
        ----------
        flag
            Phrase it for the flag (``--no-cache``) rather than for the setting.
        """
        notes = []
        if self.env:
            notes.append(f"${self.env}")
        if self.default not in (None, False, True, "") and not (flag and self.choices):
            notes.append(f"default {self.default}")
        text = self.flag_help if flag and self.flag_help else self.help
        return text + (f" ({'; '.join(notes)})" if notes else "")


def _s(name: str, help: str, **fields: Any) -> Setting:
    return Setting(name, help, **fields)


_DATA = "data"
_MODEL = "model"
_PROTOCOL = "protocol"
_STATS = "statistics"
_VALIDATION = "validation"

#: Every setting, by name. A new one is a line here; the flag, variable and keys follow from it.
SETTINGS: dict[str, Setting] = {
    setting.name: setting
    for setting in (
        # --- where the data are (a machine's settings: variables, the config file, the plugin)
        _s("data_home", "the data home: one folder holding every stimulus set (cue-conflict/, edges/, ...) and the "
           "human data (reference/); default: the per-user cache", parse=path, env="MODELVAL_DATA_HOME",
           metavar="DIR", group=_DATA, plugin=True),
        _s("data_root", "the folder of the stimulus set itself (default: <data home>/<set>)", parse=path,
           metavar="DIR", group=_DATA, plugin=True),
        _s("reference_dir", "the published human raw-data folder (default: <data home>/reference/raw-data)",
           parse=path, metavar="DIR", group=_DATA, plugin=True),
        _s("allow_modified_stimuli", "evaluate a stimulus folder that differs from the published set (a subset, "
           "for a quick run); the output says what differs", default=False, parse=boolean, group=_DATA,
           plugin=True),
        _s("allow_modified_reference", "use human files that differ from the published ones; the output says what "
           "differs", default=False, parse=boolean, group=_DATA),
        _s("mirror", "a base URL serving modelval's downloads (stimulus archives, human data, weights) under their "
           "file names", env="MODELVAL_MIRROR", flag=None, group=_DATA, metavar="URL"),
        # Unset (None), HuggingFace's own HF_HUB_OFFLINE=1 makes a run offline too.
        _s("offline", "never download: fail with the command that fetches what is missing", parse=boolean,
           env="MODELVAL_OFFLINE", group=_DATA),
        _s("download_timeout", "seconds to wait for a server before a download attempt fails", default=60.0,
           parse=number(0, 3600, "the timeout is more than 0 and at most 3600 seconds", low_open=True), flag=None,
           group=_DATA),
        _s("download_retries", "times a download is tried", default=3,
           parse=whole(IntRange(1, 20, "downloads are tried 1 to 20 times")), flag=None, group=_DATA),
        # --- how a model is loaded
        _s("checkpoint", "a state dict to load into the model (weights_only, strict)", parse=path, metavar="FILE",
           group=_MODEL, models_file=True, config=False),
        _s("checkpoint_key", "the checkpoint's state dict under this key, e.g. state_dict_ema (default: the file "
           "itself, else 'state_dict' or 'model')", metavar="KEY", group=_MODEL, models_file=True, config=False),
        _s("strip_prefix", "remove this prefix from the checkpoint's keys (Lightning: model.)", metavar="PREFIX",
           group=_MODEL, models_file=True, config=False),
        _s("label_map", "JSON: each of the 16 categories -> output indices (heads that are not ImageNet-1k)",
           parse=path, metavar="FILE", group=_MODEL, models_file=True, config=False),
        _s("mean", "the normalization mean, e.g. 0.5,0.5,0.5 (default: the model's own)", parse=channels,
           metavar="R,G,B", group=_MODEL, models_file=True, config=False),
        _s("std", "the normalization std, e.g. 0.5,0.5,0.5 (default: the model's own)", parse=channels,
           metavar="R,G,B", group=_MODEL, models_file=True, config=False),
        _s("interpolation", "the resize interpolation (default: the model's own)",
           choices=("nearest", "bilinear", "bicubic"), group=_MODEL, models_file=True, config=False, flag=None),
        _s("input_size", "resize the stimuli to this square size in pixels (default: as published, 224)",
           parse=whole(IntRange(16, 4096, "the input size is 16 to 4096 pixels")), metavar="PIXELS",
           group=_MODEL, models_file=True, config=False),
        _s("trust_repo", "let hub: specs (and a baseline's code specs) run the repository's code in this process",
           default=False, parse=boolean, group=_MODEL, models_file=True, config=False),
        _s("class_space", "zero-shot heads: imagenet1k (the 1000 ImageNet names, then 1000 -> 16; default) or 16 "
           "(the 16 category names directly)", choices=("imagenet1k", "16"), group=_MODEL, models_file=True,
           config=False),
        _s("templates", "zero-shot heads: openai80 (default), simple7, one template with {} ('a photo of a {}.') "
           "or a file of templates", metavar="SET", group=_MODEL, models_file=True, config=False),
        _s("logit_scale", "zero-shot heads: model (the learned scale; default) or a number such as 100",
           metavar="SCALE", group=_MODEL, models_file=True, config=False),
        _s("checkpoint_dir", "where downloaded weights are kept (default: <user cache>/checkpoints)", parse=path,
           env="MODELVAL_CHECKPOINT_DIR", metavar="DIR", group=_MODEL, plugin=True, flag=None),
        # --- the evaluation protocol
        _s("normalization", "model: the model's own mean/std; imagenet: ImageNet's; half: mean = std = 0.5 (the last "
           "two forced on any model, to see what a wrong normalization does)", default="model",
           choices=("model", "imagenet", "half"), group=_PROTOCOL, config=False),
        _s("resize", "none: the 224 px stimuli as they are (the official protocol); 256: resize 256, crop 224",
           default="none", choices=("none", "256"), group=_PROTOCOL, config=False),
        _s("aggregation", "how each category's ImageNet probabilities combine: mean (model-vs-human), sum or max",
           default="mean", choices=("mean", "sum", "max"), group=_PROTOCOL, config=False),
        # --- how it runs
        _s("device", "auto (CUDA when available), cpu, cuda, cuda:N or mps", default="auto", parse=device,
           env="MODELVAL_DEVICE", plugin=True),
        _s("batch_size", "images per batch", default=32, parse=whole(BATCH_SIZE), metavar="N"),
        _s("workers", "decoding worker processes (0: decode in this process)", default=0, parse=whole(WORKERS),
           flag=None),
        _s("threads", "torch CPU threads: a number, or auto = the CPUs not busy with other processes (the command "
           "line's default; a library call leaves torch's setting alone)", default="auto", parse=threads,
           env="MODELVAL_THREADS", flag=None),
        _s("amp", "bf16 (also on CPU) or fp16 autocast; reports the decisions flipped against an fp32 run",
           choices=("bf16", "fp16")),
        _s("channels_last", "NHWC memory layout (faster on recent GPUs)", default=False, parse=boolean),
        _s("cache", "reuse the decoded stimuli, a model's stored outputs and a VLM's answers (`modelval cache info`)",
           default=True, parse=boolean, env="MODELVAL_NO_CACHE", flag_help="decode the stimuli and run the model "
           "even when they are stored (every cache off: decoded stimuli, outputs, answers)"),
        _s("cache_dir", "the folder of every cache (decoded stimuli, outputs, VLM answers, downloaded weights and "
           "data; default: the per-user cache)", parse=path, env="MODELVAL_CACHE_DIR", flag=None),
        _s("cache_size", "the size each cache keeps itself under (e.g. 2G)", default=2 * 1024**3, parse=size,
           env="MODELVAL_CACHE_SIZE", flag=None),
        _s("progress", "progress bars on stderr when it is a terminal", default=True, parse=boolean, flag=None),
        _s("tune_allocator", "the command line makes glibc reuse large freed blocks (modelval.runtime; off when "
           "another allocator such as jemalloc is preloaded)", default=True, parse=boolean,
           env="MODELVAL_NO_MALLOPT", flag=None, config=False),
        # --- what is recorded
        _s("runs_db", "the run store (`modelval runs`; default: <user data folder>/runs.sqlite)", parse=path,
           env="MODELVAL_RUNS_DB", flag=None),
        _s("run_store", "record each run in the run store", default=True, parse=boolean,
           env="MODELVAL_NO_RUN_STORE", flag=None),
        _s("session", "the session a run belongs to (a nightly sets one for all its steps)",
           env="MODELVAL_SESSION", flag=None, config=False),
        # --- statistics
        _s("bootstrap", "bootstrap resamples of the 95% percentile intervals (0: none)", default=1000,
           parse=whole(BOOTSTRAP), metavar="N", group=_STATS),
        _s("seed", "the seed of the bootstrap and of the permutation test", default=0,
           parse=whole(IntRange(0, 2**32 - 1, f"a seed is a whole number from 0 to {2**32 - 1}")), metavar="S",
           group=_STATS),
        _s("resample", "what the bootstrap resamples: texture images (default on cue-conflict), shape images, both "
           "(two-way), or stimuli as if independent (the default elsewhere)",
           choices=("texture", "shape", "two-way", "stimuli"), group=_STATS),
        _s("permutations", "random sign-flip sets of the paired permutation test (exact when 2^discordant <= N)",
           default=10_000, parse=whole(PERMUTATIONS), metavar="N", group=_STATS),
        # --- validation (the models file, the pytest plugin, `modelval validate`)
        _s("models_file", "the models file (default: ./modelval.toml, else [tool.modelval] in ./pyproject.toml)",
           parse=path, metavar="FILE", group=_VALIDATION, plugin=True, config=False),
        _s("report_dir", "write the reports (JSON, CSV, Markdown, decisions, figures) into DIR", parse=path,
           metavar="DIR", group=_VALIDATION, plugin=True, flag=None, config=False),
        _s("allow_missing_data", "skip (instead of fail) cases whose stimuli or bundled model cannot be had "
           "(ignored under $MODELVAL_STRICT_DATA)", default=False, parse=boolean, group=_VALIDATION, plugin=True,
           flag=None, config=False),
        _s("strict_data", "fail, never skip, a case whose data are missing (CI)", default=False, parse=boolean,
           env="MODELVAL_STRICT_DATA", flag=None, group=_VALIDATION, config=False),
        _s("strict_weights", "fail (instead of skip) cases whose downloaded weights are missing (the nightly)",
           default=False, parse=boolean, env="MODELVAL_STRICT_WEIGHTS", group=_VALIDATION, plugin=True, flag=None,
           config=False),
        _s("executor", "serial (this process); ray: one Ray task per model; submitit: one SLURM job per model in a "
           "job array, requeued when preempted", default="serial", choices=("serial", "ray", "submitit"),
           group=_VALIDATION, plugin=True),
        _s("slurm", "--executor submitit: comma-separated KEY=VALUE parameters of the jobs (folder=DIR, "
           "cluster=auto|slurm|local|debug, partition=gpu, array_parallelism=8, timeout_min=120, ...)",
           metavar="KEY=VALUE,...", group=_VALIDATION, plugin=True),
        _s("ray_address", "--executor ray: an existing Ray cluster (auto, ray://head:10001; default: a local one)",
           env="RAY_ADDRESS", metavar="ADDRESS", group=_VALIDATION, plugin=True, flag=None),
    )
}  # fmt: skip


def setting(name: str) -> Setting:
    """The declaration of ``name``; an unknown name is a ``KeyError`` listing the close ones.

    Parameters
    ----------
    name
        The setting's name (``batch_size``).
    """
    try:
        return SETTINGS[name]
    except KeyError:
        close = difflib.get_close_matches(name, SETTINGS, n=3)
        raise KeyError(f"no setting {name!r}" + (f"; did you mean {', '.join(close)}?" if close else "")) from None


def value(name: str, given: Any = None, config: Mapping[str, Any] | None = None, default: Any = None) -> Any:
    """The setting's value by the one precedence: ``given`` (a flag, a Python argument), the variable, the config
    file's value in ``config``, then ``default`` (a command's own), else the declared default.

    Parameters
    ----------
    name
        The setting's name.
    given
        A flag's or a Python argument's value (``None``: not given).
    config
        The config file's ``[settings]``.
    default
        A command's own default.
    """
    if given is not None:
        return given
    declared = setting(name)
    from_env = declared.from_env()
    if from_env is not None:
        return from_env
    if config is not None and name in config:
        return config[name]
    return declared.default if default is None else default


def variables() -> dict[str, Setting]:
    """Every ``MODELVAL_*`` variable and the setting it sets."""
    return {s.env: s for s in SETTINGS.values() if s.env and s.env.startswith("MODELVAL_")}


# --- the config file ----------------------------------------------------------------------------------------------


def find_config_file(folder: Path | None = None) -> Path | None:
    """``modelval.toml`` in ``folder`` (default: the current one), else a pyproject.toml with ``[tool.modelval]``.

    Parameters
    ----------
    folder
        The folder to look in (default: the current one).
    """
    folder = (folder or Path.cwd()).absolute()
    if (folder / CONFIG_FILE).is_file():
        return folder / CONFIG_FILE
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
            return None
        if "modelval" in data.get("tool", {}):
            return pyproject
    return None


def read_toml(file: Path) -> dict[str, Any]:
    """modelval's table of a config file: the whole ``modelval.toml``, or ``[tool.modelval]`` of a pyproject.toml.

    Parameters
    ----------
    file
        ``modelval.toml`` or a ``pyproject.toml``.
    """
    try:
        data = tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise DataError(f"file not found: {file}") from None
    except UnicodeDecodeError:
        raise DataError(f"{file}: not a text (UTF-8) file; a config file is TOML") from None
    except OSError as error:
        raise DataError(f"{file}: cannot read it ({error.strerror or error})") from None
    except tomllib.TOMLDecodeError as error:
        raise DataError(f"{file}: invalid TOML: {error}") from None
    return dict(data.get("tool", {}).get("modelval", {})) if file.name == "pyproject.toml" else data


def config_settings(file: Path | None) -> dict[str, Any]:
    """The ``[settings]`` table of a config file, each value checked (paths relative to the file's folder).

    Parameters
    ----------
    file
        The config file (``None``: no settings).
    """
    if file is None:
        return {}
    table = read_toml(file).get("settings", {})
    where = f"{file} [{'tool.modelval.' if file.name == 'pyproject.toml' else ''}settings]"
    if not isinstance(table, dict):
        raise DataError(f"{where}: expected a table of settings")
    known = [name for name, s in SETTINGS.items() if s.config]
    values: dict[str, Any] = {}
    for key, raw in table.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise DataError(f"{where}: {key!r} is not a setting{hint}; docs/settings.md lists them")
        values[key] = checked(SETTINGS[key], raw, f"{where} {key}", base=file.parent)
    return values


def checked(declared: Setting, raw: Any, where: str, *, base: Path | None = None) -> Any:
    """A TOML value of a setting, checked as its text would be (a list of three numbers for a channel triple).

    Parameters
    ----------
    declared
        The setting.
    raw
        The TOML value.
    where
        The file and key, for the error.
    base
        The folder relative paths start from.
    """
    if declared.parse is channels and isinstance(raw, list):
        raw = ",".join(str(v) for v in raw)
    if isinstance(raw, bool):
        if declared.parse is not boolean:
            raise DataError(f"{where}: expected {declared.metavar or 'a value'}, got {raw!r}")
        return raw
    if declared.parse is str and (not isinstance(raw, str) or not raw):
        raise DataError(f"{where} must be a non-empty string, got {raw!r}")
    if isinstance(raw, int | float | str) and not isinstance(raw, bool):
        if declared.parse is boolean and not isinstance(raw, str):
            raise DataError(f"{where}: expected true or false, got {raw!r}")
        result = declared.read(str(raw), where)
        if declared.parse is path and base is not None and not Path(result).is_absolute():
            result = base / result
        return result
    raise DataError(f"{where}: expected a {'flag' if declared.is_flag else 'value'}, got {raw!r}")
