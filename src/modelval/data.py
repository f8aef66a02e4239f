"""The cue-conflict stimuli: discovery, validation, checksums, download and decoding.

Layout: 16 folders named after the *shape* category, files ``<shape><i>-<texture><j>.png``; the
texture category is the last ``-`` part without its digits. The full set has 1280 images, 80 of
them with shape == texture (no conflict; excluded from shape bias) and 1200 conflicts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image, UnidentifiedImageError
from tqdm.auto import tqdm

from modelval.categories import CATEGORIES
from modelval.download import download_file, sha256_of
from modelval.errors import ChecksumError, DataError
from modelval.paths import fixtures_dir, user_cache_dir
from modelval.preprocessing import pil_to_uint8

EXPECTED_IMAGES = 1280
EXPECTED_CONFLICTS = 1200
IMAGE_SIZE = 224
DATA_ROOT_ENV = "MODELVAL_DATA_ROOT"

#: Public sources of the stimuli (identical images): the model-vs-human release archive and the
#: texture-vs-shape repository folder, file by file.
MODEL_VS_HUMAN_URL = "https://github.com/bethgelab/model-vs-human/releases/download/v0.1/cue-conflict.tar.gz"
TEXTURE_VS_SHAPE_URL = (
    "https://raw.githubusercontent.com/rgeirhos/texture-vs-shape/master/stimuli/style-transfer-preprocessed-512"
)
MANIFEST_NAME = "cue_conflict_manifest.json"

# Both published imagename styles end in "<shape><i>-<texture><j>.png"; the texture-vs-shape style
# prefixes "NNNN_s5n_dnn_0_<cat>_00_".
_STIMULUS_NAME = re.compile(r"(?:^|_)(?P<shape>[a-z]+)(?P<i>\d+)-(?P<texture>[a-z]+)(?P<j>\d+)\.png$")


@dataclass(frozen=True, order=True)
class Stimulus:
    """One cue-conflict image: ``relpath`` is ``<shape folder>/<file name>``."""

    relpath: str
    shape: str
    texture: str

    @property
    def name(self) -> str:
        return self.relpath.rsplit("/", 1)[-1]

    @property
    def is_conflict(self) -> bool:
        return self.shape != self.texture


def parse_stimulus_name(name: str) -> tuple[str, str]:
    """``airplane1-bicycle2.png`` (either published style) -> ``("airplane", "bicycle")``."""
    base = name.rsplit("/", 1)[-1]
    match = _STIMULUS_NAME.search(base)
    if match is None:
        raise DataError(
            f"cannot parse stimulus name {name!r}: expected '<shape><i>-<texture><j>.png', "
            "e.g. 'airplane1-bicycle2.png'"
        )
    shape, texture = match.group("shape"), match.group("texture")
    for role, category in (("shape", shape), ("texture", texture)):
        if category not in CATEGORIES:
            raise DataError(f"{name!r}: unknown {role} category {category!r}; expected one of {', '.join(CATEGORIES)}")
    return shape, texture


def discover_stimuli(root: str | os.PathLike[str], *, expected_count: int | None = EXPECTED_IMAGES) -> list[Stimulus]:
    """List and validate the stimuli under ``root`` (sorted, so the order is reproducible).

    Raises :class:`DataError` naming the offending path for a missing folder, an unknown
    category folder, an unparseable file name, a file whose shape disagrees with its folder, or
    (when ``expected_count`` is set) the wrong number of images.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(
            f"cue-conflict folder not found: {root}. Pass --data-root DIR, set {DATA_ROOT_ENV}, "
            "or run `modelval download-data` to fetch the stimuli."
        )
    stimuli: list[Stimulus] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if folder.name not in CATEGORIES:
            raise DataError(
                f"{folder}: unknown category folder {folder.name!r}; the cue-conflict folder must hold "
                f"exactly the 16 folders {', '.join(CATEGORIES)}"
            )
        for path in sorted(folder.iterdir()):
            if path.name.startswith("."):
                continue
            shape, texture = parse_stimulus_name(path.name)
            if shape != folder.name:
                raise DataError(f"{path}: shape {shape!r} in the file name disagrees with its folder {folder.name!r}")
            stimuli.append(Stimulus(f"{folder.name}/{path.name}", shape, texture))
    if not stimuli:
        raise DataError(f"no stimuli found under {root}: expected 16 category folders of PNG files")
    if expected_count is not None and len(stimuli) != expected_count:
        missing = sorted(set(CATEGORIES) - {s.shape for s in stimuli})
        hint = f" (missing categories: {', '.join(missing)})" if missing else ""
        raise DataError(
            f"{root}: found {len(stimuli)} stimuli, expected {expected_count}{hint}; the folder is incomplete "
            "or holds extra files. Re-download with `modelval download-data --force`."
        )
    return stimuli


