"""The pytest plugin's settings as data: one option, one ini key and (where it exists) one environment variable each.

Every setting named ``x_y`` is ``--modelval-x-y`` on the command line and ``modelval_x_y`` in the ini file
(``[tool.pytest.ini_options]``, ``pytest.ini``, ...). Precedence: the command line, then the environment
variable, then the ini key, then the default. A path from the ini file is relative to that file's folder,
one from the command line or the environment to the folder pytest was started in.

Nothing here imports torch: these run for every test session of every project that has modelval installed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

Kind = Literal["path", "text", "flag"]


@dataclass(frozen=True)
class Setting:
    name: str
    kind: Kind
    help: str
    env: str | None = None
    choices: tuple[str, ...] | None = None

    @property
    def option(self) -> str:
        return "--modelval-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return f"modelval_{self.name}"

    @property
    def dest(self) -> str:
        return f"modelval_{self.name}"


SETTINGS: tuple[Setting, ...] = (
    Setting("data_home", "path", "the data home: the folder holding cue-conflict/, reference/raw-data/, ... "
            "(docs/data.md; default: the per-user cache)", env="MODELVAL_DATA_HOME"),
    Setting("data_root", "path", "cue-conflict stimuli folder (default: <data home>/cue-conflict, else the per-user "
            "cache, fetched on first use)", env="MODELVAL_DATA_ROOT"),
    Setting("reference_dir", "path", "published raw-data CSVs of texture-vs-shape (default: the per-user cache)",
            env="MODELVAL_REFERENCE_DIR"),
    Setting("checkpoint_dir", "path", "downloaded weights (default: the per-user cache)",
            env="MODELVAL_CHECKPOINT_DIR"),
    Setting("device", "text", "auto, cpu, cuda, cuda:N or mps (default: auto, CUDA when available)",
            env="MODELVAL_DEVICE"),
    Setting("models_file", "path", "the models file (default: modelval.toml or [tool.modelval] in pyproject.toml, "
            "looked for in the folder pytest was started in, then in the rootdir)", env="MODELVAL_MODELS_FILE"),
    Setting("report_dir", "path", "write JSON/CSV/Markdown reports, decision CSVs and plots there"),
    Setting("allow_modified_stimuli", "flag", "evaluate a stimulus folder that differs from the published 1280 "
            "(a subset, for quick runs); the reports say so"),
    Setting("allow_missing_data", "flag", "skip (instead of fail) modelval cases whose stimuli or bundled model "
            "cannot be had (ignored when MODELVAL_STRICT_DATA=1)"),
    Setting("strict_weights", "flag", "fail (instead of skip) cases whose downloaded weights are missing "
            "(the nightly GPU job)", env="MODELVAL_STRICT_WEIGHTS"),
    Setting("executor", "text", "serial (default), ray or submitit: evaluate the models file's models as Ray "
            "tasks or SLURM jobs (a job array), one per model, before the cases are judged", env="MODELVAL_EXECUTOR",
            choices=("serial", "ray", "submitit")),
    Setting("submitit_folder", "path", "--modelval-executor submitit: the jobs' scripts and logs (default: "
            "./submitit-jobs; on a cluster, a shared folder)", env="MODELVAL_SUBMITIT_FOLDER"),
    Setting("submitit_cluster", "text", "--modelval-executor submitit: auto (default), slurm, local or debug",
            env="MODELVAL_SUBMITIT_CLUSTER", choices=("auto", "slurm", "local", "debug")),
    Setting("slurm", "text", "--modelval-executor submitit: SLURM/submitit parameters, comma-separated KEY=VALUE "
            "(e.g. partition=gpu,array_parallelism=8,timeout_min=120)", env="MODELVAL_SLURM"),
    Setting("ray_address", "text", "an existing Ray cluster for --modelval-executor ray (default: a local one)",
            env="RAY_ADDRESS"),
)  # fmt: skip
BY_NAME = {setting.name: setting for setting in SETTINGS}

#: Set to 1 (CI does) and no missing-data skip is allowed, whatever the options say.
STRICT_DATA_ENV = "MODELVAL_STRICT_DATA"


def add_options(parser: pytest.Parser) -> None:
    """Register every setting as ``--modelval-*`` and as an ini key ``modelval_*``."""
    group = parser.getgroup("modelval", "modelval: shape-bias validation of image classifiers")
    for setting in SETTINGS:
        env = f" (env {setting.env})" if setting.env else ""
        if setting.kind == "flag":
            group.addoption(setting.option, dest=setting.dest, action="store_true", default=None,
                            help=setting.help + env)  # fmt: skip
            parser.addini(setting.ini, setting.help, type="bool", default=False)
        else:
            metavar = "DIR" if setting.kind == "path" and "file" not in setting.name else None
            group.addoption(setting.option, dest=setting.dest, default=None, metavar=metavar or setting.name.upper(),
                            choices=setting.choices, help=setting.help + env)  # fmt: skip
            parser.addini(setting.ini, setting.help, default=None)


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def setting(config: pytest.Config, name: str) -> Any:
    """The value of a setting: command line, then environment, then ini, else ``None`` (``False`` for flags).

    Paths come back as absolute :class:`~pathlib.Path` objects.
    """
    spec = BY_NAME[name]
    given = config.getoption(spec.dest)
    base = config.invocation_params.dir
    if given is None and spec.env and os.environ.get(spec.env):
        given = _flag(os.environ[spec.env]) if spec.kind == "flag" else os.environ[spec.env]
    if given is None:
        ini = config.getini(spec.ini)
        if spec.kind == "flag":
            return bool(ini)
        if ini in (None, "", []):
            return None
        given = str(ini)
        base = config.inipath.parent if config.inipath is not None else config.rootpath
    if spec.kind == "flag":
        return bool(given)
    if spec.kind == "path":
        return (Path(base) / Path(str(given)).expanduser()).resolve()
    return str(given)


def check_settings(config: pytest.Config) -> None:
    """Refuse, before any test runs, a setting that cannot work: one line (``pytest.UsageError``), exit status 4.

    ``--modelval-device`` is checked by the command line's own validator (:func:`modelval.runtime.device_problem`):
    ``tpu`` was torch's list of device types with a traceback through ``runtime.py`` once a case ran. A
    ``--modelval-report-dir`` that names a file, or a name too long for the file system, failed only after
    every test had passed, with 84 lines of traceback.
    """
    from modelval.runtime import device_problem

    device = setting(config, "device")
    if device is not None:
        problem = device_problem(device)
        if problem is not None:
            raise pytest.UsageError(f"{BY_NAME['device'].option} (or $MODELVAL_DEVICE): {problem}")
    address = setting(config, "ray_address")
    if address is not None and setting(config, "executor") == "ray":  # $RAY_ADDRESS may serve other tools
        from modelval.runner.executors import ray_address_problem

        problem = ray_address_problem(address)
        if problem is not None:
            raise pytest.UsageError(f"{BY_NAME['ray_address'].option} (or $RAY_ADDRESS): {problem}")
    report_dir = setting(config, "report_dir")
    if report_dir is not None:
        problem = _folder_problem(Path(report_dir))
        if problem is not None:
            raise pytest.UsageError(f"{BY_NAME['report_dir'].option} {report_dir}: {problem}")
    moved = rootdir_moved_by_a_value(config)
    if moved is not None:
        raise pytest.UsageError(moved)


def _space_form_values(config: pytest.Config) -> list[tuple[str, str]]:
    """``(option, value)`` for each ``--modelval-x VALUE`` written with a space (``PYTEST_ADDOPTS`` included)."""
    import shlex

    options = {setting.option for setting in SETTINGS if setting.kind != "flag"}
    args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + [str(arg) for arg in config.invocation_params.args]
    return [(arg, args[i + 1]) for i, arg in enumerate(args[:-1]) if arg in options]


def rootdir_moved_by_a_value(config: pytest.Config) -> str | None:
    """One line when ``--modelval-x PATH`` (space form) made pytest pick another rootdir or ini file; else None.

    pytest picks its rootdir and ini file from the command line's paths *before* any plugin is loaded, so at that
    moment ``--modelval-data-root DIR`` is an unknown option followed by a path: DIR counts as a test path. When
    DIR lies outside the project, pytest takes a folder above DIR as its rootdir, ignores the project's ini file
    (its ``addopts`` and markers) and writes its ``.pytest_cache`` into the stimulus folder. The ``=`` form
    (``--modelval-data-root=DIR``) cannot do that. The space form is refused only where it changed something.
    """
    invocation = Path(config.invocation_params.dir)
    suspects = [(option, value) for option, value in _space_form_values(config) if (invocation / value).exists()]
    if not suspects:
        return None
    expected = _setup_without(config)
    if expected is not None and expected == (Path(config.rootpath), config.inipath):
        return None
    option, value = suspects[0]
    def described(rootpath: Path, inipath: Path | None) -> str:
        return f"rootdir {rootpath} " + (f"with {inipath.name}" if inipath else "without an ini file")

    chosen = described(Path(config.rootpath), config.inipath)
    should = "" if expected is None else f", not {described(*expected)}"
    return (
        f"{option} {value}: write {option}={value}. pytest chooses its rootdir and ini file before plugins load, "
        f"so the space form made it read {value} as a test path ({chosen}{should})"
    )


def _setup_without(config: pytest.Config) -> tuple[Path, Path | None] | None:
    """The rootdir and ini file pytest would have chosen from the command line's real test paths (None: unknown)."""
    import inspect

    try:
        from _pytest.config.findpaths import determine_setup

        given = {
            "inifile": config.option.inifilename,
            "override_ini": config.option.override_ini,
            "args": [str(arg) for arg in config.option.file_or_dir or []],
            "rootdir_cmd_arg": config.option.rootdir or None,
            "invocation_dir": Path(config.invocation_params.dir),
        }
        accepted = inspect.signature(determine_setup).parameters
        rootpath, inipath, *_ = determine_setup(**{k: v for k, v in given.items() if k in accepted})
    except Exception:  # a pytest whose private setup function differs: refuse the space form to be safe
        return None
    return Path(rootpath), (Path(inipath) if inipath else None)


