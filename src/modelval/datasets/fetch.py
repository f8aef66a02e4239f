"""Downloading the stimuli: the model-vs-human release archive or the texture-vs-shape folder, verified and atomic."""

from __future__ import annotations

import json
import os
import shutil
import sys
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
    mirrored,
    resolve_offline,
    staging_folder,
    verify_sha256,
)
from modelval.errors import DataError, DownloadError
from modelval.paths import package_data, user_cache_dir

SOURCES = ("model-vs-human", "texture-vs-shape")


def source_url(source: str, dataset: str = "cue-conflict") -> str:
    """Where ``dataset`` is fetched from by ``source``: the public address, or its place on the mirror.

    ``model-vs-human`` is the release archive (cue-conflict only); ``texture-vs-shape`` is the
    repository folder, fetched file by file (``<url>/<category>/<file>``).
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


def default_source(dataset: str) -> str:
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

    The cue-conflict images come from model-vs-human's release archive (``source="model-vs-human"``, the
    default) or file by file from texture-vs-shape's repository folder (``source="texture-vs-shape"``,
    the default for edges and filled-silhouettes); ``$MODELVAL_MIRROR`` (or ``url``) points either
    at another server, e.g. a lab's mirror. Every file is checked against the SHA-256 digests of the
    manifest (by default the one committed with modelval), as ``modelval.verify_stimuli`` checks a
    folder. The images are assembled and verified in a hidden folder beside ``destination``, which is
    replaced only when all of them are there and correct: an interrupted or corrupt download never
    leaves a partial dataset behind, and the leftovers of killed downloads are removed (a lock keeps
    two processes from downloading into the same folder at once).

    An existing ``destination`` is not downloaded again (unless ``force``): it is verified and
    returned, online or offline; one that does not verify is an error, not silently replaced. Offline
    (``offline=True``, ``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE``) nothing is fetched: a missing
    folder is a ``DownloadError``. model-vs-human's 14 further datasets (``colour``, ``sketch``, ...) have
    no published checksums: with ``manifest=None`` they are checked against the record of their first
    download instead (``modelval.datasets.release``), and that path does not yet honour ``offline``
    (a missing folder is fetched even offline).

    Parameters
    ----------
    destination
        The folder to fill. ``None``: ``$MODELVAL_DATA_ROOT`` (cue-conflict only), else
        ``$MODELVAL_DATA_HOME/<dataset folder>``, else the per-user cache (where ``modelval`` looks
        for the stimuli by default).
    dataset
        The dataset's name in modelval's registry: ``"cue-conflict"`` (the default), ``"edges"``,
        ``"filled-silhouettes"``, or one of model-vs-human's further datasets.
    source
        ``"model-vs-human"`` (the release archive ``<dataset>.tar.gz``) or ``"texture-vs-shape"`` (the
        repository folder, one request per file); ``None`` picks the archive when the dataset has one.
    url
        The address to fetch from instead of the public one (or the mirror's): the archive's URL for
        ``"model-vs-human"``; for ``"texture-vs-shape"`` the base URL of the folder, each file being
        fetched from ``<url>/<category>/<file>``.
    force
        Download again even when ``destination`` exists; it is replaced once the new copy verifies.
    progress
        Show progress bars (on stderr).
    timeout
        Seconds allowed for connecting and for each read; a transfer slower than 1 KiB/s over such a
        window counts as stalled.
    retries
        How often a failed request (a connection error, a timeout, a stalled or truncated transfer, an
        HTTP 5xx or 429 answer) is tried again, with exponential backoff.
    manifest
        ``{relpath: sha256}``: the files the folder must hold and their digests; ``None`` (the default)
        for the committed manifest of ``dataset``. The file-by-file source fetches exactly these files.
    offline
        ``True`` never downloads, ``False`` may; ``None`` (the default) is offline when
        ``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE`` is ``1``, ``true`` or ``yes``.

    Returns
    -------
    pathlib.Path
        ``destination``, holding the verified stimuli.

    Raises
    ------
    modelval.errors.DownloadError
        A file could not be downloaded (no network, refused connection, timeout, HTTP error) after the
        retries, or the run is offline and ``destination`` is missing (or ``force`` is set).
    modelval.errors.ChecksumError
        A downloaded file, or a file of an existing ``destination``, differs from the manifest.
    modelval.errors.DataError
        An existing ``destination`` lacks files of the manifest or holds others, a downloaded archive
        is not a readable tar archive or holds no category folders, or ``dataset`` or ``source`` is
        unknown (or the dataset has no such source). ``ChecksumError`` is a ``DataError`` too.
    modelval.errors.InputValidationError
        ``timeout`` is not a positive number of seconds or ``retries`` is negative.

    Examples
    --------
    So that it runs without an internet connection, this example downloads for real from a local HTTP
    server on 127.0.0.1, as from a lab's mirror. The server serves ``SUBSET``, a folder with the first
    two published cue-conflict images of each category, and the download fetches these 32 files, with
    the part of the committed manifest that lists them. Without ``url`` and ``manifest`` the same call
    fetches all 1280 images from texture-vs-shape's repository on GitHub and checks them against the
    whole manifest.

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

    Called again, the folder is there: it is verified and returned, and nothing is fetched (the server
    is gone):

    >>> download_stimuli(folder, manifest=served, offline=True) == folder
    True

    Offline, a missing folder is an error rather than a download:

    >>> download_stimuli(FOLDER / "elsewhere", offline=True)
    Traceback (most recent call last):
    ...
    modelval.errors.DownloadError: this run is offline (--offline, MODELVAL_OFFLINE or HF_HUB_OFFLINE): not fetching ...
    """
    check_transfer_settings(timeout, retries)
    source = source or default_source(dataset)
    destination = Path(destination) if destination else resolve_data_root(dataset=dataset)
    if get_dataset(dataset).manifest is None and manifest is None:
        # model-vs-human's further sets: no published checksums; checked and recorded on first fetch
        from modelval.datasets.release import fetch_release

        address = url or source_url(source, dataset)
        return fetch_release(
            dataset, destination, url=address, force=force, progress=progress, timeout=timeout, retries=retries
        )
    entry = get_dataset(dataset)
    # The set's exact size is known when its files are the committed manifest's; else a bound per image.
    known = entry.image_bytes if manifest is None else None
    manifest = manifest if manifest is not None else load_manifest(dataset=dataset)
    limits = ArchiveLimits.for_images(dataset, len(manifest), known)
    if destination.exists() and not destination.is_dir():
        raise DataError(f"{destination} is a file; the {dataset} stimuli go into a folder: name one (made if missing)")
    if destination.exists() and not force:
        verify_stimuli(destination, manifest, dataset=dataset)
        return destination
    refuse_offline(offline, f"the {dataset} stimuli into {destination}")
    with staging_folder(destination) as staging:
        if destination.exists() and not force:  # another process finished it while this one waited
            verify_stimuli(destination, manifest, dataset=dataset)
            return destination
        if source == "model-vs-human":
            archive = staging / "cue-conflict.tar.gz"
            address = url or source_url(source, dataset)
            download_file(address, archive, timeout=timeout, retries=retries, progress=progress)
            extracted = _extract_stimuli_archive(archive, staging / "extracted", limits)
        elif source == "texture-vs-shape":
            extracted = staging / "files"
            base = (url or source_url(source, dataset)).rstrip("/")
            for relpath, digest in tqdm(sorted(manifest.items()), desc=dataset, disable=not progress):
                download_file(
                    f"{base}/{relpath}", extracted / relpath, sha256=digest,
                    timeout=timeout, retries=retries, progress=False,
                )  # fmt: skip
        else:
            raise DataError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
        verify_stimuli(extracted, manifest, dataset=dataset)
        if destination.exists():
            shutil.rmtree(destination)
        os.replace(extracted, destination)
    return destination


