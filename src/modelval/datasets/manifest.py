"""SHA-256 manifests of the published stimuli (shipped in ``modelval/data/``) and verification against them."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from modelval.datasets.registry import DEFAULT_DATASET, get_dataset
from modelval.datasets.stimuli import discover_stimuli
from modelval.download import sha256_of
from modelval.errors import ChecksumError, DataError
from modelval.paths import package_data


def manifest_path(dataset: str = DEFAULT_DATASET) -> Path:
    """The committed manifest of ``dataset`` (``modelval/data/<name>_manifest.json``).

    Parameters
    ----------
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    """
    name = get_dataset(dataset).manifest
    if name is None:
        raise DataError(
            f"{dataset} has no published checksums (model-vs-human's release): it is checked against the record "
            "of its first fetch (modelval.datasets.release)"
        )
    return package_data(name)


def load_manifest(path: str | os.PathLike[str] | None = None, *, dataset: str = DEFAULT_DATASET) -> dict[str, str]:
    """``{relpath: sha256}`` of a published stimulus set (shipped in ``modelval/data/``).

    Parameters
    ----------
    path
        A manifest file; ``None``: the committed one of ``dataset``.
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    """
    path = Path(path) if path else manifest_path(dataset)
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"checksum manifest not found: {path}") from None
    return dict(payload["files"])


def build_manifest(root: str | os.PathLike[str], *, dataset: str = DEFAULT_DATASET) -> dict[str, object]:
    """A manifest of the stimuli under ``root`` (how the ``modelval/data/*_manifest.json`` files were made).

    Parameters
    ----------
    root
        The stimulus folder.
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    """
    entry = get_dataset(dataset)
    stimuli = discover_stimuli(root, dataset=dataset)
    return {
        "description": f"SHA-256 of the {entry.images} {dataset} stimuli (Geirhos et al., ICLR 2019; {entry.license})",
        "count": len(stimuli),
        "files": {s.relpath: sha256_of(Path(root) / s.relpath) for s in stimuli},
    }


def verify_stimuli(
    root: str | os.PathLike[str], manifest: dict[str, str] | None = None, *, dataset: str = DEFAULT_DATASET
) -> None:
    """Check that a stimulus folder holds exactly the published files, byte for byte (SHA-256).

    A folder is *verified* when the images found under ``root`` (as ``modelval.discover_stimuli``
    finds them, whatever their number) are exactly the files the manifest lists, none missing and none
    extra, and the SHA-256 digest of each file's bytes equals the manifest's. The manifest defaults to
    the one committed with modelval (``modelval/data/<dataset>_manifest.json``, made from the published
    images), so a verified folder holds the very images of Geirhos et al. (ICLR 2019); a re-encoded or
    resized copy that looks the same does not verify. Only bytes are compared, no image is decoded;
    hashing the 1280 cue-conflict images (133 MB) takes a fraction of a second.

    Parameters
    ----------
    root
        The stimulus folder.
    manifest
        ``{relpath: sha256}``, the files the folder must hold (paths below ``root``, as
        ``Stimulus.relpath``); ``None`` (the default) for the committed manifest of ``dataset``.
    dataset
        The dataset's name in modelval's registry: ``"cue-conflict"`` (the default), ``"edges"`` or
        ``"filled-silhouettes"``. model-vs-human's further datasets have no published checksums: they
        are checked against the record of their first download instead, so they need ``manifest``.

    Returns
    -------
    None
        Nothing: returning is the verification.

    Raises
    ------
    modelval.errors.ChecksumError
        Every listed file is there and nothing else, but some differ from the manifest.
    modelval.errors.DataError
        Files are missing or not in the manifest (the message counts the missing, unexpected and
        changed files and names the first five); the folder's layout is wrong (see
        ``modelval.discover_stimuli``); a file cannot be read; no manifest is committed for
        ``dataset``. ``ChecksumError`` is a ``DataError`` too.

    Examples
    --------
    The committed manifest lists the 1280 published cue-conflict images. ``SUBSET``, a folder with
    the first two published images of each category, holds 32 of them and fails for the 1248 others:

    >>> from modelval import discover_stimuli, verify_stimuli
    >>> from modelval.datasets import load_manifest
    >>> manifest = load_manifest()
    >>> len(manifest)
    1280
    >>> verify_stimuli(SUBSET)
    Traceback (most recent call last):
    ...
    modelval.errors.DataError: ... does not match the manifest (1248 missing, 0 unexpected, 0 changed): ...

    Against the part of the manifest that lists its own 32 files, it verifies:

    >>> own = {s.relpath: manifest[s.relpath] for s in discover_stimuli(SUBSET, expected_count=None)}
    >>> len(own)
    32
    >>> verify_stimuli(SUBSET, own) is None
    True

    A copy of one image with one bit changed (still a PNG that opens) does not:

    >>> name = "airplane/airplane1-bicycle2.png"
    >>> altered = bytearray((SUBSET / name).read_bytes())
    >>> altered[-1] ^= 1
    >>> copy = FOLDER / "copy" / name
    >>> copy.parent.mkdir(parents=True)
    >>> _ = copy.write_bytes(bytes(altered))
    >>> verify_stimuli(FOLDER / "copy", {name: manifest[name]})
    Traceback (most recent call last):
    ...
    modelval.errors.ChecksumError: ... (0 missing, 0 unexpected, 1 changed): airplane/airplane1-bicycle2.png differs ...
    """
    manifest = manifest if manifest is not None else load_manifest(dataset=dataset)
    root = Path(root)
    found = [s.relpath for s in discover_stimuli(root, expected_count=None, dataset=dataset)]
    problems = manifest_differences(hash_stimuli(root, found), manifest)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        missing = sum(p.endswith("is missing") for p in problems)
        extra = sum(p.endswith("is not in the manifest") for p in problems)
        changed = len(problems) - missing - extra
        error = ChecksumError if changed == len(problems) else DataError
        raise error(
            f"{root} does not match the manifest ({missing} missing, {extra} unexpected, {changed} changed): {shown}"
        )


def hash_stimuli(root: str | os.PathLike[str], relpaths: Sequence[str]) -> dict[str, str]:
    """SHA-256 of each file's bytes, ``{relpath: hexdigest}``; an unreadable entry is a one-line error.

    Hashing the 1280 cue-conflict PNGs (133 MB) costs a fraction of a second (see docs/performance.md),
    so every evaluation of an official set can afford it: the digests key the decode cache and are
    checked against the committed manifest.

    Parameters
    ----------
    root
        The stimulus folder.
    relpaths
        The files, relative to ``root``.
    """
    root = Path(root)
    digests = {}
    for relpath in relpaths:
        path = root / relpath
        try:
            digests[relpath] = sha256_of(path)
        except IsADirectoryError:
            raise DataError(f"{path}: a folder stands where an image file should be") from None
        except OSError as error:
            raise DataError(f"{path}: cannot read the file ({error.strerror or error})") from None
    return digests


def manifest_differences(digests: dict[str, str], manifest: dict[str, str]) -> list[str]:
    """What differs between the files found and the manifest: one phrase per file, sorted by name.

    Parameters
    ----------
    digests
        ``{relpath: sha256}`` of the files found.
    manifest
        ``{relpath: sha256}`` published.
    """
    problems = [f"{name} is not in the manifest" for name in sorted(set(digests) - set(manifest))]
    problems += [f"{name} is missing" for name in sorted(set(manifest) - set(digests))]
    problems += [
        f"{name} differs from the manifest (SHA-256 {digest[:12]}...)"
        for name, digest in sorted(digests.items())
        if name in manifest and manifest[name] != digest
    ]
    return problems
