"""The published human raw data, checked against its committed manifest.

The human observers are the reference every comparison is measured against, so their files are checked
as the stimuli are: each observer file of the experiment must be there with the SHA-256 of its manifest
(``modelval/data/raw_data_manifest.json`` for texture-vs-shape's three experiments under its names,
``modelval/data/model_vs_human_raw_data_manifest.json`` for model-vs-human's ``raw-data/<dataset>/``: its 14
further datasets, and its copies of the three, the same bytes under its names ``cue-conflict/``, ``edge/``,
``silhouette/``), and no other observer file may stand beside them. One
altered file moves the humans' mutual kappa (0.331 -> 0.256 on cue-conflict for one edited observer); a
deleted one silently leaves nine observers. A modified folder is refused unless the caller allows it,
and then the result says "modified" with what differs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from modelval.behaviour.experiments import MODEL_VS_HUMAN, get_dataset
from modelval.behaviour.humans import HumanPanel, human_files, load_human_panel
from modelval.datasets.fetch import RAW_DATA_MANIFEST
from modelval.datasets.human_data import MODEL_VS_HUMAN_MANIFEST
from modelval.datasets.manifest import hash_stimuli, manifest_differences
from modelval.errors import DataError
from modelval.paths import package_data

VERIFIED = "verified"


def human_manifest(dataset: str, *, publication: str | None = None) -> dict[str, str]:
    """``{file name: sha256}`` of the published human observer files of ``dataset``.

    Parameters
    ----------
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    publication
        Whose file names: ``"texture-vs-shape"`` or ``"model-vs-human"``; default: where the dataset's humans were first
        published (model-vs-human also republishes texture-vs-shape's three).
    """
    entry = get_dataset(dataset)
    if (publication or entry.humans) == MODEL_VS_HUMAN:
        files = json.loads(package_data(MODEL_VS_HUMAN_MANIFEST).read_text())["files"]
        folder = f"{entry.upstream}/"
        return {name.split("/", 1)[1]: digest for name, digest in files.items() if name.startswith(folder)}
    files = json.loads(package_data(RAW_DATA_MANIFEST).read_text())["files"]
    return {name: spec["sha256"] for name, spec in files.items() if name.startswith(f"{entry.file_prefix}_subject-")}


def verify_reference_dir(reference_dir: str | os.PathLike[str], dataset: str, *, allow_modified: bool = False) -> str:
    """``"verified"``, or (with ``allow_modified``) ``"modified: ..."`` saying what differs; else a DataError.

    The observer files are those the panel reads (:func:`~modelval.behaviour.humans.human_files`, in either
    publication's layout): a changed, missing or extra one counts.

    Parameters
    ----------
    reference_dir
        The folder of the human raw data.
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    allow_modified
        Report a difference instead of raising.
    """
    folder = Path(reference_dir)
    paths = [path for sessions in human_files(folder, dataset).values() for path in sessions]
    upstream = get_dataset(dataset).upstream
    # texture-vs-shape's three under model-vs-human's names (``edge/edge_subject-01_session_1.csv``)
    named_upstream = bool(paths) and all(path.name.startswith(f"{upstream}_subject-") for path in paths)
    expected = human_manifest(dataset, publication=MODEL_VS_HUMAN if named_upstream else None)
    digests = hash_stimuli(folder, [str(path.relative_to(folder)) for path in paths])
    problems = manifest_differences({Path(name).name: digest for name, digest in digests.items()}, expected)
    if not problems:
        return VERIFIED
    shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    if not allow_modified:
        raise DataError(
            f"{folder} does not hold the published human observers of {dataset}: {shown}. Restore it "
            f"(`{get_dataset(dataset).humans_command} --force`) or pass --allow-modified-reference to compare against "
            "it anyway"
        )
    count = len(problems)
    files = "1 observer file differs" if count == 1 else f"{count} observer files differ"
    return f"modified: {files} from the manifest ({shown})"


def load_reference_panel(
    reference_dir: str | os.PathLike[str], dataset: str, *, allow_modified: bool = False
) -> tuple[HumanPanel, str]:
    """The human observers of ``dataset`` after :func:`verify_reference_dir`, and what the check found.

    Parameters
    ----------
    reference_dir
        The folder of the human raw data.
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    allow_modified
        Load a modified folder, saying what differs.
    """
    verification = verify_reference_dir(reference_dir, dataset, allow_modified=allow_modified)
    return load_human_panel(reference_dir, dataset), verification


__all__ = ["VERIFIED", "human_manifest", "load_reference_panel", "verify_reference_dir"]
