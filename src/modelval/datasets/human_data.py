"""Where the published human decisions of each of the 17 datasets are found, and model-vs-human's fetched.

Two publications hold them:

- texture-vs-shape's ``raw-data/`` (cue-conflict, edges, filled silhouettes; 10 observers each), fetched
  by ``modelval data download --humans`` into ``<user cache>/raw-data`` (:mod:`modelval.datasets.fetch`);
- model-vs-human's ``raw-data/<dataset>/`` (the 14 further datasets; 4 observers, sketch 7, stylized 5),
  fetched by ``modelval data download --humans --dataset NAME`` into
  ``<user cache>/model-vs-human-raw-data/<dataset>/``, every file checked against
  ``modelval/data/model_vs_human_raw_data_manifest.json`` (SHA-256 at model-vs-human's commit 79ed7cd).

:func:`human_data_dir` finds a dataset's observers: in ``--reference-dir`` when given, else in the data home's
``reference/raw-data`` and ``reference/model-vs-human/raw-data`` (``$MODELVAL_DATA_HOME``) and the two cache
folders, in that order. A folder may be texture-vs-shape's flat ``raw-data/`` or
model-vs-human's, with one sub-folder per dataset.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from modelval.behaviour.experiments import MODEL_VS_HUMAN, experiment
from modelval.behaviour.humans import human_files
from modelval.datasets.fetch import default_raw_data_dir, fetch_files
from modelval.datasets.stimuli import MODEL_VS_HUMAN_SUBDIR, REFERENCE_SUBDIR, data_home, data_home_hint
from modelval.download import mirrored
from modelval.errors import DataError
from modelval.paths import package_data, user_cache_dir

MODEL_VS_HUMAN_MANIFEST = "model_vs_human_raw_data_manifest.json"


def _default_model_vs_human_dir() -> Path:
    """Where ``data download --humans --dataset NAME`` puts model-vs-human's files, one sub-folder per dataset.

    ``<data home>/reference/model-vs-human/raw-data`` when ``$MODELVAL_DATA_HOME`` is set, else
    ``<user cache>/model-vs-human-raw-data``.
    """
    home = data_home()
    return home / MODEL_VS_HUMAN_SUBDIR if home is not None else user_cache_dir() / "model-vs-human-raw-data"


def _candidates(reference_dir: str | os.PathLike[str] | None) -> list[Path]:
    if reference_dir:
        return [Path(reference_dir).expanduser()]
    caches = [user_cache_dir() / "raw-data", user_cache_dir() / "model-vs-human-raw-data"]
    homes = [default_raw_data_dir(), _default_model_vs_human_dir()]
    return list(dict.fromkeys([*homes, *caches]))  # the data home's first, then the cache's


def human_data_dir(dataset: str, reference_dir: str | os.PathLike[str] | None = None) -> Path:
    """The first folder that holds at least two human observers of ``dataset`` (see the module doc).

    Parameters
    ----------
    dataset
        The dataset's name.
    reference_dir
        The one folder to look in (``--reference-dir``), else every default.
    """
    candidates = _candidates(reference_dir)
    for folder in candidates:
        if folder.is_dir() and len(human_files(folder, dataset)) >= 2:
            return folder
    source = experiment(dataset).humans
    where = (
        "model-vs-human's raw-data/ (with a sub-folder per dataset)"
        if source == MODEL_VS_HUMAN
        else ("texture-vs-shape's raw-data/")
    )
    if reference_dir:
        how = f"name a copy of {where}"
    else:
        sub = MODEL_VS_HUMAN_SUBDIR if source == MODEL_VS_HUMAN else REFERENCE_SUBDIR
        how = data_home_hint(f"{sub}/ (a copy of {where})")
    raise DataError(
        f"published human raw data of {dataset} not found (looked in {', '.join(str(c) for c in candidates)}): run "
        f"`{experiment(dataset).humans_command}`, or {how}"
    )


def _manifest() -> dict[str, object]:
    return dict(json.loads(package_data(MODEL_VS_HUMAN_MANIFEST).read_text()))


def _raw_data_url() -> str:
    """model-vs-human's ``raw-data/`` at the recorded commit, or ``$MODELVAL_MIRROR/model-vs-human/raw-data``."""
    manifest = _manifest()
    public = f"https://raw.githubusercontent.com/{manifest['repository']}/{manifest['commit']}/raw-data"
    return mirrored("model-vs-human/raw-data") or public


def download_model_vs_human_raw_data(
    dataset: str,
    destination: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    progress: bool = True,
    timeout: float = 60.0,
    retries: int = 3,
    offline: bool | None = None,
) -> Path:
    """Fetch the human observers' decisions of one of model-vs-human's 14 further datasets.

    Lands in ``<destination>/<dataset>/``, each file verified against the committed SHA-256, the folder moved
    into place only when complete; returns ``destination``. An existing folder is verified, not fetched again.

    Parameters
    ----------
    dataset
        One of model-vs-human's 14 further datasets (``sketch``, ``colour``, ...).
    destination
        The folder of the per-dataset folders (default: ``<data home>/reference/model-vs-human/raw-data``,
        else ``<user cache>/model-vs-human-raw-data``).
    force
        Fetch again even when the folder exists.
    progress
        A progress bar on stderr.
    timeout
        Seconds for connecting and for each read.
    retries
        Further attempts of a failed request.
    offline
        ``True`` never downloads; ``None`` reads the variables.
    """
    if experiment(dataset).humans != MODEL_VS_HUMAN:
        raise DataError(f"{dataset}'s human data is texture-vs-shape's: run `modelval data download --humans`")
    files = {
        name: str(digest)
        for name, digest in dict(_manifest()["files"]).items()  # type: ignore[call-overload]
        if name.startswith(f"{dataset}/")
    }
    root = Path(destination) if destination else _default_model_vs_human_dir()
    base = _raw_data_url()
    each = {Path(name).name: (f"{base}/{name}", digest) for name, digest in files.items()}
    fetch_files(root / dataset, each, f"the {dataset} human data", force=force, progress=progress, timeout=timeout,
                retries=retries, offline=offline)  # fmt: skip
    return root
