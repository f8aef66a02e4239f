"""Downloading the stimuli: the model-vs-human release archive or the texture-vs-shape folder, verified and atomic."""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from modelval.behaviour.categories import CATEGORIES
from modelval.datasets.manifest import load_manifest, verify_stimuli
from modelval.datasets.stimuli import DATA_ROOT_ENV, default_data_root, resolve_data_root
from modelval.download import download_file, resolve_offline
from modelval.errors import DataError, DownloadError

#: Public sources of the stimuli (identical images): the model-vs-human release archive and the
#: texture-vs-shape repository folder, file by file.
MODEL_VS_HUMAN_URL = "https://github.com/bethgelab/model-vs-human/releases/download/v0.1/cue-conflict.tar.gz"
TEXTURE_VS_SHAPE_URL = (
    "https://raw.githubusercontent.com/rgeirhos/texture-vs-shape/master/stimuli/style-transfer-preprocessed-512"
)
#: ``http://host/dir``: replaces the base URL of every data download (as MODELVAL_WEIGHTS_MIRROR does
#: for weights). The mirror holds ``cue-conflict.tar.gz`` (the model-vs-human archive layout,
#: ``cue-conflict/<category>/<file>.png``) and, for the file-by-file source, ``cue-conflict/<category>/<file>.png``.
DATA_MIRROR_ENV = "MODELVAL_DATA_MIRROR"


def data_mirror() -> str | None:
    """The base URL of ``$MODELVAL_DATA_MIRROR`` without a trailing slash, or None."""
    mirror = os.environ.get(DATA_MIRROR_ENV, "").strip()
    return mirror.rstrip("/") or None


def source_url(source: str) -> str:
    """Where ``source`` is fetched from: the public address, or its place on the data mirror."""
    mirror = data_mirror()
    if source == "model-vs-human":
        return f"{mirror}/cue-conflict.tar.gz" if mirror else MODEL_VS_HUMAN_URL
    if source == "texture-vs-shape":
        return f"{mirror}/cue-conflict" if mirror else TEXTURE_VS_SHAPE_URL
    raise ValueError(f"source must be 'model-vs-human' or 'texture-vs-shape', got {source!r}")


def download_stimuli(
    destination: str | os.PathLike[str] | None = None,
    *,
    source: str = "model-vs-human",
    url: str | None = None,
    force: bool = False,
    progress: bool = True,
    timeout: float = 60.0,
    retries: int = 3,
    manifest: dict[str, str] | None = None,
) -> Path:
    """Fetch the public stimuli into ``destination`` and verify every file against the manifest.

    ``source="model-vs-human"`` downloads the release archive (``url`` overrides its address);
    ``source="texture-vs-shape"`` fetches the repository folder file by file (``url`` overrides
    the folder's base address). ``manifest`` defaults to the committed one. The stimuli are
    assembled and verified in a temporary folder beside the destination and moved into place only
    when complete, so an interrupted or corrupt download never leaves a partial dataset behind.
    """
    destination = Path(destination) if destination else resolve_data_root()
    manifest = manifest if manifest is not None else load_manifest()
    if destination.exists() and not force:
        verify_stimuli(destination, manifest)
        return destination
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        if source == "model-vs-human":
            archive = staging / "cue-conflict.tar.gz"
            download_file(url or source_url(source), archive, timeout=timeout, retries=retries, progress=progress)
            extracted = _extract_stimuli_archive(archive, staging / "extracted")
        elif source == "texture-vs-shape":
            extracted = staging / "files"
            base = (url or source_url(source)).rstrip("/")
            for relpath, digest in tqdm(sorted(manifest.items()), desc="stimuli", disable=not progress):
                download_file(
                    f"{base}/{relpath}", extracted / relpath, sha256=digest,
                    timeout=timeout, retries=retries, progress=False,
                )  # fmt: skip
        else:
            raise ValueError(f"source must be 'model-vs-human' or 'texture-vs-shape', got {source!r}")
        verify_stimuli(extracted, manifest)
        if destination.exists():
            shutil.rmtree(destination)
        os.replace(extracted, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return destination


def _extract_stimuli_archive(archive: Path, target: Path) -> Path:
    """Unpack a tar archive safely and return the folder that holds the 16 category folders."""
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
    except (tarfile.TarError, EOFError, OSError) as error:
        raise DataError(f"{archive}: not a readable tar archive ({error})") from None
    for folder in [target, *sorted(p for p in target.rglob("*") if p.is_dir())]:
        children = {p.name for p in folder.iterdir() if p.is_dir()}
        if children and children <= set(CATEGORIES):
            return folder
    raise DataError(f"{archive}: no cue-conflict category folders (airplane/ ... truck/) inside the archive")


def ensure_stimuli(
    data_root: str | os.PathLike[str] | None = None,
    *,
    offline: bool | None = None,
    progress: bool = True,
) -> Path:
    """The cue-conflict folder, downloaded and verified into the user cache first if it is missing.

    Only the default location (no ``--data-root``, no ``$MODELVAL_DATA_ROOT``) is filled
    automatically: a folder the user named is never created behind their back. Offline
    (``offline=True``, ``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE``), or when the download fails,
    the error is one line naming the cause and how to get the stimuli.
    """
    root = resolve_data_root(data_root)
    if root.exists() or data_root or os.environ.get(DATA_ROOT_ENV) or root != default_data_root():
        return root
    how = f"pass --data-root DIR, set {DATA_ROOT_ENV}, or run `modelval download-data`"
    if resolve_offline(offline):
        raise DataError(f"cue-conflict folder not found: {root}, and this run is offline; {how} when online")
    url = source_url("model-vs-human")
    print(f"modelval: fetching the cue-conflict stimuli from {url} into {root}", file=sys.stderr)
    try:
        return download_stimuli(root, progress=progress)
    except (DownloadError, DataError) as error:
        raise DataError(f"cue-conflict folder not found: {root}; downloading it failed: {error}. {how}") from None
