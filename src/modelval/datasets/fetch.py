"""Downloading the stimuli: the model-vs-human release archive or the texture-vs-shape folder, verified and atomic."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from tqdm.auto import tqdm

from modelval.behaviour.categories import CATEGORIES
from modelval.datasets.manifest import load_manifest, verify_stimuli
from modelval.datasets.registry import TEXTURE_VS_SHAPE_RAW, get_dataset
from modelval.datasets.release import ArchiveLimits
from modelval.datasets.stimuli import (
    REFERENCE_SUBDIR,
    data_home,
    data_home_hint,
    data_root_origin,
    default_data_root,
    resolve_data_root,
)
from modelval.download import (
    check_transfer_settings,
    download_file,
    fill_folder,
    mirrored,
    resolve_offline,
    verify_sha256,
)
from modelval.errors import DataError, DownloadError
from modelval.paths import package_data, user_cache_dir

SOURCES = ("model-vs-human", "texture-vs-shape")


def source_url(source: str, dataset: str = "cue-conflict") -> str:
    """Where ``dataset`` is fetched from by ``source``: the public address, or its place on the mirror.

    ``model-vs-human`` is the release archive (cue-conflict only); ``texture-vs-shape`` is the
    repository folder, fetched file by file (``<url>/<category>/<file>``).

    Parameters
    ----------
    source
        ``model-vs-human`` or ``texture-vs-shape``.
    dataset
        The dataset's name in the registry.
    """
    entry = get_dataset(dataset)
    if source == "model-vs-human":
        if entry.archive_url is None:
            raise DataError(f"{dataset} has no release archive; use --source texture-vs-shape")
        return mirrored(f"{entry.folder}.tar.gz") or entry.archive_url
    if source == "texture-vs-shape":
        if not entry.folder_url:
            raise DataError(f"{dataset} has no file-by-file source; use --source model-vs-human (the release archive)")
        return mirrored(entry.folder) or entry.folder_url
    raise DataError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")


def _default_source(dataset: str) -> str:
    """The source a dataset is fetched from by default: its release archive when it has one, else file by file."""
    return "model-vs-human" if get_dataset(dataset).archive_url else "texture-vs-shape"


def download_stimuli(
    destination: str | os.PathLike[str] | None = None,
    *,
    dataset: str = "cue-conflict",
    source: str | None = None,
    url: str | None = None,
    force: bool = False,
    progress: bool = True,
    timeout: float = 60.0,
    retries: int = 3,
    manifest: dict[str, str] | None = None,
    offline: bool | None = None,
) -> Path:
    """Download a published stimulus set into a folder and verify every file against its manifest.

    The images come from model-vs-human's release archive or file by file from texture-vs-shape's repository
    folder (``$MODELVAL_MIRROR`` or ``url`` point at another server), are checked against the SHA-256 digests of
    the manifest, and replace ``destination`` only when all are there and correct (``download.fill_folder``). An
    existing ``destination`` is verified and returned, not fetched again (unless ``force``); offline nothing is
    fetched. model-vs-human's 14 further datasets have no published checksums: with ``manifest=None`` they are
    checked against the record of their first download (:mod:`modelval.datasets.release`).

    Parameters
    ----------
    destination
        The folder to fill (default: the dataset's folder of the data home, else of the per-user cache).
    dataset
        The dataset's name in modelval's registry (``cue-conflict``, ``edges``, ...).
    source
        ``"model-vs-human"`` (the archive ``<dataset>.tar.gz``) or ``"texture-vs-shape"`` (one request per file);
        ``None`` picks the archive when the dataset has one.
    url
        The archive's address, or the base URL of the folder (``<url>/<category>/<file>``), instead of the public
        one or the mirror's.
    force
        Download again even when ``destination`` exists; it is replaced once the new copy verifies.
    progress
        Show progress bars (on stderr).
    timeout
        Seconds for connecting and for each read; slower than 1 KiB/s over such a window is a stalled transfer.
    retries
        How often a failed request is tried again, with exponential backoff.
    manifest
        ``{relpath: sha256}`` of the files the folder must hold (default: the committed manifest of ``dataset``).
    offline
        ``True`` never downloads; ``None``: offline when ``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE`` is set.

    Returns
    -------
    pathlib.Path
        ``destination``, holding the verified stimuli.

    Raises
    ------
    modelval.errors.DownloadError
        A file could not be downloaded after the retries, or the run is offline and ``destination`` is missing.
    modelval.errors.DataError
        A file differs from the manifest (:class:`~modelval.errors.ChecksumError`), a folder lacks files or holds
        others, an archive is unreadable or refused, or ``dataset`` or ``source`` is unknown.

    Examples
    --------
    Offline-proof, from a server on 127.0.0.1 serving ``SUBSET`` (the first two published images of each
    category) as a lab's mirror would, with the part of the committed manifest that lists them. Without ``url``
    and ``manifest`` the same call fetches all 1280 images from GitHub and checks them against the whole manifest.

    >>> import functools, http.server, threading
    >>> from modelval import download_stimuli
    >>> from modelval.datasets import load_manifest
    >>> class Quiet(http.server.SimpleHTTPRequestHandler):
    ...     def log_message(self, *args):  # no line per request on stderr
    ...         pass
    >>> server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=SUBSET))
    >>> threading.Thread(target=server.serve_forever, daemon=True).start()
    >>> mirror = f"http://127.0.0.1:{server.server_port}"
    >>> published = load_manifest()
    >>> served = {p.relative_to(SUBSET).as_posix(): published[p.relative_to(SUBSET).as_posix()]
    ...           for p in SUBSET.rglob("*.png")}
    >>> len(served), len(published)
    (32, 1280)
    >>> folder = download_stimuli(
    ...     FOLDER / "cue-conflict", source="texture-vs-shape", url=mirror, manifest=served, progress=False
    ... )
    >>> folder == FOLDER / "cue-conflict", len(list(folder.rglob("*.png")))
    (True, 32)
    >>> server.shutdown()
    >>> server.server_close()

    Called again, the folder is verified and returned; nothing is fetched (the server is gone):

    >>> download_stimuli(folder, manifest=served, offline=True) == folder
    True

    Offline, a missing folder is an error rather than a download:

    >>> download_stimuli(FOLDER / "elsewhere", offline=True)
    Traceback (most recent call last):
    ...
    modelval.errors.DownloadError: this run is offline (--offline, MODELVAL_OFFLINE or HF_HUB_OFFLINE): not fetching ...
    """
    check_transfer_settings(timeout, retries)
    source = source or _default_source(dataset)
    if source not in SOURCES:
        raise DataError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    destination = Path(destination) if destination else resolve_data_root(dataset=dataset)
    entry = get_dataset(dataset)
    if entry.manifest is None and manifest is None:
        # model-vs-human's further sets: no published checksums; checked and recorded on first fetch
        from modelval.datasets.release import fetch_release

        address = url or source_url(source, dataset)
        return fetch_release(
            dataset, destination, url=address, force=force, progress=progress, timeout=timeout, retries=retries,
            offline=offline,
        )  # fmt: skip
    # The set's exact size is known when its files are the committed manifest's; else a bound per image.
    known = entry.image_bytes if manifest is None else None
    files = manifest if manifest is not None else load_manifest(dataset=dataset)

    def fill(staging: Path) -> Path:
        address = url or source_url(source, dataset)
        if source == "model-vs-human":
            archive = staging / f"{dataset}.tar.gz"
            download_file(address, archive, timeout=timeout, retries=retries, progress=progress)
            return _extract_stimuli_archive(
                archive, staging / "extracted", ArchiveLimits.for_images(dataset, len(files), known)
            )
        each = {relpath: (f"{address.rstrip('/')}/{relpath}", digest) for relpath, digest in files.items()}
        return _fetch_each(staging, each, dataset, progress, timeout, retries)

    return fill_folder(
        destination, f"the {dataset} stimuli", lambda folder: verify_stimuli(folder, files, dataset=dataset), fill,
        force=force, offline=offline,
    )  # fmt: skip


def fetch_files(
    destination: Path,
    files: Mapping[str, tuple[str, str]],
    what: str,
    *,
    force: bool = False,
    progress: bool = True,
    timeout: float = 60.0,
    retries: int = 3,
    offline: bool | None = None,
) -> Path:
    """Fill ``destination`` with ``files``, each downloaded and verified against its SHA-256 (``download.fill_folder``).

    Parameters
    ----------
    destination
        The folder to fill.
    files
        ``name -> (url, sha256)``; the name is the file's path in the folder.
    what
        What the files are, for the messages and the progress bar.
    force, progress, timeout, retries, offline
        As :func:`download_stimuli` takes them.
    """

    def check(folder: Path) -> None:
        for name, (_, digest) in files.items():
            if not (folder / name).is_file():
                raise DataError(f"{folder} is incomplete: {name} is missing; re-run with --force")
            verify_sha256(folder / name, sha256=digest)

    def fill(staging: Path) -> Path:
        return _fetch_each(staging, files, what, progress, timeout, retries)

    return fill_folder(destination, what, check, fill, force=force, offline=offline)


def _fetch_each(
    staging: Path, files: Mapping[str, tuple[str, str]], what: str, progress: bool, timeout: float, retries: int
) -> Path:
    for name, (url, digest) in tqdm(sorted(files.items()), desc=what, disable=not progress):
        download_file(url, staging / "files" / name, sha256=digest, timeout=timeout, retries=retries, progress=False)
    return staging / "files"


def _extract_stimuli_archive(archive: Path, target: Path, limits: ArchiveLimits) -> Path:
    """Unpack the files inside category folders (``<prefix>/<category>/<file>``) of a stimulus archive safely
    (:func:`~modelval.datasets.release.safe_extract`); return the folder that holds the category folders."""
    from modelval.datasets.release import safe_extract

    categories = set(CATEGORIES)
    names = safe_extract(
        archive, target, limits=limits, select=lambda parts: len(parts) >= 2 and parts[-2] in categories
    )
    prefixes = {tuple(PurePosixPath(name).parts[:-2]) for name in names}
    if not names:
        raise DataError(f"{archive}: no cue-conflict category folders (airplane/ ... truck/) inside the archive")
    if len(prefixes) > 1:
        shown = ", ".join(sorted("/".join(prefix) or "." for prefix in prefixes)[:3])
        raise DataError(f"{archive}: category folders in several places ({shown}); expected one set of them")
    return target.joinpath(*prefixes.pop())


def ensure_stimuli(
    data_root: str | os.PathLike[str] | None = None,
    *,
    dataset: str = "cue-conflict",
    offline: bool | None = None,
    progress: bool = True,
) -> Path:
    """The stimulus folder, downloaded and verified into the user cache first if it is missing.

    Only the default location is filled, never a folder the user named, nor a set fetched on request only
    (model-vs-human's 14 further sets). Offline, or when the download fails, the error is one line naming the
    cause and how to get the stimuli.

    Parameters
    ----------
    data_root
        The folder given (``--data-root``), else the default.
    dataset
        The dataset's name in the registry.
    offline
        ``True`` never downloads; ``None`` reads the variables.
    progress
        Progress bars on stderr.
    """
    root = resolve_data_root(data_root, dataset)
    if root.is_dir():
        return root
    how = f"{data_home_hint(get_dataset(dataset).folder + '/')}, or run `{get_dataset(dataset).download_command}`"
    if root != default_data_root(dataset):
        raise DataError(f"{dataset} folder not found: {root} (from {data_root_origin(data_root, dataset)}); {how}")
    entry = get_dataset(dataset)
    if entry.fetch_on_request:
        raise DataError(
            f"{dataset} folder not found: {root}; its images ({entry.license}) are not redistributed with modelval "
            f"and are never fetched behind your back: run `modelval data download --dataset {dataset}` (it shows "
            f"the licence first), or {data_home_hint(entry.folder + '/')}"
        )
    if resolve_offline(offline):
        raise DataError(
            f"{dataset} folder not found: {root} (the per-user cache), and this run is offline; {how} when online"
        )
    url = source_url(_default_source(dataset), dataset)
    print(f"modelval: fetching the {dataset} stimuli from {url} into {root}", file=sys.stderr)
    try:
        return download_stimuli(root, dataset=dataset, progress=progress)
    except (DownloadError, DataError) as error:
        raise DataError(
            f"{dataset} folder not found: {root} (the per-user cache); downloading it failed: {error}; {how}"
        ) from None


RAW_DATA_MANIFEST = "raw_data_manifest.json"
#: Where texture-vs-shape's published raw data lives (the paths of raw_data_manifest.json are under it).
RAW_DATA_REPOSITORY = "rgeirhos/texture-vs-shape"


def published_path(path: str | os.PathLike[str]) -> str | None:
    """``raw-data/<experiment folder>/<file>.csv`` of a published decision file, found by its SHA-256.

    A label in a figure can then say which published run a file is (texture-vs-shape keeps, e.g., two
    VGG-16 cue-conflict runs in two folders); ``None`` for any other file.

    Parameters
    ----------
    path
        A decision file.
    """
    from modelval.download import sha256_of

    manifest = json.loads(package_data(RAW_DATA_MANIFEST).read_text())
    try:
        digest = sha256_of(path)
    except OSError:
        return None
    for spec in manifest["files"].values():
        if spec["sha256"] == digest:
            return str(spec["path"])
    return None


def default_raw_data_dir() -> Path:
    """Where ``data download --humans`` puts the published decisions: ``<data home>/reference/raw-data`` when
    ``$MODELVAL_DATA_HOME`` is set, else ``<user cache>/raw-data``."""
    home = data_home()
    return home / REFERENCE_SUBDIR if home is not None else user_cache_dir() / "raw-data"


def resolve_reference_dir(reference_dir: str | os.PathLike[str] | None = None) -> Path:
    """``reference_dir``, else ``<data home>/reference/raw-data``, else the per-user cache; it must exist.

    Parameters
    ----------
    reference_dir
        The folder given (``--reference-dir``), else the default.
    """
    if reference_dir:
        path, origin = Path(reference_dir).expanduser(), "the reference folder given"
    else:
        path = default_raw_data_dir()
        origin = "the data home" if data_home() is not None else "the per-user cache"
    if not path.is_dir():
        holding = f"{REFERENCE_SUBDIR}/ (a copy of texture-vs-shape's raw-data/)"
        raise DataError(
            f"published human raw data not found at {path} (from {origin}): run `modelval data download --humans`, "
            f"or {data_home_hint(holding)}"
        )
    return path


def download_raw_data(
    destination: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    progress: bool = True,
    timeout: float = 60.0,
    retries: int = 3,
    offline: bool | None = None,
) -> Path:
    """Fetch the published per-image decisions (10 human observers per experiment, VGG-16, ResNet-50).

    Files come from texture-vs-shape ``raw-data/<experiment folder>/<file>.csv`` (on a mirror:
    ``$MODELVAL_MIRROR/raw-data/<experiment folder>/<file>.csv``), each verified against
    ``modelval/data/raw_data_manifest.json``, and land flat in ``destination`` only when all are good.

    Parameters
    ----------
    destination
        The folder to fill (default: :func:`default_raw_data_dir`).
    force
        Fetch again even when it exists.
    progress
        A progress bar on stderr.
    timeout
        Seconds for connecting and for each read.
    retries
        Further attempts of a failed request.
    offline
        ``True`` never downloads; ``None`` reads the variables.
    """
    check_transfer_settings(timeout, retries)
    files: dict[str, dict[str, str]] = json.loads(package_data(RAW_DATA_MANIFEST).read_text())["files"]
    destination = Path(destination) if destination else default_raw_data_dir()
    each = {name: (mirrored(spec["path"]) or f"{TEXTURE_VS_SHAPE_RAW}/{spec['path']}", spec["sha256"])
            for name, spec in files.items()}  # fmt: skip
    return fetch_files(destination, each, "the human raw data", force=force, progress=progress, timeout=timeout,
                       retries=retries, offline=offline)  # fmt: skip
