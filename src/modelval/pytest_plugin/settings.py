"""The pytest plugin's settings: those of :mod:`modelval.settings` marked for the plugin, each an option and an
ini key.

Every setting named ``x_y`` is ``--modelval-x-y`` on the command line and ``modelval_x_y`` in the ini file
(``[tool.pytest.ini_options]``, ``pytest.ini``, ...). The one precedence of modelval's settings: the option, then
the environment variable, then the ini key, then the default. A path from the ini file is relative to that
file's folder, one from the command line or the environment to the folder pytest was started in.

Nothing here imports torch: these run for every test session of every project that has modelval installed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import pytest

from modelval.errors import DataError
from modelval.parsing import path
from modelval.settings import SETTINGS as ALL_SETTINGS
from modelval.settings import Setting

#: The plugin's settings, in the order ``--help`` lists them.
SETTINGS: tuple[Setting, ...] = tuple(s for s in ALL_SETTINGS.values() if s.plugin)
BY_NAME = {s.name: s for s in SETTINGS}


def add_options(parser: pytest.Parser) -> None:
    """Register every setting as ``--modelval-*`` and as an ini key ``modelval_*``.

    Parameters
    ----------
    parser
        pytest's parser.
    """
    group = parser.getgroup("modelval", "modelval: shape-bias validation of image classifiers")
    for declared in SETTINGS:
        text = declared.describe()
        if declared.is_flag:
            group.addoption(declared.plugin_option, dest=declared.ini, action="store_true", default=None, help=text)
            parser.addini(declared.ini, declared.help, type="bool", default=False)
        else:
            metavar = declared.metavar or declared.name.upper()
            group.addoption(declared.plugin_option, dest=declared.ini, default=None, metavar=metavar,
                            choices=declared.choices, help=text)  # fmt: skip
            parser.addini(declared.ini, declared.help, default=None)


def setting(config: pytest.Config, name: str) -> Any:
    """The value of a setting: the option, then the variable, then the ini key, then the default.

    Paths come back as absolute :class:`~pathlib.Path` objects; a bad value is a ``pytest.UsageError`` naming
    where it was given.

    Parameters
    ----------
    config
        pytest's config.
    name
        The setting's name.
    """
    declared = BY_NAME[name]
    base = Path(config.invocation_params.dir)
    try:
        given = config.getoption(declared.ini)
        if given is not None and not declared.is_flag:
            named = declared.plugin_option + (f" (or ${declared.env})" if declared.env else "")
            given = declared.read(str(given), named)
        if given is None:
            given = declared.from_env()
        if given is None:
            ini = config.getini(declared.ini)
            if declared.is_flag:
                given = bool(ini) or None
            elif ini not in (None, "", []):
                given = declared.read(str(ini), f"{declared.ini} (ini)")
                base = config.inipath.parent if config.inipath is not None else config.rootpath
    except DataError as error:
        raise pytest.UsageError(str(error)) from None
    if given is None:
        return declared.default
    if declared.parse is path:
        return (base / Path(given)).resolve()
    return given


def check_settings(config: pytest.Config) -> None:
    """Refuse, before any test runs, a setting that cannot work: one line (``pytest.UsageError``), exit status 4.

    ``--modelval-device`` is checked by the command line's own validator (:func:`modelval.parsing.device_problem`):
    ``tpu`` was torch's list of device types with a traceback through ``runtime.py`` once a case ran. A
    ``--modelval-report-dir`` that names a file, or a name too long for the file system, failed only after
    every test had passed, with 84 lines of traceback.

    Parameters
    ----------
    config
        pytest's config.
    """
    for name in BY_NAME:
        setting(config, name)  # each value read and checked (the device by the command line's own check)
    address = setting(config, "ray_address") or os.environ.get("RAY_ADDRESS")
    if address is not None and setting(config, "executor") == "ray":  # $RAY_ADDRESS may serve other tools
        from modelval.runner.executors import ray_address_problem

        problem = ray_address_problem(address)
        if problem is not None:
            raise pytest.UsageError(f"{BY_NAME['ray_address'].plugin_option} (or $RAY_ADDRESS): {problem}")
    report_dir = setting(config, "report_dir")
    if report_dir is not None:
        problem = _folder_problem(Path(report_dir))
        if problem is not None:
            raise pytest.UsageError(f"{BY_NAME['report_dir'].plugin_option} {report_dir}: {problem}")
    moved = _rootdir_moved_by_a_value(config)
    if moved is not None:
        raise pytest.UsageError(moved)


def _space_form_values(config: pytest.Config) -> list[tuple[str, str]]:
    """``(option, value)`` for each ``--modelval-x VALUE`` written with a space (``PYTEST_ADDOPTS`` included)."""
    import shlex

    options = {declared.plugin_option for declared in SETTINGS if not declared.is_flag}
    args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + [str(arg) for arg in config.invocation_params.args]
    return [(arg, args[i + 1]) for i, arg in enumerate(args[:-1]) if arg in options]


def _rootdir_moved_by_a_value(config: pytest.Config) -> str | None:
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
_PLUGIN_WORDS = tuple((f"--{name}", f"--modelval-{name}") for name in ("data-home", "data-root", "reference-dir"))


def _in_plugin_words(message: str) -> str:
    """``message`` with the command line's option names replaced by the plugin's (``--data-root`` is
    ``--modelval-data-root`` here: a user who pasted the CLI's name would get "unrecognized arguments")."""
    import re

    for cli, plugin in _PLUGIN_WORDS:
        message = re.sub(rf"(?<![\w-]){re.escape(cli)}(?![\w-])", plugin, message)
    # the data home's one setting, as the plugin takes it too
    plugin_home = "pass --modelval-data-home DIR (or set MODELVAL_DATA_HOME=DIR)"
    return message.replace("set MODELVAL_DATA_HOME=DIR", plugin_home)


def allow_missing_data(config: pytest.Config) -> bool:
    """Whether a case whose data are missing skips (``--modelval-allow-missing-data``) instead of failing; never
    under ``$MODELVAL_STRICT_DATA``.

    Parameters
    ----------
    config
        pytest's config.
    """
    from modelval.settings import value

    return bool(setting(config, "allow_missing_data")) and not value("strict_data")


def missing_resource(config: pytest.Config, message: str, *, kind: Literal["data", "weights"] = "data") -> None:
    """Fail the case with the one-line ``message``; skip instead where the user allowed it.

    Missing data fails unless ``--modelval-allow-missing-data``: a validation that validated nothing must not
    pass green. Missing downloaded weights skip unless ``--modelval-strict-weights`` (no network in most CI).

    Parameters
    ----------
    config
        pytest's config.
    message
        The one-line message.
    kind
        ``data`` or ``weights`` (each has its own allowance).
    """
    message = _in_plugin_words(message)
    if kind == "weights":
        if setting(config, "strict_weights"):
            pytest.fail(f"[strict weights] {message}", pytrace=False)
        pytest.skip(message)
    if allow_missing_data(config):
        pytest.skip(message)
    pytest.fail(f"{message} (pass --modelval-allow-missing-data to skip instead)", pytrace=False)


def find_models_file(config: pytest.Config) -> Path | None:
    """The models file: the setting, else one in the folder pytest was started in, else in the rootdir.

    Parameters
    ----------
    config
        pytest's config.
    """
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
    """``cuda`` on an xdist worker with several GPUs visible: ``cuda:K mod count`` for worker gwK.

    Parameters
    ----------
    requested
        The device setting.
    worker
        The xdist worker's id (``gw0``, ...; ``None``: no xdist).
    """
    if worker is None or not worker.startswith("gw") or requested not in ("auto", "cuda"):
        return requested
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 2:
        return requested
    return f"cuda:{int(worker[2:]) % count}"
