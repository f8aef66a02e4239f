"""Files appear whole or not at all, and a killed writer's half file is found and removed.

Every report, figure, cache entry and download modelval writes goes through a temporary file in the target's
folder, renamed over the target once complete (atomic within one file system): a full disk or an interrupted
run never leaves a truncated file, nor destroys the one that was there. :func:`replacing` turns an ``OSError``
into one :class:`~modelval.errors.DataError` naming the file and the cause.

**The one temporary-file rule.** A temporary file is named ``.<name>.modelval-<random>.tmp`` (``.part`` for a
download), a name only modelval makes, and its writer holds filelock's native lock on it
(:func:`filelock.lock_descriptor`) until the rename. A writer killed with SIGKILL runs no clean-up, so its file
stays; the lock dies with the process, so the next writer of the same target finds the temporaries whose lock
is free and removes them (:func:`remove_dead_temporaries`). A file younger than :data:`STARTING_SECONDS` is never
taken (its writer may not hold the lock yet); where the file system has no locks, one unwritten for a day is.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from filelock import lock_descriptor

from modelval.errors import DataError

#: The mark in the name of every temporary file modelval makes: ``.<name>.modelval-<random>.tmp``.
TEMPORARY_MARK = "modelval-"
#: A temporary file younger than this is never taken for dead: its writer may not hold its lock yet.
STARTING_SECONDS = 60.0
#: Without locks on the file system, a temporary file not written to for this long belongs to a killed writer.
DEAD_AFTER_SECONDS = 24 * 3600.0
#: File names are at most 255 bytes on the common file systems: a long target name is shortened (with a hash
#: of the whole name, so two long names never share temporaries) in its temporary file's name.
_LONGEST_STEM = 160


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` can only be read by setting it)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def _stem(name: str) -> str:
    """The part of ``name`` a temporary file's name carries: the name itself, or a shortened form of a long one."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= _LONGEST_STEM:
        return name
    return raw[: _LONGEST_STEM - 13].decode("utf-8", "ignore") + "~" + hashlib.sha1(raw).hexdigest()[:12]


def temporary_pattern(path: Path, suffix: str = ".tmp") -> str:
    """The glob pattern of the temporary files of ``path``'s writes (in ``path``'s folder).

    Parameters
    ----------
    path
        The target file.
    suffix
        ``.tmp`` for a file written whole, ``.part`` for a download.
    """
    return f".{_stem(path.name)}.{TEMPORARY_MARK}*{suffix}"


def is_temporary(path: Path) -> bool:
    """Whether ``path`` is named as modelval names its temporary files (``.<name>.modelval-<random>.tmp|.part``).

    Parameters
    ----------
    path
        Any file.
    """
    name = path.name
    return name.startswith(".") and f".{TEMPORARY_MARK}" in name and name.endswith((".tmp", ".part"))


def _temporary_file(path: Path, suffix: str = ".tmp") -> tuple[Path, IO[bytes]]:
    """A new hidden file next to ``path`` (same folder, so the final rename is atomic), open for writing and locked
    for as long as it stays open."""
    descriptor, name = tempfile.mkstemp(prefix=f".{_stem(path.name)}.{TEMPORARY_MARK}", suffix=suffix, dir=path.parent)
    with contextlib.suppress(OSError):  # a file system without locks: the age rule applies
        lock_descriptor(descriptor, blocking=False)
    return Path(name), os.fdopen(descriptor, "wb")


def writer_is_gone(path: str | os.PathLike[str]) -> bool:
    """Whether the temporary file ``path`` was left by a killed writer: nobody holds its lock (see the module).

    Parameters
    ----------
    path
        A temporary file (:func:`is_temporary`).
    """
    try:
        age = time.time() - Path(path).stat().st_mtime
        descriptor = os.open(path, os.O_RDONLY) if age >= STARTING_SECONDS else None
    except OSError:
        return False
    if descriptor is None:
        return False
    try:
        return lock_descriptor(descriptor, blocking=False)  # won: nobody holds it (closing the file releases it)
    except OSError:
        return age > DEAD_AFTER_SECONDS  # no locks on this file system
    finally:
        os.close(descriptor)


