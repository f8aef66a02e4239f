"""One observer's decisions on any experiment (cue-conflict, edges, filled silhouettes, model-vs-human's 14
further sets), read from the published raw-data CSV format and aligned by image with another observer's.

Unlike :func:`modelval.behaviour.decisions.read_decisions`, :func:`read_trials` does not need a cue-conflict
name: edge and silhouette images (``0001_edg_s01_0_oven_00_oven10.png``) read as well, each a
:class:`~modelval.behaviour.decisions.Decision` of its ``category``. Observers see the images in different
orders and texture-vs-shape prefixes each name with the session (``NNNN_<exp>_<observer>_0_<cat>_00_``), so
trials are keyed by model-vs-human's short image name (``Decision.image``,
:func:`modelval.behaviour.experiments.short_image_name`): the part after the last ``_`` (``oven10.png``,
``airplane1-bicycle2.png``), or the ImageNet id ``n03792782_1418.png`` of the ImageNet-derived sets of
model-vs-human. A trial also keeps its ``condition`` (the distortion level) as written;
:func:`modelval.behaviour.experiments.canonical_condition` names it as model-vs-human does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from modelval.behaviour.decisions import Decision, parse_rows, reading_csv
from modelval.behaviour.experiments import DATASET_NAMES, EXPERIMENTS, canonical_condition
from modelval.behaviour.raw_names import parse_session_name
from modelval.errors import DataError

#: How a caller can name the experiment when the names cannot tell it (each command says its own way).
DATASET_HINT = "pass --dataset NAME"


def read_trials(path: str | os.PathLike[str]) -> list[Decision]:
    """Read one observer's decision CSV of any experiment in the raw-data format; a clear error names the bad row.

    A published VLM / CLIP response file of Gavrikov et al. (``image, response, pred_label``; cue-conflict only)
    reads by its ``pred_label`` (no class: ``na``), so such an observer enters every comparison as a model does.

    Parameters
    ----------
    path
        The CSV file (``subj,session,trial,rt,object_response,category,condition,imagename``).
    """
    from modelval.behaviour.answers import is_response_file, read_responses

    path = Path(path)
    if is_response_file(path):
        return read_responses(path)
    with reading_csv(path) as reader:  # one reader: a folder, non-UTF-8 text, a huge field are one line
        return parse_rows(path, reader, cue_conflict=False)


def dataset_of(trials: Sequence[Decision], *, filename: str | None = None, hint: str = DATASET_HINT) -> str:
    """The experiment the trials come from, read from the image names (or the raw-data file name).

    Prefixed names carry ``s5n`` / ``edg`` / ``sif`` or one of model-vs-human's codes (``cl``, ``nse``,
    ``ske``, ...; the three Eidolon sets share ``eid`` and are told apart by their conditions); bare
    ``<shape><i>-<texture><j>.png`` names are cue-conflict. Bare edge and silhouette names look the same,
    so those are read from the file name: texture-vs-shape's prefixes (``edge-experiment_``) or
    model-vs-human's dataset names (``edge_``, ``silhouette_``, ``cue-conflict_``, ``colour_``, ...), else
    the caller must name the dataset.

    Parameters
    ----------
    trials
        One observer's decisions.
    filename
        The file they were read from.
    hint
        What the error says to do (the error names only what the caller can do).
    """
    codes: dict[str, set[str]] = {}
    for trial in trials:
        parsed = parse_session_name(trial.imagename)
        if parsed is not None:
            codes.setdefault(parsed.code, set()).add(trial.condition or parsed.condition)
    found: set[str] = set()
    for code, conditions in codes.items():
        candidates = datasets_of_code(code, conditions)
        if len(candidates) > 1:
            raise DataError(f"the image names (code {code!r}) fit {', '.join(candidates)}; {hint} to say which")
        found.update(candidates)
    if len(found) > 1:
        raise DataError(f"the image names mix experiments ({', '.join(sorted(found))}); one file per experiment")
    if found:
        return found.pop()
    base = Path(filename).name if filename else ""
    prefixes = {(prefix, name) for name, e in EXPERIMENTS.items() for prefix in (e.file_prefix, e.upstream)}
    # longest prefix first: ``eidolonII_...`` is not eidolonI's
    for prefix, name in sorted(prefixes, key=lambda item: (-len(item[0]), item[0])):
        if base.startswith(prefix + "_"):
            return name
    named = [name for name, entry in EXPERIMENTS.items() if entry.names and _all_named(entry.names, trials)]
    if len(named) == 1:  # bare cue-conflict names; bare edge and silhouette names fit two experiments
        return named[0]
    raise DataError(
        "cannot tell the experiment from the image names or the file name (edges and filled silhouettes share "
        f"bare names like 'oven10.png'); {hint} (one of {', '.join(DATASET_NAMES)})"
    )


def _all_named(names: Callable[[str], tuple[str, str]], trials: Sequence[Decision]) -> bool:
    try:
        for trial in trials:
            names(trial.image)
    except DataError:
        return False
    return True


def aligned(a: Sequence[Decision], b: Sequence[Decision], *, names: tuple[str, str] = ("A", "B")) -> list[str]:
    """The images both observers saw, sorted; an error when they do not cover the same images.

    A trial-wise comparison on a subset would silently change the statistic, so any difference in the
    image sets (or in the true category of an image) is an error that names a few of the culprits.

    Parameters
    ----------
    a, b
        The two observers' decisions.
    names
        The observers' names, in the errors.
    """
    index_a = {t.image: t for t in a}
    index_b = {t.image: t for t in b}
    only_a = sorted(set(index_a) - set(index_b))
    only_b = sorted(set(index_b) - set(index_a))
    if only_a or only_b:
        parts = [
            f"{len(only)} image(s) only in {name} (e.g. {', '.join(only[:3])})"
            for only, name in ((only_a, names[0]), (only_b, names[1]))
            if only
        ]
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


def correctness(trials: Sequence[Decision], images: Sequence[str]) -> np.ndarray:
    """Boolean vector: whether the observer was correct on each of ``images`` (in that order).

    Parameters
    ----------
    trials
        The observer's decisions.
    images
        Short image names (:func:`aligned`).
    """
    index = {t.image: t for t in trials}
    try:
        return np.array([index[image].correct for image in images], dtype=bool)
    except KeyError as error:
        raise DataError(f"no trial for image {error.args[0]!r}") from None


def responses(trials: Sequence[Decision], images: Sequence[str]) -> list[str]:
    """The observer's response to each of ``images`` (in that order).

    Parameters
    ----------
    trials
        The observer's decisions.
    images
        Short image names (:func:`aligned`).
    """
    index = {t.image: t for t in trials}
    return [index[image].response for image in images]


def datasets_of_code(code: str, conditions: set[str] | None = None) -> list[str]:
    """The datasets whose images carry ``code``; the three Eidolon sets share ``eid`` and are told apart by
    their conditions.

    Parameters
    ----------
    code
        The image-name code (``s5n``, ``edg``, ``eid``, ...).
    conditions
        The raw condition values seen.
    """
    found = [name for name, entry in EXPERIMENTS.items() if entry.code == code]
    if len(found) > 1 and conditions:
        return [name for name in found if all(_fits(raw, name) for raw in conditions)]
    return found


def _fits(raw: str, dataset: str) -> bool:
    try:
        canonical_condition(raw, dataset)
    except DataError:
        return False
    return True