def refuse_offline(offline: bool | None, what: str) -> None:
    """A one-line error when this run is offline (``offline=True``, ``$MODELVAL_OFFLINE``, ``$HF_HUB_OFFLINE``)."""
    if resolve_offline(offline):
        raise DownloadError(f"this run is offline (--offline, MODELVAL_OFFLINE or HF_HUB_OFFLINE): not fetching {what}")


def _extract_stimuli_archive(archive: Path, target: Path, limits: ArchiveLimits) -> Path:
    """Unpack the images of a stimulus archive safely and return the folder that holds the category folders.

    Only the files inside category folders (``<prefix>/<category>/<file>``) are extracted, after the member
    list passed the checks of :func:`~modelval.datasets.release.safe_extract` (links, paths, count, sizes);
    hidden files and folders (``.DS_Store``, ``.pytest_cache/``) and files beside the category folders
    (a README, a licence) are left out.
    """
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

    Sets fetched on request only (model-vs-human's 14 further sets) are never downloaded here. Only the
    default location (no ``--data-root``, no ``$MODELVAL_DATA_ROOT``) is filled
    automatically: a folder the user named is never created behind their back. Offline
    (``offline=True``, ``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE``), or when the download fails,
    the error is one line naming the cause and how to get the stimuli.
    """
    root = resolve_data_root(data_root, dataset)
    if root.is_dir():
        return root
    command = "modelval download-data" + ("" if dataset == "cue-conflict" else f" --dataset {dataset}")
    how = f"{data_home_hint(get_dataset(dataset).folder + '/')}, or run `{command}`"
    if root != default_data_root(dataset):
        raise DataError(f"{dataset} folder not found: {root} (from {data_root_origin(data_root, dataset)}); {how}")
    entry = get_dataset(dataset)
    if entry.fetch_on_request:
        raise DataError(
            f"{dataset} folder not found: {root}; its images ({entry.license}) are not redistributed with modelval "
            f"and are never fetched behind your back: run `modelval download-data --dataset {dataset}` (it shows "
            f"the licence first), or {data_home_hint(entry.folder + '/')}"
        )
    if resolve_offline(offline):
        raise DataError(
            f"{dataset} folder not found: {root} (the per-user cache), and this run is offline; {how} when online"
        )
    url = source_url(default_source(dataset), dataset)
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


#: The published human raw data (texture-vs-shape's ``raw-data/``) when not in the per-user cache.
REFERENCE_DIR_ENV = "MODELVAL_REFERENCE_DIR"


def default_raw_data_dir() -> Path:
    """Where ``download-data --humans`` puts the published decisions.

    ``<data home>/reference/raw-data`` when ``$MODELVAL_DATA_HOME`` is set, else ``<user cache>/raw-data``.
    """
    home = data_home()
    return home / REFERENCE_SUBDIR if home is not None else user_cache_dir() / "raw-data"


def resolve_reference_dir(reference_dir: str | os.PathLike[str] | None = None) -> Path:
    """``reference_dir``, else ``$MODELVAL_REFERENCE_DIR``, else ``<data home>/reference/raw-data``, else the
    per-user cache; it must exist."""
    if reference_dir:
        path, origin = Path(reference_dir).expanduser(), "the reference folder given"
    elif os.environ.get(REFERENCE_DIR_ENV):
        path, origin = Path(os.environ[REFERENCE_DIR_ENV]).expanduser(), REFERENCE_DIR_ENV
    else:
        path = default_raw_data_dir()
        origin = "the data home" if data_home() is not None else "the per-user cache"
    if not path.is_dir():
        holding = f"{REFERENCE_SUBDIR}/ (a copy of texture-vs-shape's raw-data/)"
        raise DataError(
            f"published human raw data not found at {path} (from {origin}): run `modelval download-data --humans`, "
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
    """
    check_transfer_settings(timeout, retries)
    manifest = json.loads(package_data(RAW_DATA_MANIFEST).read_text())
    files: dict[str, dict[str, str]] = manifest["files"]
    destination = Path(destination) if destination else default_raw_data_dir()

    def verify_existing() -> Path:
        for name, spec in files.items():
            path = destination / name
            if not path.is_file():
                raise DataError(f"{destination} is incomplete: {name} is missing; re-run with --force")
            verify_sha256(path, sha256=spec["sha256"])
        return destination

    if destination.exists() and not destination.is_dir():
        raise DataError(f"{destination} is a file; the human raw data go into a folder: name one (made if missing)")
    if destination.exists() and not force:
        return verify_existing()
    refuse_offline(offline, f"the human raw data into {destination}")
    with staging_folder(destination) as staging:
        if destination.exists() and not force:  # another process finished it while this one waited
            return verify_existing()
        for name, spec in tqdm(sorted(files.items()), desc="raw data", disable=not progress):
            download_file(
                mirrored(spec["path"]) or f"{TEXTURE_VS_SHAPE_RAW}/{spec['path']}", staging / "files" / name,
                sha256=spec["sha256"],
                timeout=timeout, retries=retries, progress=False,
            )  # fmt: skip
        if destination.exists():
            shutil.rmtree(destination)
        os.replace(staging / "files", destination)
    return destination
