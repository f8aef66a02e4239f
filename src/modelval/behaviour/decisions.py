"""One observer's answer on one stimulus (:class:`Decision`), read and written in the published raw-data format.

Format (Geirhos et al., texture-vs-shape ``raw-data/``): ``subj,session,trial,rt,object_response,
category,condition,imagename``. ``category`` is the true (on cue-conflict: the shape) category,
``object_response`` the decision. Both imagename styles are accepted (``airplane1-bicycle2.png`` and
``0001_s5n_dnn_0_airplane_00_airplane1-bicycle2.png``). Evaluations write this same format, so a result can be
compared row by row with the published data. Every reader of answers gives :class:`Decision` rows: the
cue-conflict reader here, the reader of any experiment (:func:`modelval.behaviour.trials.read_trials`) and the
reader of a VLM's response file (:func:`modelval.behaviour.answers.read_responses`).
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from modelval.atomic import replacing
from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import parse_stimulus_name
from modelval.behaviour.raw_names import parse_session_name, short_image_name
from modelval.csvio import csv_writer
from modelval.errors import DataError

#: Published human sessions record "na" when the observer gave no answer in time; it counts as neither
#: a shape nor a texture hit (an "other" response), as in the reference analysis.
NO_RESPONSE = "na"

CSV_COLUMNS: tuple[str, ...] = (
    "subj",
    "session",
    "trial",
    "rt",
    "object_response",
    "category",
    "condition",
    "imagename",
)


@dataclass(frozen=True)
class Decision:
    """One observer's (a model's, a human's, a VLM's) 16-class answer on one stimulus.

    ``shape`` is the true category (the shape on cue-conflict: :attr:`category`), ``texture`` the texture
    category (equal to ``shape`` where the cues do not conflict), ``response`` one of the 16 categories or
    ``na``. ``subject`` and ``condition`` are the raw-data columns (the condition read from a prefixed image
    name when not given); ``answer`` is a VLM's words before they were read as a category.
    """

    imagename: str
    shape: str
    texture: str
    response: str
    subject: str = field(default="", repr=False)
    condition: str = field(default="", repr=False)
    answer: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.condition:  # a release or session name carries its condition (``0001_nse_dnn_0.00_...``)
            parsed = parse_session_name(self.imagename)
            object.__setattr__(self, "condition", parsed.condition if parsed is not None else "")

    @cached_property  # the key of every comparison: a benchmark reads it millions of times
    def image(self) -> str:
        """model-vs-human's short image name, the key that aligns observers (``airplane1-bicycle2.png``,
        ``oven10.png``, ``n03792782_1418.png``)."""
        return short_image_name(self.imagename)

    @property
    def stimulus_name(self) -> str:
        """The same key as :attr:`image`."""
        return self.image

    @property
    def category(self) -> str:
        """The true category: the shape on cue-conflict."""
        return self.shape

    @property
    def correct(self) -> bool:
        """``response == category`` (``na`` is wrong)."""
        return self.response == self.shape

    @property
    def is_conflict(self) -> bool:
        return self.shape != self.texture


def read_decisions(path: str | os.PathLike[str]) -> list[Decision]:
    """Read the per-image decisions of one observer on the cue-conflict stimuli from a CSV file.

    The file is in texture-vs-shape's published raw-data format (``subj,session,trial,rt,
    object_response,category,condition,imagename``), as published for ResNet-50, VGG-16 and the 10
    human observers, and as ``modelval.write_decisions`` and the evaluations write it. Only three
    columns are read: ``imagename`` (either published style, ``airplane1-bicycle2.png`` or
    ``0001_s5n_dnn_0_airplane_00_airplane1-bicycle2.png``), which gives the shape and the texture
    category; ``object_response``, the decision (one of the 16 categories, or ``na`` for a human's
    missing answer); and ``category``, which when filled in must be the shape category. A UTF-8 byte
    order mark before the header is accepted (spreadsheet exports write one). The edge and silhouette
    files, whose image names carry no texture, are not cue-conflict decisions and are refused.

    Parameters
    ----------
    path
        The CSV file.

    Returns
    -------
    list of Decision
        One ``Decision`` per row, in the file's order: ``imagename`` as written, ``shape``,
        ``texture`` and ``response`` (``is_conflict`` is False for the 80 images whose shape equals
        their texture).

    Raises
    ------
    modelval.errors.DataError
        One line naming the file (and the line, for a bad row): a missing file or a folder, a file
        that is not UTF-8 text or not readable as CSV, a missing column, a row with more or fewer
        fields than the header, an image name that is not a cue-conflict name, an unknown response,
        a ``category`` that disagrees with the image name, two rows for the same image (which would be
        counted twice), or no rows at all.

    Examples
    --------
    The published decisions of ResNet-50: 1280 images, 1200 of them with conflicting cues, 162
    answered with the shape category:

    >>> from modelval import read_decisions
    >>> decisions = read_decisions(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> len(decisions), sum(d.is_conflict for d in decisions)
    (1280, 1200)
    >>> first = decisions[0]
    >>> first.imagename
    '0001_s5n_dnn_0_airplane_00_airplane1-bicycle2.png'
    >>> first.shape, first.texture, first.response
    ('airplane', 'bicycle', 'bottle')
    >>> sum(d.response == d.shape for d in decisions if d.is_conflict)
    162

    The first human observer gave no answer in time on 27 trials:

    >>> human = read_decisions(REFERENCE / "style-transfer-512-nomask-experiment_subject-01_session_1.csv")
    >>> sum(d.response == "na" for d in human)
    27

    A response that is not one of the 16 categories is refused, naming the line:

    >>> typo = FOLDER / "typo.csv"
    >>> _ = typo.write_text(
    ...     "subj,session,trial,rt,object_response,category,condition,imagename\\n"
    ...     "me,1,1,0.9,aeroplane,airplane,0,airplane1-bicycle2.png\\n"
    ... )
    >>> read_decisions(typo)
    Traceback (most recent call last):
    ...
    modelval.errors.DataError: .../typo.csv, line 2: object_response 'aeroplane' is not one of the 16 categories ...
    """
    path = Path(path)
    with reading_csv(path) as reader:
        return parse_rows(path, reader, cue_conflict=True)


@contextlib.contextmanager
def reading_csv(path: str | os.PathLike[str], what: str = "decision file") -> Iterator[csv.DictReader[str]]:
    """A ``csv.DictReader`` over ``path``, for every reader of CSV files given by a user.

    Whatever goes wrong while the block reads becomes one :class:`DataError` naming the file: a missing
    file, a folder, a file that is not UTF-8 text, a field over the csv module's size limit, a broken
    quote. A UTF-8 byte order mark before the header is skipped.

    Parameters
    ----------
    path
        The CSV file.
    what
        What the file is, in the errors (``decision file``, ``response file``, ...).
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path} is a folder; pass the {what} (a CSV file) itself")
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"{what} not found: {path}") from None
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    reader = csv.DictReader(handle)
    try:
        with handle:
            yield reader
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text ({_first_bad_byte(path)}): is it a CSV file?") from None
    except csv.Error as error:
        # the record that failed starts after the last line read
        raise DataError(f"{path}, line {reader.line_num + 1}: not a readable CSV file ({error})") from None
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None