def remove_dead_temporaries(path: str | os.PathLike[str], suffix: str = ".tmp") -> list[Path]:
    """Remove the temporary files that killed writers of ``path`` left; return them.

    Only files named as modelval names them are considered, and of those only the ones no live process holds:
    another process's write in progress is never touched.

    Parameters
    ----------
    path
        The target file whose temporaries are looked for in its folder.
    suffix
        ``.tmp`` for files written whole, ``.part`` for downloads.
    """
    target = Path(path)
    removed = []
    with contextlib.suppress(OSError):
        for candidate in target.parent.glob(temporary_pattern(target, suffix)):
            if candidate.is_file() and not candidate.is_symlink() and writer_is_gone(candidate):
                with contextlib.suppress(FileNotFoundError):
                    candidate.unlink()
                    removed.append(candidate)
    return removed


def _prepare_folder(path: Path) -> None:
    if path.is_dir():
        raise DataError(f"cannot write {path}: it is a folder; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        existing = next((p for p in (path.parent, *path.parent.parents) if p.exists()), path.parent)
        raise DataError(f"cannot write {path}: {existing} is a file, not a folder") from None
    except OSError as error:
        raise DataError(f"cannot write {path}: cannot create its folder ({error.strerror or error})") from None


@contextlib.contextmanager
def temporary_beside(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[tuple[Path, IO[bytes]]]:
    """A temporary file in ``path``'s folder, named and locked by the rule above, removed on leaving; for writers
    that put it in place themselves (``os.link``: only if ``path`` is absent; a download: after verifying it).

    Parameters
    ----------
    path
        The target file.
    suffix
        ``.tmp``, or ``.part`` for a download.
    """
    target = Path(path)
    remove_dead_temporaries(target, suffix)
    temporary, raw = _temporary_file(target, suffix)
    try:
        yield temporary, raw
    finally:
        with contextlib.suppress(OSError):
            raw.close()
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str], *, binary: bool = False, newline: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file for the content of ``path``; on a clean exit it replaces ``path``.

    Any ``OSError`` while writing (``ENOSPC``, ``EACCES``, ...) removes the temporary file, leaves ``path`` as
    it was, and becomes a :class:`DataError` ``cannot write <path>: <cause>``.

    Parameters
    ----------
    path
        The file to write.
    binary
        A binary handle; otherwise text, UTF-8.
    newline
        The text handle's newline (``""`` for the csv module).
    """
    target = Path(path)
    _prepare_folder(target)
    remove_dead_temporaries(target)
    try:
        temporary, raw = _temporary_file(target)
    except OSError as error:
        raise DataError(f"cannot write {target}: {error.strerror or error}") from None
    lock = None
    with contextlib.suppress(OSError, ValueError):
        lock = os.dup(raw.fileno())  # keeps the lock from the last write until the rename (closing raw drops one)
    try:
        try:
            handle: IO[Any] = raw if binary else io.TextIOWrapper(raw, encoding="utf-8", newline=newline)
            with handle:
                yield handle
            mode = target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~_umask()
            os.chmod(temporary, mode)  # mkstemp makes 0600 files; an output gets the usual permissions
            os.replace(temporary, target)
        except OSError as error:
            raise DataError(f"cannot write {target}: {error.strerror or error}") from None
    finally:
        with contextlib.suppress(OSError):
            raw.close()
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        if lock is not None:
            os.close(lock)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path.

    Parameters
    ----------
    path
        The file to write.
    text
        Its whole content.
    """
    with replacing(path) as handle:
        handle.write(text)
    return Path(path)


def save_figure(fig: Any, path: str | os.PathLike[str], **options: Any) -> Path:
    """``fig.savefig`` to ``path`` atomically, in the format its suffix names.

    Parameters
    ----------
    fig
        A matplotlib figure.
    path
        ``.png``, ``.pdf``, ``.svg``, ...; PNG for a name without a suffix (written under exactly that name).
    **options
        Passed to ``savefig``.
    """
    target = Path(path)
    suffix = target.suffix.lower().lstrip(".") or "png"
    from matplotlib.backend_bases import FigureCanvasBase

    supported = FigureCanvasBase.get_supported_filetypes()  # every format savefig can write, whatever the backend
    if suffix not in supported:
        raise DataError(
            f"cannot write {target}: the suffix picks the figure's format, and .{suffix} is not one "
            f"(use .png, .pdf or .svg)"
        )
    with replacing(target, binary=True) as handle:
        fig.savefig(handle, format=suffix, **options)
    return target
