"""model-vs-human's release archives of its 14 further datasets: fetched on request, checked, recorded.

The stimuli of colour, contrast, the Eidolons, false-colour, high-pass, low-pass, phase-scrambling,
power-equalisation, rotation, uniform-noise and stylized are ImageNet-derived (ImageNet terms of access);
sketch is ImageNet-Sketch (MIT). modelval does not pass them on: ``modelval data download --dataset NAME``
fetches ``<dataset>.tar.gz`` from model-vs-human's release v0.1 (``modelvshuman/utils.py``; on a mirror,
``$MODELVAL_MIRROR/<dataset>.tar.gz``) when the user asks, and shows the licence the first time.
Nothing fetches them on first use.

An archive unpacks to ``<dataset>/dnn/session-1/<trial>_<code>_dnn_<condition>_<category>_<n>_<image>.png``.
model-vs-human publishes no checksums, so the fetch checks the structure and the counts (names, categories,
conditions, images per condition: :mod:`modelval.behaviour.experiments`), records the archive's SHA-256 and
every file's on the first fetch (trust on first use, ``<user cache>/release-records/<dataset>.json``; a later
archive that differs is refused, an evaluation compares the files with it), and unpacks safely
(:func:`safe_extract`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import sys
import tarfile
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from modelval.atomic import temporary_beside
from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.experiments import canonical_condition, experiment
from modelval.behaviour.raw_names import parse_session_name
from modelval.datasets.manifest import hash_stimuli, manifest_differences
from modelval.datasets.registry import get_dataset
from modelval.datasets.stimuli import discover_stimuli
from modelval.download import download_file, fill_folder, sha256_of
from modelval.errors import ChecksumError, DataError
from modelval.paths import user_cache_dir

__all__ = [
    "ArchiveLimits",
    "check_structure",
    "fetch_release",
    "read_record",
    "record_path",
    "release_status",
    "safe_extract",
]


def record_path(dataset: str) -> Path:
    """Where the first fetch of ``dataset`` is recorded: ``<user cache>/release-records/<dataset>.json``.

    Parameters
    ----------
    dataset
        The dataset's name.
    """
    return user_cache_dir() / "release-records" / f"{get_dataset(dataset).name}.json"


def read_record(dataset: str) -> dict[str, Any] | None:
    """The record of the first fetch (archive and file digests, address, date), or None.

    A record that is not what :func:`fetch_release` writes (edited by hand, cut short, another program's file)
    is a :class:`DataError` saying so and how to start again, never a ``KeyError`` later on.

    Parameters
    ----------
    dataset
        The dataset's name.
    """
    path = record_path(dataset)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise DataError(
            f"{path}: unreadable record of the first {dataset} fetch ({error}); delete it to fetch anew"
        ) from None
    problem = _record_problem(record)
    if problem:
        raise DataError(
            f"{path}: not a record of the first {dataset} fetch ({problem}); delete it and run "
            f"`modelval data download --dataset {dataset} --force` to fetch and record it anew"
        )
    return dict(record)


_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def _record_problem(record: object) -> str | None:
    """What is wrong with a release record's content, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for key in ("url", "fetched", "archive_sha256"):
        if not isinstance(record.get(key), str):
            return f"no text field {key!r}"
    if not _DIGEST.match(record["archive_sha256"]):
        return "'archive_sha256' is not a SHA-256 digest"
    files = record.get("files")
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _DIGEST.match(v) for k, v in files.items()
    ):
        return "'files' is not a map of file names to SHA-256 digests"
    return None


