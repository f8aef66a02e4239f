"""The stimuli on disk: discovery, validation of the layout, and decoding.

The naming grammar lives in :mod:`modelval.behaviour.cue_conflict`; checksums in
:mod:`modelval.datasets.manifest`; downloads in :mod:`modelval.datasets.fetch`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch
from PIL import Image, UnidentifiedImageError
from tqdm.auto import tqdm

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import EXPECTED_CONFLICTS, EXPECTED_IMAGES, Stimulus, parse_stimulus_name
from modelval.behaviour.raw_names import short_image_name
from modelval.datasets.registry import DEFAULT_DATASET, get_dataset
from modelval.errors import DataError
from modelval.paths import user_cache_dir
from modelval.preprocessing import pil_to_uint8

__all__ = [
    "DATA_HOME_ENV",
    "EXPECTED_CONFLICTS",
    "EXPECTED_IMAGES",
    "IMAGE_SIZE",
    "MODEL_VS_HUMAN_SUBDIR",
    "REFERENCE_SUBDIR",
    "Stimulus",
    "data_home",
    "data_home_hint",
    "data_root_origin",
    "decode_stimuli",
    "default_data_root",
    "discover_stimuli",
    "load_image",
    "parse_stimulus_name",
    "resolve_data_root",
    "summarize",
]

IMAGE_SIZE = 224
#: The data home: one folder holding every dataset's folder (cue-conflict/, edges/, filled-silhouettes/,
#: colour/, ...) and the human reference data under reference/ (see :func:`data_home`).
DATA_HOME_ENV = "MODELVAL_DATA_HOME"
#: texture-vs-shape's published raw data (cue-conflict, edges, silhouettes), below the data home.
REFERENCE_SUBDIR = "reference/raw-data"
#: model-vs-human's published raw data (one sub-folder per dataset), below the data home.
MODEL_VS_HUMAN_SUBDIR = "reference/model-vs-human/raw-data"


def data_home() -> Path | None:
    """The data home, ``$MODELVAL_DATA_HOME`` (or ``data_home`` of the config file's ``[settings]``), or ``None``.

    One folder holds all of modelval's data, each kind in its own sub-folder::

        <data home>/
            cue-conflict/<category>/<image>.png        the 1280 cue-conflict stimuli
            edges/  filled-silhouettes/                 the other two texture-vs-shape sets
            colour/  sketch/  ...                       model-vs-human's further sets (dnn/session-1/...)
            reference/raw-data/                         texture-vs-shape's human (and VGG/ResNet) decisions
            reference/model-vs-human/raw-data/<set>/    model-vs-human's human decisions

    A data root (``--data-root``, ``data_root=``) or a reference folder (``--reference-dir``) names one of these
    folders and wins over the home for it. Unset, every folder is looked for in the per-user cache (where
    ``modelval data download`` puts it).

    Returns
    -------
    pathlib.Path or None
        The folder ``$MODELVAL_DATA_HOME`` names (``~`` expanded), or ``None`` when the variable is unset.

    Examples
    --------
    >>> import os
    >>> from modelval.datasets.stimuli import data_home
    >>> saved = os.environ.pop("MODELVAL_DATA_HOME", None)
    >>> data_home() is None
    True
    >>> os.environ["MODELVAL_DATA_HOME"] = "/data/modelval"
    >>> data_home()
    PosixPath('/data/modelval')
    >>> del os.environ["MODELVAL_DATA_HOME"]
    >>> if saved is not None:
    ...     os.environ["MODELVAL_DATA_HOME"] = saved
    """
    from modelval.settings import value

    home = value("data_home")
    return Path(home).expanduser() if home else None


def data_home_hint(what: str = "cue-conflict/") -> str:
    """The one setting that points modelval at its data, phrased for the command line and for Python alike.

    Parameters
    ----------
    what
        The folder the data home should hold.
    """
    return (
        f'set {DATA_HOME_ENV}=DIR to the folder that holds {what} (the data home; or data_home = "DIR" in the '
        "[settings] of modelval.toml)"
    )


def discover_stimuli(
    root: str | os.PathLike[str],
    *,
    expected_count: int | Literal["registry"] | None = "registry",
    dataset: str = DEFAULT_DATASET,
) -> list[Stimulus]:
    """List the images of a stimulus folder with their categories, checking the folder's layout.

    A cue-conflict folder (and an edges or filled-silhouettes one) holds one sub-folder per *shape*
    category, ``airplane/`` to ``truck/``, of images named ``<shape><i>-<texture><j>.png``
    (``<shape><i>.png`` for edges and silhouettes); model-vs-human's further datasets hold
    ``dnn/session-<k>/<image>``, as their release archives unpack. Each image's shape and texture
    category are read from its name, and the list is sorted (by folder, then file name), so its order
    is the same on every machine. Hidden files and the files beside the category folders (a README, a
    licence) are skipped. Only the names and the layout are checked, not the images' bytes:
    ``modelval.verify_stimuli`` checks those against the published checksums.

    Parameters
    ----------
    root
        The dataset's folder, e.g. the one ``modelval.download_stimuli`` fills.
    expected_count
        How many images the folder must hold: ``"registry"`` (the default) for the dataset's published
        count (1280 for cue-conflict, 160 for edges and filled-silhouettes), a number, or ``None`` for
        any number (a subset of the images).
    dataset
        The dataset's name in modelval's registry: ``"cue-conflict"`` (the default), ``"edges"``,
        ``"filled-silhouettes"``, or one of model-vs-human's further datasets (``"colour"``,
        ``"sketch"``, ...).

    Returns
    -------
    list of Stimulus
        One ``Stimulus`` per image, sorted: ``relpath`` (the path below ``root``, e.g.
        ``airplane/airplane1-bicycle2.png``), ``shape``, ``texture`` (equal to ``shape`` for an image
        without a cue conflict) and ``is_conflict``.

    Raises
    ------
    modelval.errors.DataError
        One line naming the offending path: ``root`` is not a folder, a folder that is not one of the
        16 categories, a file name that cannot be parsed, a file whose shape disagrees with its folder,
        no images at all, or (unless ``expected_count`` is None) the wrong number of images; in
        model-vs-human's layout, no ``dnn/`` folder, anything but ``session-<k>`` folders in it, or an
        image that appears twice; also an unknown ``dataset``.

    Examples
    --------
    ``SUBSET`` is a folder with the first two published cue-conflict images of each of the 16
    categories (32 files, 30 of them with conflicting cues):

    >>> from modelval import discover_stimuli
    >>> stimuli = discover_stimuli(SUBSET, expected_count=None)
    >>> len(stimuli), sum(s.is_conflict for s in stimuli)
    (32, 30)
    >>> stimuli[0]
    Stimulus(relpath='airplane/airplane1-bicycle2.png', shape='airplane', texture='bicycle')

    With the default ``expected_count`` the folder must hold the whole published set:

    >>> discover_stimuli(SUBSET)
    Traceback (most recent call last):
    ...
    modelval.errors.DataError: ...: found 32 stimuli, expected 1280; the folder is incomplete or holds extra files. ...
    """
    entry = get_dataset(dataset)
    count = entry.images if expected_count == "registry" else expected_count
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise DataError(
            f"{root} is a file, not the {dataset} folder: name the folder that holds the stimuli (data_root= in "
            f"Python, --data-root DIR on the command line), or {data_home_hint()}"
        )
    if not root.is_dir():
        raise DataError(
            f"{dataset} folder not found: {root}; {data_home_hint(entry.folder + '/')}, "
            f"or run `{entry.download_command}` to fetch the stimuli"
        )
    stimuli: list[Stimulus] = []
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as error:
        raise DataError(f"cannot list {root}: {error.strerror or error}") from None
    if entry.layout == "sessions":
        stimuli, folders = _discover_sessions(root, dataset), []
    for folder in folders:
        if folder.name not in CATEGORIES and (root / entry.folder).is_dir():
            raise DataError(
                f"{root} holds a {entry.folder}/ folder: it is a data home, not the {dataset} folder itself; "
                f"use it as the data home ({DATA_HOME_ENV}={root}) or name {root / entry.folder} as the data root"
            )
        if folder.name not in CATEGORIES:
            raise DataError(
                f"{folder}: unknown category folder {folder.name!r}; the {dataset} folder must hold "
                f"exactly the 16 folders {', '.join(CATEGORIES)}"
            )
        for path in sorted(folder.iterdir()):
            if path.name.startswith("."):
                continue
            shape, texture = entry.label_of(path.name)
            if shape != folder.name:
                raise DataError(f"{path}: shape {shape!r} in the file name disagrees with its folder {folder.name!r}")
            stimuli.append(Stimulus(f"{folder.name}/{path.name}", shape, texture))
    if not stimuli:
        expected = (
            "dnn/session-1/ with the images" if entry.layout == "sessions" else "16 category folders of PNG files"
        )
        raise DataError(f"no stimuli found under {root}: expected {expected}")
    if count is not None and len(stimuli) != count:
        missing = sorted(set(CATEGORIES) - {s.shape for s in stimuli})
        hint = f" (missing categories: {', '.join(missing)})" if missing else ""
        raise DataError(
            f"{root}: found {len(stimuli)} stimuli, expected {count}{hint}; the folder is incomplete "
            "or holds extra files. Re-download with `modelval data download --force`."
        )
    return stimuli


def _discover_sessions(root: Path, dataset: str) -> list[Stimulus]:
    """model-vs-human's release layout, as its archives unpack: ``<root>/dnn/session-<k>/<image>.png``.

    Each file name carries the dataset's code, the condition and the category
    (``0001_nse_dnn_0.00_bicycle_10_n03792782_1418.png``); the short image name must be unique.
    """
    entry = get_dataset(dataset)
    dnn = root / "dnn"
    if not dnn.is_dir():
        raise DataError(
            f"{root}: no dnn/ folder; a {dataset} folder holds dnn/session-1/<images>, as model-vs-human's "
            f"release archive {dataset}.tar.gz unpacks"
        )
    stimuli: list[Stimulus] = []
    seen: dict[str, str] = {}
    for session in sorted(p for p in dnn.iterdir() if not p.name.startswith(".")):
        if not session.is_dir() or not session.name.startswith("session-"):
            raise DataError(f"{session}: {dnn} may hold only session-<k> folders (model-vs-human's layout)")
        for path in sorted(session.iterdir()):
            if path.name.startswith("."):
                continue
            if path.is_dir():
                raise DataError(f"{path}: a folder stands where an image file should be")
            shape, texture = entry.label_of(path.name)
            relpath = f"dnn/{session.name}/{path.name}"
            key = short_image_name(path.name)
            if key in seen:
                raise DataError(f"{root}: the image {key} appears twice ({seen[key]} and {relpath})")
            seen[key] = relpath
            stimuli.append(Stimulus(relpath, shape, texture))
    return stimuli


def resolve_data_root(data_root: str | os.PathLike[str] | None = None, dataset: str = DEFAULT_DATASET) -> Path:
    """The dataset's folder: ``data_root``, else ``<data home>/<folder>``, else the per-user cache.

    Parameters
    ----------
    data_root
        The folder given (``--data-root``, ``data_root=``).
    dataset
        The stimulus set.
    """
    return _data_root_and_origin(data_root, dataset)[0]


def data_root_origin(data_root: str | os.PathLike[str] | None = None, dataset: str = DEFAULT_DATASET) -> str:
    """Which setting :func:`resolve_data_root` took the folder from: the data root, the data home or the cache.

    Parameters
    ----------
    data_root
        The folder given.
    dataset
        The stimulus set.
    """
    return _data_root_and_origin(data_root, dataset)[1]


def _data_root_and_origin(data_root: str | os.PathLike[str] | None, dataset: str) -> tuple[Path, str]:
    if data_root:
        return Path(data_root).expanduser(), "the data root given"
    home = data_home()
    if home is not None:
        return home / get_dataset(dataset).folder, f"the data home {DATA_HOME_ENV}"
    return default_data_root(dataset), "the per-user cache"


def default_data_root(dataset: str = DEFAULT_DATASET) -> Path:
    """``<user cache>/<folder>``: where downloads go when nothing else is configured.

    Parameters
    ----------
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    """
    return user_cache_dir() / get_dataset(dataset).folder


def load_image(path: str | os.PathLike[str]) -> torch.Tensor:
    """Decode one image file to an RGB uint8 (3, H, W) tensor; a clear error names a bad file.

    Parameters
    ----------
    path
        The image file.
    """
    try:
        with Image.open(path) as image:
            image.load()
            return pil_to_uint8(image)
    except FileNotFoundError:
        raise DataError(f"image not found: {path}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise DataError(f"cannot decode image {path}: {error} (truncated or not an image file)") from None


class _StimulusFiles:
    """Decodes one stimulus per item; used by a DataLoader so decoding runs in worker processes.

    A bad file is returned as its error message, not raised: raised in a worker process, the error
    would reach the user wrapped in the worker's "Original Traceback" instead of one line.
    """

    def __init__(self, root: Path, stimuli: Sequence[Stimulus]) -> None:
        self.root = root
        self.relpaths = [s.relpath for s in stimuli]

    def __len__(self) -> int:
        return len(self.relpaths)

    def __getitem__(self, index: int) -> tuple[int, torch.Tensor, str]:
        import torch

        path = self.root / self.relpaths[index]
        blank = torch.zeros((3, IMAGE_SIZE, IMAGE_SIZE), dtype=torch.uint8)
        try:
            image = load_image(path)
        except DataError as error:
            return index, blank, str(error)
        if image.shape != (3, IMAGE_SIZE, IMAGE_SIZE):
            return (
                index,
                blank,
                (
                    f"{path}: image is {tuple(image.shape[1:])}, expected {IMAGE_SIZE}x{IMAGE_SIZE} "
                    "(the published stimuli are all 224x224)"
                ),
            )
        return index, image, ""


def decode_stimuli(
    root: str | os.PathLike[str],
    stimuli: Sequence[Stimulus],
    *,
    workers: int = 0,
    progress: bool = True,
) -> torch.Tensor:
    """Decode all stimuli into one uint8 tensor (N, 3, 224, 224), in the order given; a bad file is one
    :class:`DataError` naming it.

    Parameters
    ----------
    root
        The stimulus folder.
    stimuli
        The images to decode, in order.
    workers
        DataLoader worker processes (0: none); each image lands at its own index, so the result does not depend on it.
    progress
        Show a progress bar.
    """
    import torch

    if workers < 0:
        raise DataError(f"workers must be 0 (decode in this process) or more, got {workers}")
    dataset = _StimulusFiles(Path(root), stimuli)
    images = torch.empty((len(stimuli), 3, IMAGE_SIZE, IMAGE_SIZE), dtype=torch.uint8)
    # A map-style dataset needs only __len__ and __getitem__; _StimulusFiles does not subclass torch's Dataset
    # so that reading this module imports no torch.
    loader: Any = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=workers, shuffle=False)  # type: ignore[arg-type]
    with tqdm(total=len(stimuli), desc="decoding stimuli", unit="img", disable=not progress, leave=False) as bar:
        for indices, batch, errors in loader:
            failed = next((message for message in errors if message), None)
            if failed:
                raise DataError(failed)
            images[indices] = batch
            bar.update(len(indices))
    return images


def summarize(stimuli: Sequence[Stimulus]) -> dict[str, int]:
    """How many images ``stimuli`` hold: all, with a cue conflict, and without.

    Parameters
    ----------
    stimuli
        The stimuli.
    """
    counts = Counter(s.is_conflict for s in stimuli)
    return {"images": len(stimuli), "conflicts": counts[True], "no_conflict": counts[False]}
