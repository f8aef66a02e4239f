"""Per-image 16-class decisions, read and written in the published raw-data CSV format.

Format (Geirhos et al., texture-vs-shape ``raw-data/``): ``subj,session,trial,rt,object_response,
category,condition,imagename``. ``category`` is the shape category, ``object_response`` the
decision. Both imagename styles are accepted (``airplane1-bicycle2.png`` and
``0001_s5n_dnn_0_airplane_00_airplane1-bicycle2.png``). Evaluations write this same format, so
a result can be compared row by row with the published data.
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from modelval.atomic import replacing
from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import parse_stimulus_name
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
    """One observer's (model's or human's) 16-class response to one stimulus."""

    imagename: str
    shape: str
    texture: str
    response: str

    @property
    def is_conflict(self) -> bool:
        return self.shape != self.texture

    @property
    def stimulus_name(self) -> str:
        """The name without the texture-vs-shape prefix: ``airplane1-bicycle2.png``."""
        base = self.imagename.rsplit("/", 1)[-1]
        return base.rsplit("_", 1)[-1]


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
        return _parse_decisions(path, reader)


@contextlib.contextmanager
def reading_csv(path: str | os.PathLike[str], what: str = "decision file") -> Iterator[csv.DictReader[str]]:
    """A ``csv.DictReader`` over ``path``, for every reader of CSV files given by a user.

    Whatever goes wrong while the block reads becomes one :class:`DataError` naming the file: a missing
    file, a folder, a file that is not UTF-8 text, a field over the csv module's size limit, a broken
    quote. A UTF-8 byte order mark before the header is skipped.
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


def _parse_decisions(path: Path, reader: csv.DictReader[str]) -> list[Decision]:
    missing = [c for c in ("object_response", "category", "imagename") if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(
            f"{path}: missing column(s) {', '.join(missing)}; expected the raw-data format {','.join(CSV_COLUMNS)}"
        )
    decisions = []
    seen: dict[str, int] = {}
    for line, row in enumerate(reader, start=2):
        if None in row.values() or None in row:
            raise DataError(
                f"{path}, line {line}: {len([v for v in row.values() if v is not None])} fields where the header "
                f"has {len(reader.fieldnames or [])}"
            )
        try:
            shape, texture = parse_stimulus_name(row["imagename"])
        except DataError as error:
            raise DataError(f"{path}, line {line}: {error}") from None
        response = (row["object_response"] or "").strip()
        if response not in CATEGORIES and response != NO_RESPONSE:
            raise DataError(
                f"{path}, line {line}: object_response {response!r} is not one of the 16 categories "
                f"(or {NO_RESPONSE!r} for no response)"
            )
        if row["category"] and row["category"].strip() != shape:
            raise DataError(
                f"{path}, line {line}: category {row['category']!r} disagrees with the shape in "
                f"imagename {row['imagename']!r}"
            )
        decision = Decision(row["imagename"], shape, texture, response)
        first = seen.setdefault(decision.stimulus_name, line)
        if first != line:
            raise DataError(
                f"{path}: two rows for the image {decision.stimulus_name!r} (lines {first} and {line}); "
                "each image may be decided once"
            )
        decisions.append(decision)
    if not decisions:
        raise DataError(f"{path}: no decision rows")
    return decisions


def write_decisions(
    path: str | os.PathLike[str],
    decisions: Iterable[Decision],
    *,
    subject: str,
    session: int = 1,
    name_code: str | None = None,
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
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for trial, decision in enumerate(decisions, start=1):
            name = decision.stimulus_name
            if name_code:
                # "_" separates the fields of a published name, so the subject may not contain one.
                name = f"{trial:04d}_{name_code}_{subject.replace('_', '-')}_0_{decision.shape}_00_{name}"
            writer.writerow([subject, session, trial, "NaN", decision.response, decision.shape, 0, name])
    return path


def by_stimulus(decisions: Sequence[Decision]) -> dict[str, Decision]:
    """Index decisions by stimulus name (the published style's prefix removed); duplicates are an error."""
    index: dict[str, Decision] = {}
    for decision in decisions:
        key = decision.stimulus_name
        if key in index:
            raise DataError(f"two decisions for the same stimulus {key!r}")
        index[key] = decision
    return index
