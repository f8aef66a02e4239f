"""Downloading the stimuli: the model-vs-human release archive or the texture-vs-shape folder, verified and atomic."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from modelval.behaviour.categories import CATEGORIES
from modelval.datasets.manifest import load_manifest, verify_stimuli
from modelval.datasets.stimuli import resolve_data_root
from modelval.download import download_file
from modelval.errors import DataError

#: Public sources of the stimuli (identical images): the model-vs-human release archive and the
#: texture-vs-shape repository folder, file by file.
MODEL_VS_HUMAN_URL = "https://github.com/bethgelab/model-vs-human/releases/download/v0.1/cue-conflict.tar.gz"
TEXTURE_VS_SHAPE_URL = (
    "https://raw.githubusercontent.com/rgeirhos/texture-vs-shape/master/stimuli/style-transfer-preprocessed-512"
)


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
            download_file(url or MODEL_VS_HUMAN_URL, archive, timeout=timeout, retries=retries, progress=progress)
            extracted = _extract_stimuli_archive(archive, staging / "extracted")
        elif source == "texture-vs-shape":
            extracted = staging / "files"
            base = (url or TEXTURE_VS_SHAPE_URL).rstrip("/")
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
