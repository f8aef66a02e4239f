"""``modelval`` command line: one sub-module per group of commands, each with ``register(subparsers)``.

Exit status (docs/cli.md):

* 0 - success;
* 1 - a check failed: a validation or baseline comparison failed, or the model is not a working
  classifier (the sanity gate);
* 2 - bad usage, bad input or missing data: one line ``modelval: error: ...`` on stderr
  (:class:`modelval.errors.ModelvalError`, argparse errors, a file that cannot be written);
* 3 - an unexpected error: one line naming it, plus "run with --debug for the traceback".

No traceback reaches the terminal without ``--debug``. While a command runs, whatever model code
prints goes to stderr: stdout carries only the result (see :mod:`modelval.cli._output`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Iterator, Sequence

from modelval import __version__
from modelval.cli._args import OneLineParser
from modelval.errors import ModelvalError

#: The commands in ``modelval --help``'s groups: (group title, modules under ``modelval.cli`` that add them).
COMMAND_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shape bias and the humans", ("shape_bias", "accuracy", "humans", "compare", "benchmark")),
    ("preprocessing and regressions", ("sensitivity", "baseline")),
    ("validation", ("validate", "runs")),
    ("calibration and metrics", ("calibration", "metrics")),
    ("data, models and caches", ("data", "models", "cache")),
)
COMMAND_MODULES: tuple[str, ...] = tuple(module for _, modules in COMMAND_GROUPS for module in modules)

#: Commands that moved (issue 39: at most 15 top-level commands), and where they are now.
MOVED = {
    "download-data": "data download", "verify-data": "data verify", "datasets": "data list",
    "fetch": "models fetch", "audit-preprocessing": "models audit", "ece": "calibration ece",
    "reliability": "calibration reliability", "temperature": "calibration temperature",
    "human-figures": "humans (several observers, with --report-dir)", "rescore": "shape-bias --outputs DIR",
}  # fmt: skip
#: Flags that left or were renamed in issue 39 (docs/settings.md's table), named in the error of an unknown flag.
RENAMED = {
    "--offline": "MODELVAL_OFFLINE=1", "--threads": "MODELVAL_THREADS=N", "--workers": "workers = N",
    "--checkpoint-dir": "MODELVAL_CHECKPOINT_DIR=DIR", "--channels-last": "channels_last = true",
    "--no-progress": "progress = false", "--no-output-cache": "--no-cache", "--plot": "--out FILE or --report-dir",
    "--config": "--models-file", "--data-home": "MODELVAL_DATA_HOME=DIR", "--url": "MODELVAL_MIRROR=URL",
    "--interpolation": "interpolation in the models-file entry", "--ray-address": "RAY_ADDRESS=ADDRESS",
    "--submitit-folder": "--slurm folder=DIR,cluster=X", "--submitit-cluster": "--slurm folder=DIR,cluster=X",
    "--rank": "always on with shape-bias --outputs",
    "--seeds-csv": "--csv FILE, which also writes <FILE stem>.seeds.csv",
    "--markdown": "runs verdict --report-dir DIR (verdict.md, report.json and the page index.html)",
}  # fmt: skip

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130

DEBUG_HELP = "print the traceback of an unexpected error (exit status 3)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="modelval",
        description="Validate image classifiers: cue-conflict shape bias, calibration, imbalance-aware metrics.",
        epilog="Settings: a flag, else its variable, else the [settings] table of ./modelval.toml, else the default "
        "(docs/settings.md). Exit status: 0 success; 1 a check failed (validation, baseline, not a working "
        "classifier); 2 bad usage, input or missing data; 3 an unexpected error (--debug prints its traceback).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        moved=MOVED,
        renamed=RENAMED,
    )
    parser.add_argument("--version", action="version", version=f"modelval {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = [parser.description or ""]
    for title, modules in COMMAND_GROUPS:
        listing.append(f"\n{title}:")
        for name in modules:
            importlib.import_module(f"modelval.cli.{name}").register(subparsers)
        for action in subparsers._choices_actions:
            listing.append(f"  {action.dest:<13} {action.help}")
        subparsers._choices_actions.clear()  # listed above, in groups, instead of argparse's flat list
    parser.description = "\n".join(listing)
    for _, command in walk_commands(parser):
        if command is not parser:
            # `--debug` also after the command (where a user adds it when told to); SUPPRESS keeps a
            # `modelval --debug COMMAND` from being reset by the sub-parser's default.
            command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def walk_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the command tree with its path (``()``, ``("baseline",)``, ``("baseline", "save")``, ...).

    Parameters
    ----------
    parser
        The parser to walk from (``build_parser()``).
    path
        Its path in the tree.
    """
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser again
                    seen.add(id(sub))
                    yield from walk_commands(sub, (*path, name))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``modelval`` command: its exit status (0 success, 1 a failed check, 2 bad input, 3 a defect of ours).

    Parameters
    ----------
    argv
        The arguments after ``modelval`` (``None``: the process's own).
    """
    try:
        parser = build_parser()
    except Exception as error:  # a defect of ours (a help text argparse cannot format, ...): still one line
        print(f"modelval: unexpected error: {_one_line(error)}", file=sys.stderr)
        return EXIT_UNEXPECTED
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # a usage error (one line, see OneLineParser), or --help / --version
        return _code(exit_)
    threads = _torch_threads()
    from modelval.cli._options import resolve_settings, settings_environment
    from modelval.cli._output import results_to_stdout
    from modelval.download import sigterm_exits_cleanly
    from modelval.runtime import tune_allocator

    # Process-wide settings belong to the process's owner: the command line is one, a library call is not.
    tune_allocator()  # glibc reuses large freed blocks: CPU evaluations stop page-faulting (modelval.runtime)
    os.environ.setdefault("MPLBACKEND", "Agg")  # figures go to files; a library call never picks a backend
    debug = bool(getattr(args, "debug", False))
    try:
        config = resolve_settings(args)  # each setting by the one precedence: flag, variable, config file, default
        # a killed download still removes its temporary file; what a flag or the config file set holds while the
        # command runs
        with results_to_stdout(), sigterm_exits_cleanly(), settings_environment(args, config):
            return int(args.handler(args) or 0)
    except SystemExit as exit_:  # a usage error found by a command (one line), or SIGTERM
        return _code(exit_)
    except ModelvalError as error:
        _debug_traceback(debug)
        print(f"modelval: error: {' '.join(str(error).splitlines())}", file=sys.stderr)  # one line, always
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`modelval ... | head`): not an error of ours, and nothing left to say.
        sys.stderr.close()
        return EXIT_OK
    except OSError as error:
        # The machine, not modelval: a full disk, a folder without write permission, a file that vanished.
        _debug_traceback(debug)
        print(f"modelval: error: {_os_error(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("modelval: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # the last line of defence: one line, never a traceback
        _debug_traceback(debug)
        print(f"modelval: unexpected error: {_one_line(error)}{'' if debug else _DEBUG_HINT}", file=sys.stderr)
        return EXIT_UNEXPECTED
    finally:
        # --threads changes torch's process-wide setting; a command run in-process (a test, a notebook)
        # must not leave it behind for the caller's later work.
        if threads is not None and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)


_DEBUG_HINT = " (run with --debug for the traceback)"


def _code(exit_: SystemExit) -> int:
    code = exit_.code
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"): print it, as the interpreter would
    return EXIT_BAD_INPUT


def _debug_traceback(debug: bool) -> None:
    if debug:
        traceback.print_exc(file=sys.stderr)


def _one_line(error: BaseException, limit: int = 400) -> str:
    text = " ".join(str(error).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _os_error(error: OSError) -> str:
    """``cannot write /x/y.png: No space left on device`` rather than ``[Errno 28] ...``."""
    what = error.strerror or _one_line(error)
    if error.filename is not None:
        return f"{error.filename}: {what}"
    return what


def _torch_threads() -> int | None:
    """torch's thread count now, if torch is loaded (the CLI never imports it just to ask)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


if __name__ == "__main__":
    sys.exit(main())
