"""Argument types that check a value at the command-line boundary and say what is allowed.

argparse turns the ``ArgumentTypeError`` raised here into ``modelval: error: argument --x: ...`` on
one line with exit status 2 (see :class:`OneLineParser`), instead of a traceback deep in the run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from modelval.metrics.calibration import DEFAULT_N_BINS
from modelval.parsing import IntRange


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``modelval: error: ...``, exit status 2.

    argparse prints the usage block before the message; the README promises one line, and the
    usage is one ``--help`` away. ``moved`` maps a command that moved to where it is now, ``renamed`` a flag that
    left to what sets it now (both named in the error).
    """

    #: The words of the command line being parsed, and the renamed flags: shared with the commands' own parsers,
    #: whose error (a value taken for a positional) may come before argparse names the unknown flag.
    words: ClassVar[tuple[str, ...]] = ()
    renamed_flags: ClassVar[dict[str, str]] = {}

    def __init__(
        self, *args: Any, moved: dict[str, str] | None = None, renamed: dict[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.moved, self.renamed = moved or {}, renamed or {}
        if renamed:
            OneLineParser.renamed_flags = dict(renamed)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if not OneLineParser.words or self.renamed:  # the top-level parser: remember what is parsed
            OneLineParser.words = tuple(str(word) for word in (sys.argv[1:] if args is None else args))
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("modelval").strip()
        where = f" {command}:" if command else ""
        for old, new in self.moved.items():
            if f"invalid choice: '{old}'" in message or (old == "ACTION" and "ACTION" in message):
                message = f"{message}; {new}" if old == "ACTION" else f"`modelval {old}` is now `modelval {new}`"
        used = {word.split("=", 1)[0] for word in OneLineParser.words}
        known = [f"{flag} is now {new}" for flag, new in OneLineParser.renamed_flags.items() if flag in used]
        if known:
            message += f" ({'; '.join(known)}: docs/settings.md)"
        print(f"modelval: error:{where} {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; {what}") from None


def bounded_int(low: int, high: int, what: str):
    """An argparse type: an integer in ``[low, high]``."""
    return range_type(IntRange(low, high, what))


def range_type(limits: IntRange):
    """An argparse type checking a whole number with the library's own limits (:mod:`modelval.runtime`)."""

    def parse(text: str) -> int:
        value = _integer(text, limits.what)
        problem = limits.problem(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{value} {problem}; {limits.what}")
        return value

    parse.__name__ = "integer"
    return parse


def bounded_float(low: float, high: float, what: str, *, low_open: bool = False):
    """An argparse type: a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; {what}") from None
        if not (low < value if low_open else low <= value) or not value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range; {what}")
        return value

    parse.__name__ = "number"
    return parse


MAX_BINS = 10_000
DEFAULT_BINS = DEFAULT_N_BINS  # 15, the library's default too
bin_count = bounded_int(1, MAX_BINS, f"the number of bins is 1 to {MAX_BINS}")


def bin_count_or_auto(text: str) -> int | str:
    """``--bins``: a bin count, or ``auto`` (the cube-root rule, resolved once the data's size is known)."""
    return "auto" if text == "auto" else bin_count(text)


def add_bootstrap_options(parser: argparse.ArgumentParser, *, stratify: bool = False) -> None:
    """``--bootstrap N`` and ``--seed S`` (:mod:`modelval.settings`), and ``--stratify`` where classes are known."""
    from modelval.cli._options import add_settings

    add_settings(parser, "bootstrap", "seed")
    if stratify:
        parser.add_argument(
            "--stratify", action="store_true", help="resample within each class (class counts stay fixed)"
        )


#: ``--convention`` means the same in every calibration command.
#: How each bin-edge convention reads in an output line: never a bare "(default)" beside a bin count the user chose.
CONVENTION_WORDS = {"default": "(lo, hi] edges", "torchmetrics": "torchmetrics' [lo, hi) edges"}


def bins_text(n_bins: object, convention: str, *, adaptive: bool = False) -> str:
    """``15 bins, (lo, hi] edges``: the bin count and the edge convention in words (``adaptive``: equal-mass)."""
    edges = "equal-mass" if adaptive else CONVENTION_WORDS.get(convention, f"convention {convention}")
    return f"{n_bins} bins, {edges}"


CONVENTION_HELP = (
    "bin edges: default = (lo, hi] bins, confidence 0 in the first (Guo et al., scikit-learn); torchmetrics = "
    "[lo, hi) bins with an extra bin for confidence 1.0, as torchmetrics 1.x"
)


def add_bins_option(parser: argparse.ArgumentParser, *, auto: bool = True) -> None:
    """``--bins``: calibration bins, default :data:`DEFAULT_BINS` everywhere."""
    parser.add_argument(
        "--bins",
        type=bin_count_or_auto if auto else bin_count,
        default=DEFAULT_BINS,
        metavar="N|auto" if auto else "N",
        help=f"calibration bins (default {DEFAULT_BINS}, as Guo et al. 2017)"
        + ("; 'auto': ceil(n^(1/3)) for n predictions" if auto else ""),
    )


# --- outputs: --out FILE (the suffix picks the format), --report-dir DIR, --json -------------------------

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def _name_max(path: Path) -> int:
    """The longest file name (bytes) the file system of ``path``'s nearest existing folder takes (255 on most)."""
    for folder in (path.parent, *path.parent.parents):
        try:
            if folder.is_dir():
                return int(os.pathconf(folder, "PC_NAME_MAX"))
        except (OSError, ValueError, AttributeError):
            break
    return 255


def writable_path(text: str) -> Path:
    """``text`` as a path whose every part the file system can take, checked before anything is read or run.

    A part longer than the file system's limit (255 bytes on most) made ``Path.is_dir`` raise ``OSError`` in the
    argument types below: a traceback before the command started.
    """
    path = Path(text)
    longest = _name_max(path)
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > longest:
            shown = part if len(part) <= 40 else part[:20] + "..." + part[-12:]
            raise argparse.ArgumentTypeError(
                f"the name {shown!r} is {size} bytes; file and folder names are at most {longest} bytes on this "
                "file system: choose a shorter one"
            )
    try:
        path.is_dir()
        path.exists()
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{text}: {error.strerror or error}") from None
    return path


def figure_file(text: str) -> Path:
    """``--out``: a figure file; its suffix picks the format (no suffix: ``FILE.png``)."""
    path = writable_path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is a folder; --out names the figure file (FILE.png, FILE.pdf or FILE.svg), --report-dir a folder"
        )
    if path.suffix and path.suffix.lower() not in FIGURE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"{text}: the suffix picks the figure's format; use {', '.join(FIGURE_SUFFIXES)}"
        )
    return path if path.suffix else path.with_suffix(".png")  # reported as written: FILE.png


def output_file(text: str) -> Path:
    """A file to write (``--decisions-out``, ``baseline save --out``): not an existing folder."""
    path = writable_path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name the file to write")
    return path


def output_folder(text: str) -> Path:
    """``--report-dir``: a folder (created if missing), not an existing file."""
    path = writable_path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; --report-dir names a folder (it is created if missing)")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, not a folder")
            break
    return path


def add_figure_option(parser: argparse._ActionsContainer, what: str) -> None:
    """``--out FILE`` for a command's figure."""
    parser.add_argument(
        "--out", type=figure_file, metavar="FILE", help=f"write {what}; the suffix picks the format (.png, .pdf, .svg)"
    )


def add_report_dir_option(parser: argparse.ArgumentParser, what: str, *, required: bool = False) -> None:
    parser.add_argument(
        "--report-dir", type=output_folder, metavar="DIR", required=required, help=f"write {what} into DIR"
    )


def add_json_option(parser: argparse.ArgumentParser, what: str = "the result") -> None:
    parser.add_argument(
        "--json", action="store_true", help=f"print {what} as one JSON object on stdout instead of the table"
    )