def resolve_data_root(data_root: str | os.PathLike[str] | None = None) -> Path:
    """``--data-root``, else ``$MODELVAL_DATA_ROOT``, else the per-user cache."""
    if data_root:
        return Path(data_root).expanduser()
    env = os.environ.get(DATA_ROOT_ENV)
    if env:
        return Path(env).expanduser()
    return default_data_root()


def default_data_root() -> Path:
    return user_cache_dir() / "cue-conflict"


# --- checksums --------------------------------------------------------------------------------


def manifest_path() -> Path:
    return fixtures_dir() / MANIFEST_NAME


def load_manifest(path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """``{relpath: sha256}`` of the 1280 published stimuli (committed in ``fixtures/``)."""
    path = Path(path) if path else manifest_path()
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"checksum manifest not found: {path}") from None
    return dict(payload["files"])


def build_manifest(root: str | os.PathLike[str]) -> dict[str, object]:
    """A manifest of the stimuli under ``root`` (how ``fixtures/cue_conflict_manifest.json`` was made)."""
    stimuli = discover_stimuli(root)
    return {
        "description": "SHA-256 of the 1280 cue-conflict stimuli (Geirhos et al., ICLR 2019; CC BY 4.0)",
        "count": len(stimuli),
        "files": {s.relpath: sha256_of(Path(root) / s.relpath) for s in stimuli},
    }


def verify_stimuli(root: str | os.PathLike[str], manifest: dict[str, str] | None = None) -> None:
    """Check every file under ``root`` against the manifest; raise naming the first bad file."""
    manifest = manifest if manifest is not None else load_manifest()
    root = Path(root)
    found = {s.relpath for s in discover_stimuli(root, expected_count=None)}
    missing = sorted(set(manifest) - found)
    extra = sorted(found - set(manifest))
    if missing or extra:
        raise DataError(
            f"{root} does not match the manifest: {len(missing)} missing (e.g. {missing[:3]}), "
            f"{len(extra)} unexpected (e.g. {extra[:3]})"
        )
    for relpath, expected in manifest.items():
        actual = sha256_of(root / relpath)
        if actual != expected:
            raise ChecksumError(f"{root / relpath}: SHA-256 {actual} does not match the manifest ({expected})")


# --- download ---------------------------------------------------------------------------------


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


# --- decoding ---------------------------------------------------------------------------------


def load_image(path: str | os.PathLike[str]) -> torch.Tensor:
    """Decode one image file to an RGB uint8 (3, H, W) tensor; a clear error names a bad file."""
    try:
        with Image.open(path) as image:
            image.load()
            return pil_to_uint8(image)
    except FileNotFoundError:
        raise DataError(f"image not found: {path}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise DataError(f"cannot decode image {path}: {error} (truncated or not an image file)") from None


class _StimulusFiles(torch.utils.data.Dataset):
    """Decodes one stimulus per item; used by a DataLoader so decoding runs in worker processes."""

    def __init__(self, root: Path, stimuli: Sequence[Stimulus]) -> None:
        self.root = root
        self.relpaths = [s.relpath for s in stimuli]

    def __len__(self) -> int:
        return len(self.relpaths)

    def __getitem__(self, index: int) -> tuple[int, torch.Tensor]:
        path = self.root / self.relpaths[index]
        image = load_image(path)
        if image.shape != (3, IMAGE_SIZE, IMAGE_SIZE):
            raise DataError(
                f"{path}: image is {tuple(image.shape[1:])}, expected {IMAGE_SIZE}x{IMAGE_SIZE} "
                "(the published cue-conflict stimuli are all 224x224)"
            )
        return index, image


def decode_stimuli(
    root: str | os.PathLike[str],
    stimuli: Sequence[Stimulus],
    *,
    workers: int = 0,
    progress: bool = True,
) -> torch.Tensor:
    """Decode all stimuli into one uint8 tensor (N, 3, 224, 224), in the order given.

    ``workers`` > 0 decodes in DataLoader worker processes. Each image lands at its own index, so
    the result does not depend on the number of workers.
    """
    dataset = _StimulusFiles(Path(root), stimuli)
    images = torch.empty((len(stimuli), 3, IMAGE_SIZE, IMAGE_SIZE), dtype=torch.uint8)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=workers, shuffle=False)
    with tqdm(total=len(stimuli), desc="decoding stimuli", unit="img", disable=not progress, leave=False) as bar:
        for indices, batch in loader:
            images[indices] = batch
            bar.update(len(indices))
    return images


def summarize(stimuli: Sequence[Stimulus]) -> dict[str, int]:
    counts = Counter(s.is_conflict for s in stimuli)
    return {"images": len(stimuli), "conflicts": counts[True], "no_conflict": counts[False]}