def _first_bad_byte(path: Path) -> str:
    """``line L, byte B`` of the first byte that is not UTF-8 (the decoder's own offset is within a chunk)."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return f"line {line}, byte {error.start}"
    return "a byte"


def parse_rows(path: Path, reader: csv.DictReader[str], *, cue_conflict: bool) -> list[Decision]:
    """The rows of a raw-data CSV as decisions; a bad row is an error naming the file and the line.

    Headers are read without regard to case (model-vs-human's sessions write ``Session``). A cue-conflict
    name gives the shape and the texture (with ``cue_conflict`` every name must be one, and ``category`` may
    be empty); any other name is an image of its ``category``, one of the 16.

    Parameters
    ----------
    path
        The file, for the errors.
    reader
        Its rows (:func:`reading_csv`).
    cue_conflict
        True: only cue-conflict stimuli (:func:`read_decisions`); False: any experiment.
    """
    reader.fieldnames = [name.strip().lower() for name in reader.fieldnames or []]
    missing = [c for c in ("object_response", "category", "imagename") if c not in reader.fieldnames]
    if missing:
        raise DataError(
            f"{path}: missing column(s) {', '.join(missing)}; expected the raw-data format {','.join(CSV_COLUMNS)}"
        )
    decisions: list[Decision] = []
    seen: dict[str, int] = {}
    for line, row in enumerate(reader, start=2):
        if None in row.values() or None in row:
            raise DataError(
                f"{path}, line {line}: {len([v for v in row.values() if v is not None])} fields where the header "
                f"has {len(reader.fieldnames)}"
            )
        imagename, category, response = (row[c].strip() for c in ("imagename", "category", "object_response"))
        if response not in CATEGORIES and response != NO_RESPONSE:
            raise DataError(
                f"{path}, line {line}: object_response {response!r} is not one of the 16 categories "
                f"(or {NO_RESPONSE!r} for no response)"
            )
        shape, texture = _labels(path, line, imagename, category, cue_conflict)
        decision = Decision(
            imagename, shape, texture, response, (row.get("subj") or "").strip(), (row.get("condition") or "").strip()
        )
        first = seen.setdefault(decision.image, line)
        if first != line:
            raise DataError(
                f"{path}: two rows for the image {decision.image!r} (lines {first} and {line}); "
                "each image may be decided once"
            )
        decisions.append(decision)
    if not decisions:
        raise DataError(f"{path}: no decision rows")
    return decisions


def _labels(path: Path, line: int, imagename: str, category: str, cue_conflict: bool) -> tuple[str, str]:
    """(shape, texture) of one row: from a cue-conflict name (which ``category`` must agree with), else the
    row's ``category``."""
    try:
        shape, texture = parse_stimulus_name(imagename)
    except DataError as error:
        if cue_conflict:
            raise DataError(f"{path}, line {line}: {error}") from None
        if category not in CATEGORIES:
            raise DataError(f"{path}, line {line}: category {category!r} is not one of the 16 categories") from None
        if not imagename:
            raise DataError(f"{path}, line {line}: empty imagename") from None
        return category, category
    if (category or not cue_conflict) and category != shape:
        raise DataError(
            f"{path}, line {line}: category {category!r} disagrees with the shape in imagename {imagename!r}"
        )
    return shape, texture


def write_decisions(
    path: str | os.PathLike[str],
    decisions: Iterable[Decision],
    *,
    subject: str,
    session: int = 1,
    name_code: str | None = None,
    as_written: bool = False,
) -> Path:
    """Write per-image decisions to a CSV file in texture-vs-shape's published raw-data format.

    The columns are ``subj,session,trial,rt,object_response,category,condition,imagename``, one row per
    decision in the order given: ``trial`` counts from 1, ``rt`` is ``NaN`` (as in the published model
    files), ``object_response`` is the decision, ``category`` the shape category and ``condition`` 0.
    The file can be read back with ``modelval.read_decisions`` and compared row by row with the
    published data. It is written whole or not at all: the rows go to a temporary file beside ``path``
    that replaces ``path`` only when complete, so an existing file is never left truncated.

    Parameters
    ----------
    path
        The CSV file to write (its folder is created if needed; an existing file is replaced).
    decisions
        The decisions (``Decision``), e.g. from ``modelval.read_decisions`` or an evaluation.
    subject
        The observer's name, written in the ``subj`` column (and in the image names with ``name_code``).
    session
        The session number, written in the ``session`` column.
    name_code
        ``None`` (the default) writes the bare stimulus file name (``airplane1-bicycle2.png``). An
        experiment code (``s5n`` cue-conflict, ``edg`` edges, ``sif`` filled silhouettes) writes
        texture-vs-shape's published style instead, ``NNNN_<code>_<subject>_0_<category>_00_<file>``
        (trial number, code, subject with ``_`` written as ``-``), from which the experiment can be
        read back.
    as_written
        True writes each ``imagename`` and ``condition`` as they are, as model-vs-human writes a model's
        decisions (``ResultPrinter``): a release image name carries its code and condition already.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    modelval.errors.DataError
        ``path`` cannot be written (a folder, a parent that is a file, no permission, a full disk).

    Examples
    --------
    ResNet-50's published decisions written again in the published image-name style and read back: the
    same shape bias.

    >>> from modelval import compute_shape_bias, read_decisions, write_decisions
    >>> published = read_decisions(REFERENCE / "style-transfer-512-nomask-experiment_resnet50_session-1.csv")
    >>> path = write_decisions(FOLDER / "resnet50.csv", published, subject="resnet50", name_code="s5n")
    >>> for line in path.read_text().splitlines()[:2]:
    ...     print(line)
    subj,session,trial,rt,object_response,category,condition,imagename
    resnet50,1,1,NaN,bottle,airplane,0,0001_s5n_resnet50_0_airplane_00_airplane1-bicycle2.png
    >>> round(compute_shape_bias(read_decisions(path)).shape_bias, 4)
    0.2207

    Without ``name_code`` the bare stimulus name is written:

    >>> bare = write_decisions(FOLDER / "bare.csv", published[:1], subject="resnet50", session=2)
    >>> print(bare.read_text().splitlines()[1])
    resnet50,2,1,NaN,bottle,airplane,0,airplane1-bicycle2.png
    """
    path = Path(path)
    with replacing(path, newline="") as handle:  # whole or not at all (a full disk loses nothing)
        writer = csv_writer(handle)
        writer.writerow(CSV_COLUMNS)
        for trial, decision in enumerate(decisions, start=1):
            name, condition = (decision.imagename, decision.condition) if as_written else (decision.image, 0)
            if name_code:
                # "_" separates the fields of a published name, so the subject may not contain one.
                name = f"{trial:04d}_{name_code}_{subject.replace('_', '-')}_0_{decision.shape}_00_{name}"
            writer.writerow([subject, session, trial, "NaN", decision.response, decision.shape, condition, name])
    return path


def by_stimulus(decisions: Sequence[Decision]) -> dict[str, Decision]:
    """Index decisions by stimulus name (the published style's prefix removed); duplicates are an error.

    Parameters
    ----------
    decisions
        One observer's decisions.
    """
    index: dict[str, Decision] = {}
    for decision in decisions:
        key = decision.stimulus_name
        if key in index:
            raise DataError(f"two decisions for the same stimulus {key!r}")
        index[key] = decision
    return index