def _write_record(dataset: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """Write the record unless one exists (the first writer wins, also across processes); return the one
    that stands."""
    path = record_path(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    with temporary_beside(path) as (temporary, handle):
        handle.write(json.dumps(record, indent=1, sort_keys=True).encode())
        handle.flush()
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)  # creates the record only if it is absent, atomically
    stands = read_record(dataset)
    assert stands is not None
    return stands


def _licence_notice(dataset: str) -> str:
    """What the user is told before the first fetch of ``dataset``."""
    return (
        f"modelval: licence of the {dataset} stimuli: {get_dataset(dataset).terms}. modelval does not redistribute "
        "them; they come from model-vs-human's release v0.1 (Geirhos et al., NeurIPS 2021; "
        "licenses/LICENSES_OVERVIEW.md there). "
        "This notice is shown once, at the first fetch."
    )


_ABSOLUTE = re.compile(r"^([A-Za-z]:|[/\\])")

#: The largest file an archive of stimuli may declare: the largest published cue-conflict image is 133,629
#: bytes, and a 224x224 RGBA PNG stored without any compression is about 201 KB.
MAX_IMAGE_BYTES = 4 << 20
#: What a set's images may declare together per image, where the set's exact size is not known (model-vs-human
#: publishes no sizes): far above the ~100 KB of a 224x224 stimulus, far below what a decompression bomb writes.
MAX_BYTES_PER_IMAGE = 512 << 10
#: Entries (files, folders, ignored hidden files) an archive may hold beyond twice its images.
_SPARE_ENTRIES = 1000


@dataclass(frozen=True)
class ArchiveLimits:
    """What an archive of a stimulus set may hold, checked from its member list before anything is written."""

    #: The set's name, for the messages.
    what: str
    #: Files extracted at most (the set's number of images).
    files: int
    #: Bytes all extracted files may declare together (the set's known size, or a bound per image).
    total_bytes: int
    #: Bytes one file may declare.
    file_bytes: int = MAX_IMAGE_BYTES

    @classmethod
    def for_images(cls, what: str, images: int, total_bytes: int | None = None) -> ArchiveLimits:
        """The limits of a set of ``images`` images.

        Parameters
        ----------
        what
            The set's name.
        images
            Its number of images.
        total_bytes
            Its size when known, else a bound per image (:data:`MAX_BYTES_PER_IMAGE`).
        """
        return cls(what, images, total_bytes if total_bytes is not None else images * MAX_BYTES_PER_IMAGE)


def _is_hidden(parts: Sequence[str]) -> bool:
    """A path with a hidden part (``.DS_Store``, ``.pytest_cache/``, macOS's ``._x.png``): not part of a set."""
    return any(part.startswith(".") for part in parts)


def _member_parts(name: str) -> tuple[str, ...]:
    return tuple(part for part in PurePosixPath(name.replace("\\", "/")).parts if part not in ("", "."))


def _refusal(member: tarfile.TarInfo, target: Path) -> str | None:
    """Why a member may not be extracted, or None: tarfile's ``data`` filter, and the checks it does not do."""
    if _ABSOLUTE.match(member.name):
        return "has an absolute path"  # the filter would strip the "/" and extract it inside the folder
    if member.issym() or member.islnk():
        return f"is a link (to {member.linkname!r})"  # the filter allows a link that stays inside the folder
    try:
        tarfile.data_filter(member, str(target))
    except tarfile.OutsideDestinationError:
        return "has a '..' part that would leave the folder"
    except tarfile.SpecialFileError:
        return "is neither a file nor a folder"
    except tarfile.FilterError as error:
        return f"is refused by tarfile's data filter ({error})"
    return None


def safe_extract(
    archive: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    limits: ArchiveLimits | None = None,
    select: Callable[[tuple[str, ...]], bool] | None = None,
) -> list[str]:
    """Unpack ``archive`` into ``target`` after checking its member list; return the names extracted.

    Every member is checked before the first byte is written: by ``tarfile``'s ``data`` filter (no path or link
    leaving ``target``, no device or pipe), and by what the filter does not do: an absolute path is refused
    (the filter would extract it inside), and so is any link and a member that appears twice (model-vs-human's
    archives hold plain files and folders, each once). With ``limits`` the archive is bounded: at most
    ``2 * files + 1000`` entries, ``files`` files, none declaring more than ``file_bytes`` and all together not
    more than ``total_bytes`` (a decompression bomb is refused from its headers, not after it filled the disk).
    The extraction itself runs under the data filter too.

    Parameters
    ----------
    archive
        A tar archive (gzip, bz2 or xz compressed, or not).
    target
        The folder to unpack into (made).
    limits
        The bounds of the set it holds (``None``: unbounded, for archives modelval made).
    select
        Given each member's path parts, whether to extract it; hidden files and folders (``.DS_Store``,
        ``.pytest_cache/``) are never extracted.
    """
    archive, target = Path(archive), Path(target)
    most_entries = None if limits is None else 2 * limits.files + _SPARE_ENTRIES
    chosen: list[tarfile.TarInfo] = []
    seen: set[tuple[str, ...]] = set()
    declared = 0
    try:
        with tarfile.open(archive) as tar:
            for entries, member in enumerate(tar, start=1):
                why = _refusal(member, target)
                parts = _member_parts(member.name)
                if why is None and member.isfile() and parts in seen:
                    why = "appears twice in the archive"
                if why is not None:
                    raise DataError(f"{archive}: refused: member {member.name!r} {why} (nothing was extracted)")
                if limits is not None and most_entries is not None and entries > most_entries:
                    raise DataError(f"{archive}: refused: more than {most_entries} entries, for a set of "
                                    f"{limits.files} images (nothing was extracted)")  # fmt: skip
                if member.isdir() or not parts or _is_hidden(parts) or (select is not None and not select(parts)):
                    continue
                seen.add(parts)
                declared += member.size
                if limits is not None:
                    _check_limits(archive, member, len(chosen) + 1, declared, limits)
                chosen.append(member)
            target.mkdir(parents=True, exist_ok=True)
            tar.extractall(target, members=chosen, filter="data")
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise DataError(f"{archive}: not a readable tar archive ({error})") from None
    return [member.name for member in chosen]


def _check_limits(archive: Path, member: tarfile.TarInfo, files: int, declared: int, limits: ArchiveLimits) -> None:
    """Refuse the ``files``-th file when the set's bounds are passed (its count, one file's size, the total)."""
    if files > limits.files:
        raise DataError(
            f"{archive}: refused: more than {limits.files} files, but the {limits.what} set has {limits.files} "
            "images (nothing was extracted)"
        )
    if member.size > limits.file_bytes:
        raise DataError(
            f"{archive}: refused: member {member.name!r} declares {member.size} bytes, more than any {limits.what} "
            f"image may have ({limits.file_bytes}) (nothing was extracted)"
        )
    if declared > limits.total_bytes:
        raise DataError(
            f"{archive}: refused: its files declare more than {limits.total_bytes} bytes, more than the "
            f"{limits.what} set's {limits.files} images hold (nothing was extracted)"
        )


def _release_limits(dataset: str) -> ArchiveLimits:
    """What a model-vs-human release archive of ``dataset`` may hold: its images, at a bound per image."""
    return ArchiveLimits.for_images(dataset, experiment(dataset).images)


def _dataset_folder(extracted: Path, dataset: str) -> Path:
    """The folder that holds ``dnn/`` inside what an archive unpacked to (normally ``<dataset>/``)."""
    for candidate in (extracted / dataset, extracted):
        if (candidate / "dnn").is_dir():
            return candidate
    for dnn in sorted(extracted.rglob("dnn")):
        if dnn.is_dir():
            return dnn.parent
    raise DataError(
        f"the {dataset} archive holds no {dataset}/dnn/session-1/ folder: not model-vs-human's release layout"
    )


def check_structure(relpaths: Sequence[str], dataset: str) -> None:
    """The full set's counts: the dataset's number of images, as many in each condition as the human
    sessions have, and every one of the 16 categories.

    Parameters
    ----------
    relpaths
        The images' paths in the set's folder.
    dataset
        The dataset's name.
    """
    entry = experiment(dataset)
    if len(relpaths) != entry.images:
        raise DataError(f"{dataset}: found {len(relpaths)} images, expected {entry.images}")
    conditions: Counter[str] = Counter()
    categories: set[str] = set()
    for relpath in relpaths:
        parsed = parse_session_name(relpath)
        if parsed is None:
            raise DataError(f"{dataset}: {relpath} is not named as model-vs-human's release names its images")
        conditions[canonical_condition(parsed.condition, dataset)] += 1
        categories.add(parsed.category)
    per_condition = entry.images // len(entry.conditions)
    wrong = {value: conditions.get(value, 0) for value in entry.values if conditions.get(value, 0) != per_condition}
    if wrong:
        found = ", ".join(f"{value}: {count}" for value, count in wrong.items())
        raise DataError(f"{dataset}: expected {per_condition} images in each condition, found {found}")
    missing = sorted(set(CATEGORIES) - categories)
    if missing:
        raise DataError(f"{dataset}: no images of the categories {', '.join(missing)}")


def release_status(
    root: str | os.PathLike[str],
    dataset: str,
    digests: Mapping[str, str],
    *,
    allow_modified: bool = False,
) -> str:
    """How a folder of ``dataset`` compares with its first fetch: "verified ..." or what differs.

    ``digests`` are the files' SHA-256 (``relpath -> hex``). A full set must have the structure and counts of
    :func:`check_structure`; without a record (a copy modelval did not fetch) only those can be checked, and
    the status says so. A set that differs from the record is an error unless ``allow_modified``.

    Parameters
    ----------
    root
        The set's folder.
    dataset
        The dataset's name.
    digests
        ``relpath -> sha256`` of its files.
    allow_modified
        Describe a set that differs from the record instead of refusing it.
    """
    entry = experiment(dataset)
    record = read_record(dataset)
    subset = len(digests) != entry.images
    if subset and not allow_modified:
        raise DataError(f"{root}: found {len(digests)} {dataset} images, expected {entry.images}")
    if not subset:
        check_structure(sorted(digests), dataset)
    if record is None:
        unchecked = (
            f"model-vs-human publishes no checksums and no record of a first fetch exists ({record_path(dataset)}), "
            "so the files themselves are not compared"
        )
        if subset:
            images = f"{len(digests)} of the {entry.images} images"
            return f"modified: a subset, {images} (names checked, counts not); {unchecked}"
        return f"structure and counts checked; {unchecked}"
    problems = manifest_differences(dict(digests), record["files"])
    if not problems:
        return (
            f"verified: every file matches the first fetch ({record['fetched']}, archive SHA-256 "
            f"{record['archive_sha256'][:12]}...)"
        )
    shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    if not allow_modified:
        raise DataError(
            f"{root} differs from the {dataset} set first fetched ({record['fetched']}): {shown}. Restore it "
            f"(`modelval data download --dataset {dataset} --force`) or pass --allow-modified-stimuli"
        )
    return f"modified: {len(problems)} file(s) differ from the first fetch ({shown})"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def fetch_release(
    dataset: str,
    destination: str | os.PathLike[str],
    *,
    url: str,
    force: bool = False,
    progress: bool = True,
    timeout: float = 60.0,
    retries: int = 3,
    notify: Callable[[str], None] | None = None,
    offline: bool | None = None,
) -> Path:
    """Fetch ``<dataset>.tar.gz`` from ``url`` into ``destination`` (see the module doc); return the folder.

    An existing ``destination`` is checked, not fetched again (unless ``force``); offline nothing is fetched. The
    archive is downloaded, compared with the record of the first fetch, unpacked and checked in a staging folder
    beside the destination, which replaces it only when everything passed (``fill_folder``).

    Parameters
    ----------
    dataset
        The dataset's name.
    destination
        The folder to fill.
    url
        The archive's address.
    force
        Fetch again even when the folder exists.
    progress
        A progress bar on stderr.
    timeout
        Seconds for connecting and for each read.
    retries
        Further attempts of a failed request.
    notify
        Receives the licence notice (default: printed on stderr).
    offline
        ``True`` never downloads; ``None`` reads the variables.
    """

    def check(folder: Path) -> None:
        relpaths = [s.relpath for s in discover_stimuli(folder, dataset=dataset, expected_count=None)]
        release_status(folder, dataset, hash_stimuli(folder, relpaths))

    def fill(staging: Path) -> Path:
        record = read_record(dataset)
        licence = get_dataset(dataset).license
        (notify or _stderr)(_licence_notice(dataset) if record is None else f"modelval: {dataset} stimuli: {licence} "
                            "(shown in full at the first fetch)")  # fmt: skip
        archive = staging / f"{dataset}.tar.gz"
        download_file(url, archive, timeout=timeout, retries=retries, progress=progress)
        digest = sha256_of(archive)
        if record is not None and record["archive_sha256"] != digest:
            raise _differs(dataset, url, digest, record)
        safe_extract(archive, staging / "extracted", limits=_release_limits(dataset))
        folder = _dataset_folder(staging / "extracted", dataset)
        relpaths = [s.relpath for s in discover_stimuli(folder, dataset=dataset, expected_count=None)]
        check_structure(relpaths, dataset)
        if record is None:  # the first fetch: recorded (trust on first use), unless another process was first
            fetched = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            files = hash_stimuli(folder, relpaths)
            record = _write_record(
                dataset, {"dataset": dataset, "url": url, "archive_sha256": digest, "fetched": fetched, "files": files}
            )
            if record["archive_sha256"] != digest:
                raise _differs(dataset, url, digest, record)
        return folder

    return fill_folder(Path(destination), f"the {dataset} stimuli", check, fill, force=force, offline=offline)


def _differs(dataset: str, url: str, digest: str, record: Mapping[str, Any]) -> ChecksumError:
    return ChecksumError(
        f"the {dataset} archive from {url} has SHA-256 {digest}, but the copy first fetched "
        f"({record['fetched']}, from {record['url']}) had {record['archive_sha256']}; model-vs-human publishes "
        f"no checksums, so modelval keeps the first copy's and refuses a different one. If the release really "
        f"changed, delete {record_path(dataset)} and fetch again"
    )