def _folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be a report folder (made if missing), or None."""
    try:
        for part in folder.parts:
            if len(os.fsencode(part)) > 255:
                return f"a name of {len(os.fsencode(part))} bytes; file and folder names are at most 255 bytes"
        if folder.exists() and not folder.is_dir():
            return "is a file; name a folder (it is created if missing)"
        for parent in folder.parents:
            if parent.exists():
                if not parent.is_dir():
                    return f"{parent} is a file, not a folder"
                break
    except OSError as error:
        return error.strerror or str(error)
    return None


#: The command line's words for a data setting, and the plugin's (a message from below the door names the former).
_PLUGIN_WORDS = tuple(
    (f"--{name}", f"--modelval-{name}") for name in ("data-home", "data-root", "reference-dir", "checkpoint-dir")
)


def in_plugin_words(message: str) -> str:
    """``message`` with the command line's option names replaced by the plugin's (``--data-root`` is
    ``--modelval-data-root`` here: a user who pasted the CLI's name would get "unrecognized arguments")."""
    import re

    for cli, plugin in _PLUGIN_WORDS:
        message = re.sub(rf"(?<![\w-]){re.escape(cli)}(?![\w-])", plugin, message)
    return message


def allow_missing_data(config: pytest.Config) -> bool:
    return bool(setting(config, "allow_missing_data")) and not _flag(os.environ.get(STRICT_DATA_ENV, ""))


def missing_resource(config: pytest.Config, message: str, *, kind: Literal["data", "weights"] = "data") -> None:
    """Fail the case with the one-line ``message``; skip instead where the user allowed it.

    Missing data fails unless ``--modelval-allow-missing-data``: a validation that validated nothing must not
    pass green. Missing downloaded weights skip unless ``--modelval-strict-weights`` (no network in most CI).
    """
    message = in_plugin_words(message)
    if kind == "weights":
        if setting(config, "strict_weights"):
            pytest.fail(f"[strict weights] {message}", pytrace=False)
        pytest.skip(message)
    if allow_missing_data(config):
        pytest.skip(message)
    pytest.fail(f"{message} (pass --modelval-allow-missing-data to skip instead)", pytrace=False)


def find_models_file(config: pytest.Config) -> Path | None:
    """The models file: the setting, else one in the folder pytest was started in, else in the rootdir."""
    from modelval.runner.models_file import find_models_file as find_in

    given = setting(config, "models_file")
    if given is not None:
        return Path(given)
    for folder in dict.fromkeys((Path(config.invocation_params.dir), Path(config.rootpath))):
        found = find_in(folder)
        if found is not None:
            return found
    return None


def worker_device(requested: str, worker: str | None) -> str:
    """``cuda`` on an xdist worker with several GPUs visible: ``cuda:K mod count`` for worker gwK."""
    if worker is None or not worker.startswith("gw") or requested not in ("auto", "cuda"):
        return requested
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 2:
        return requested
    return f"cuda:{int(worker[2:]) % count}"
