"""Trial-wise decisions of any experiment (cue-conflict, edges, filled silhouettes), aligned by image.

A :class:`Trial` is one observer's response to one image, read from the published raw-data CSV
format (``subj,session,trial,rt,object_response,category,condition,imagename``). Unlike
:func:`modelval.behaviour.decisions.read_decisions` it does not need a cue-conflict name: edge and
silhouette images (``0001_edg_s01_0_oven_00_oven10.png``) read as well.

Observers see the images in different orders and texture-vs-shape prefixes each name with the
session (``NNNN_<exp>_<observer>_0_<cat>_00_``), so trials are keyed by model-vs-human's short image
name (:func:`modelval.behaviour.experiments.short_image_name`): the part after the last ``_``
(``oven10.png``, ``airplane1-bicycle2.png``), or the ImageNet id ``n03792782_1418.png`` of the
ImageNet-derived sets of model-vs-human. A trial also keeps its ``condition`` (the distortion level) as
written; :func:`modelval.behaviour.experiments.canonical_condition` names it as model-vs-human does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import parse_stimulus_name
from modelval.behaviour.decisions import NO_RESPONSE, Decision, reading_csv
from modelval.behaviour.experiments import (
    MODEL_VS_HUMAN_DATASETS,
    datasets_of_code,
    experiment,
    parse_session_name,
    short_image_name,
)
from modelval.errors import DataError

#: The three experiments of Geirhos et al. (ICLR 2019) with human raw data, and how they are named:
#: the image-name code texture-vs-shape puts in each ``imagename`` and the raw-data file prefix. The 14
#: further datasets of model-vs-human (NeurIPS 2021) follow (``modelval.behaviour.experiments``); their
#: raw-data files are ``<dataset>_subject-NN_session_1.csv``.
DATASETS: tuple[str, ...] = ("cue-conflict", "edges", "filled-silhouettes", *MODEL_VS_HUMAN_DATASETS)
NAME_CODES: dict[str, str] = {"s5n": "cue-conflict", "edg": "edges", "sif": "filled-silhouettes"}
FILE_PREFIXES: dict[str, str] = {
    "cue-conflict": "style-transfer-512-nomask-experiment",
    "edges": "edge-experiment",
    "filled-silhouettes": "silhouette-filled-experiment",
    **{name: name for name in MODEL_VS_HUMAN_DATASETS},
}


@dataclass(frozen=True)
class Trial:
    """One response to one image: ``correct`` means ``response == category`` (``na`` is wrong)."""

    image: str  # the bare file name, the key that aligns observers
    category: str  # the true (for cue-conflict: shape) category
    response: str  # one of the 16 categories, or "na" (no answer in time)
    imagename: str = ""  # as written in the file
    subject: str = ""  # the ``subj`` column: who answered
    condition: str = ""  # the ``condition`` column (or the image name's), as written: ``0.00``, ``true``, ``c05``

    @property
    def correct(self) -> bool:
        return self.response == self.category


def image_key(imagename: str) -> str:
    """``0001_edg_s01_0_oven_00_oven10.png`` -> ``oven10.png``, ``..._n03792782_1418.png`` -> ``n03792782_1418.png``
    (model-vs-human's short name; a bare name is returned unchanged)."""
    return short_image_name(imagename)


def condition_in_name(imagename: str) -> str:
    """The condition field of a prefixed image name (``0001_nse_dnn_0.00_...`` -> ``0.00``), else ``""``."""
    parsed = parse_session_name(imagename)
    return parsed.condition if parsed is not None else ""


def read_trials(path: str | os.PathLike[str]) -> list[Trial]:
    """Read one observer's decision CSV in the raw-data format; a clear error names the bad row.

    A published VLM / CLIP response file of Gavrikov et al. (``image, response, pred_label``; cue-conflict only)
    reads by its ``pred_label`` (no class: ``na``), so such an observer enters every comparison as a model does.
    """
    from modelval.behaviour.answers import is_response_file, read_responses

    path = Path(path)
    if is_response_file(path):
        return trials_from_decisions(read_responses(path))
    with reading_csv(path) as reader:  # one reader: a folder, non-UTF-8 text, a huge field are one line
        # model-vs-human's sessions write ``Session`` where texture-vs-shape writes ``session``: headers are
        # read without regard to case, as model-vs-human reads them
        reader.fieldnames = [name.strip().lower() for name in reader.fieldnames or []]
        missing = [c for c in ("object_response", "category", "imagename") if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(
                f"{path}: missing column(s) {', '.join(missing)}; expected the raw-data format "
                "subj,session,trial,rt,object_response,category,condition,imagename"
            )
        trials = []
        for line, row in enumerate(reader, start=2):
            response = (row["object_response"] or "").strip()
            category = (row["category"] or "").strip()
            imagename = (row["imagename"] or "").strip()
            if response not in CATEGORIES and response != NO_RESPONSE:
                raise DataError(
                    f"{path}, line {line}: object_response {response!r} is not one of the 16 categories "
                    f"(or {NO_RESPONSE!r} for no response)"
                )
            if category not in CATEGORIES:
                raise DataError(f"{path}, line {line}: category {category!r} is not one of the 16 categories")
            if not imagename:
                raise DataError(f"{path}, line {line}: empty imagename")
            subject = (row.get("subj") or "").strip()
            condition = (row.get("condition") or "").strip() or condition_in_name(imagename)
            trials.append(Trial(image_key(imagename), category, response, imagename, subject, condition))
    if not trials:
        raise DataError(f"{path}: no decision rows")
    _check_unique(trials, str(path))
    return trials


def trials_from_decisions(decisions: Sequence[Decision]) -> list[Trial]:
    """Cue-conflict :class:`Decision` objects (e.g. of an evaluation) as trials; correct = the shape."""
    trials = [
        Trial(image_key(d.imagename), d.shape, d.response, d.imagename, condition=condition_in_name(d.imagename))
        for d in decisions
    ]
    _check_unique(trials, "the decisions")
    return trials


def write_trials(path: str | os.PathLike[str], trials: Sequence[Trial], *, subject: str, session: int = 1) -> Path:
    """Write trials as model-vs-human writes a model's decisions (``evaluation/evaluate.py``, ``ResultPrinter``):
    the raw-data columns, rt ``NaN``, the condition and the image name as they are (a release image name
    carries both). The file appears only when complete (written beside it, then renamed)."""
    import csv

    from modelval.atomic import replacing
    from modelval.behaviour.decisions import CSV_COLUMNS

    path = Path(path)
    with replacing(path, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for number, trial in enumerate(trials, start=1):
            name = trial.imagename or trial.image
            writer.writerow([subject, session, number, "NaN", trial.response, trial.category, trial.condition, name])
    return path


def _check_unique(trials: Sequence[Trial], where: str) -> None:
    seen: set[str] = set()
    for trial in trials:
        if trial.image in seen:
            raise DataError(f"{where}: two trials for the same image {trial.image!r}")
        seen.add(trial.image)


#: How a caller can name the experiment when the names cannot tell it (each command says its own way).
DATASET_HINT = "pass --dataset NAME"


def dataset_of(trials: Sequence[Trial], *, filename: str | None = None, hint: str = DATASET_HINT) -> str:
    """The experiment the trials come from, read from the image names (or the raw-data file name).

    Prefixed names carry ``s5n`` / ``edg`` / ``sif`` or one of model-vs-human's codes (``cl``, ``nse``,
    ``ske``, ...; the three Eidolon sets share ``eid`` and are told apart by their conditions); bare
    ``<shape><i>-<texture><j>.png`` names are cue-conflict. Bare edge and silhouette names look the same,
    so those are read from the file name: texture-vs-shape's prefixes (``edge-experiment_``) or
    model-vs-human's dataset names (``edge_``, ``silhouette_``, ``cue-conflict_``, ``colour_``, ...), else
    the caller must name the dataset; ``hint`` says how (the error names only what the caller can do).
    """
    codes: dict[str, set[str]] = {}
    for trial in trials:
        parsed = parse_session_name(trial.imagename)
        if parsed is not None:
            codes.setdefault(parsed.code, set()).add(trial.condition or parsed.condition)
    found: set[str] = set()
    for code, conditions in codes.items():
        if code in NAME_CODES:
            found.add(NAME_CODES[code])
            continue
        candidates = datasets_of_code(code, conditions)
        if len(candidates) > 1:
            raise DataError(f"the image names (code {code!r}) fit {', '.join(candidates)}; {hint} to say which")
        found.update(candidates)
    if len(found) > 1:
        raise DataError(f"the image names mix experiments ({', '.join(sorted(found))}); one file per experiment")
    if found:
        return found.pop()
    if filename:
        base = Path(filename).name
        prefixes = {(prefix, name) for name, prefix in FILE_PREFIXES.items()}
        prefixes |= {(experiment(name).upstream, name) for name in DATASETS}  # model-vs-human's file names
        # longest prefix first: ``eidolonII_...`` is not eidolonI's
        for prefix, name in sorted(prefixes, key=lambda item: (-len(item[0]), item[0])):
            if base.startswith(prefix + "_"):
                return name
    if all(_is_cue_conflict(trial.image) for trial in trials):
        return "cue-conflict"
    raise DataError(
        "cannot tell the experiment from the image names or the file name (edges and filled silhouettes share "
        f"bare names like 'oven10.png'); {hint} (one of {', '.join(DATASETS)})"
    )


def _is_cue_conflict(image: str) -> bool:
    try:
        parse_stimulus_name(image)
    except DataError:
        return False
    return True


def check_dataset(name: str) -> str:
    """``name`` if it is one of the 17 experiments with human data, else a clear error."""
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; expected one of: {', '.join(DATASETS)}")
    return name


def aligned(a: Sequence[Trial], b: Sequence[Trial], *, names: tuple[str, str] = ("A", "B")) -> list[str]:
    """The images both observers saw, sorted; an error when they do not cover the same images.

    A trial-wise comparison on a subset would silently change the statistic, so any difference in the
    image sets (or in the true category of an image) is an error that names a few of the culprits.
    """
    index_a = {t.image: t for t in a}
    index_b = {t.image: t for t in b}
    only_a = sorted(set(index_a) - set(index_b))
    only_b = sorted(set(index_b) - set(index_a))
    if only_a or only_b:
        parts = []
        if only_a:
            parts.append(f"{len(only_a)} image(s) only in {names[0]} (e.g. {', '.join(only_a[:3])})")
        if only_b:
            parts.append(f"{len(only_b)} image(s) only in {names[1]} (e.g. {', '.join(only_b[:3])})")
        raise DataError(
            f"{names[0]} and {names[1]} do not cover the same images: {'; '.join(parts)}. "
            "Trial-wise statistics need the same images in both files (same experiment, complete sessions)."
        )
    images = sorted(index_a)
    for image in images:
        if index_a[image].category != index_b[image].category:
            raise DataError(
                f"{names[0]} and {names[1]} disagree on the category of {image!r} "
                f"({index_a[image].category} vs {index_b[image].category})"
            )
    return images


def correctness(trials: Sequence[Trial], images: Sequence[str]) -> np.ndarray:
    """Boolean vector: whether the observer was correct on each of ``images`` (in that order)."""
    index = {t.image: t for t in trials}
    try:
        return np.array([index[image].correct for image in images], dtype=bool)
    except KeyError as error:
        raise DataError(f"no trial for image {error.args[0]!r}") from None


def responses(trials: Sequence[Trial], images: Sequence[str]) -> list[str]:
    """The observer's response to each of ``images`` (in that order)."""
    index = {t.image: t for t in trials}
    return [index[image].response for image in images]


def decisions_from_trials(trials: Sequence[Trial]) -> list[Decision]:
    """Cue-conflict trials as :class:`Decision` objects (shape and texture read from the image name)."""
    decisions = []
    for trial in trials:
        shape, texture = parse_stimulus_name(trial.image)
        if shape != trial.category:
            raise DataError(f"{trial.imagename!r}: category {trial.category!r} disagrees with the shape {shape!r}")
        decisions.append(Decision(trial.imagename or trial.image, shape, texture, trial.response))
    return decisions
