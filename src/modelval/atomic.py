"""Output files appear whole or not at all.

Every report, decision file, baseline and figure modelval writes goes through :func:`replacing`: the
content is written to a hidden temporary file in the target's own folder and renamed over the target
only once it is complete (a rename within one file system is atomic). A full disk, a folder without
write permission or an interrupted run therefore never leaves a truncated file, nor destroys the file
that was there before; the temporary file is removed and the caller gets one
:class:`~modelval.errors.DataError` naming the file and the cause.

A writer killed with SIGKILL (or a power cut) runs no clean-up, so its temporary file stays. Each temporary
file carries a name only modelval makes, ``.<name>.modelval-<random>.tmp``, and its writer holds an
advisory lock on it (``flock``) until the rename: the next write of the same file finds the temporaries
whose lock nobody holds any more, i.e. whose writer is gone, and removes them (:func:`remove_dead_temporaries`).
Where ``flock`` is missing, a temporary file is taken for dead once it has not been written to for a day.
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

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

from modelval.errors import DataError


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` can only be read by setting it)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


#: The mark in the name of every temporary file an atomic write makes: ``.<name>.modelval-<random>.tmp``.
TEMPORARY_MARK = "modelval-"
#: A temporary file younger than this is never taken for dead: its writer may not hold its lock yet.
STARTING_SECONDS = 60.0
#: Without ``flock``, a temporary file not written to for this long belongs to a killed writer.
DEAD_AFTER_SECONDS = 24 * 3600.0
#: File names are at most 255 bytes on the common file systems: a long target name is shortened (with a hash
#: of the whole name, so two long names never share temporaries) in its temporary file's name.
_LONGEST_STEM = 160


def temporary_stem(name: str) -> str:
    """The part of ``name`` a temporary file's name carries: the name itself, or a shortened form of a long one."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= _LONGEST_STEM:
        return name
    digest = hashlib.sha1(raw).hexdigest()[:12]
    return raw[: _LONGEST_STEM - 13].decode("utf-8", "ignore") + "~" + digest


def temporary_pattern(path: Path) -> str:
    """The glob pattern of the temporary files of ``path``'s atomic writes (in ``path``'s folder)."""
    return f".{temporary_stem(path.name)}.{TEMPORARY_MARK}*.tmp"


def _temporary_file(path: Path) -> tuple[Path, IO[bytes]]:
    """A new hidden file next to ``path`` (same folder, so the final rename is atomic), open for writing.

    Its writer holds a lock on it (see the module docstring) for as long as the file stays open.
    """
    descriptor, name = tempfile.mkstemp(
        prefix=f".{temporary_stem(path.name)}.{TEMPORARY_MARK}", suffix=".tmp", dir=path.parent
    )
    if fcntl is not None:
        with contextlib.suppress(OSError):  # a file system without locks: the age rule applies
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return Path(name), os.fdopen(descriptor, "wb")


def _writer_is_gone(path: Path, now: float) -> bool:
    """True when nobody holds the lock of the temporary file ``path`` (its writer was killed)."""
    try:
        age = now - path.stat().st_mtime
    except OSError:
        return False
    if age < STARTING_SECONDS:
        return False
    if fcntl is None:
        return age > DEAD_AFTER_SECONDS
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a live writer holds it
    except OSError:
        return age > DEAD_AFTER_SECONDS  # locks not supported here
    finally:
        os.close(descriptor)
    return True


def is_temporary(path: Path) -> bool:
    """Whether ``path`` is named as an atomic write's temporary file (``.<name>.modelval-<random>.tmp``)."""
    name = path.name
    return name.startswith(".") and f".{TEMPORARY_MARK}" in name and name.endswith(".tmp")


def writer_is_gone(path: str | os.PathLike[str]) -> bool:
    """Whether the temporary file ``path`` was left by a killed writer (nobody holds its lock; see the module)."""
    return _writer_is_gone(Path(path), time.time())


def remove_dead_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files that killed writers of ``path`` left (see the module docstring); return them.

    Only files named as modelval names them (``.<name>.modelval-<random>.tmp``) are considered, and of those
    only the ones no live process holds: another process's write in progress is never touched.
    """
    target = Path(path)
    removed = []
    now = time.time()
    try:
        candidates = list(target.parent.glob(temporary_pattern(target)))
    except OSError:
        return []
    for candidate in candidates:
        if candidate.is_file() and not candidate.is_symlink() and _writer_is_gone(candidate, now):
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
        raise DataError(f"cannot write {path}: {_first_file(path.parent)} is a file, not a folder") from None
    except OSError as error:
        raise DataError(f"cannot write {path}: cannot create its folder ({error.strerror or error})") from None


def _first_file(folder: Path) -> Path:
    """The part of ``folder`` that exists and is not a folder (what stops ``mkdir``)."""
    for parent in (folder, *folder.parents):
        if parent.exists():
            return parent
    return folder


@contextlib.contextmanager
def temporary_beside(path: str | os.PathLike[str]) -> Iterator[tuple[Path, IO[bytes]]]:
    """A temporary file in ``path``'s folder, named and locked as :func:`replacing` names and locks its own, and
    removed on leaving; for writers that put it in place themselves (``os.link``: only if ``path`` is absent)."""
    target = Path(path)
    remove_dead_temporaries(target)
    temporary, raw = _temporary_file(target)
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

    Text mode is UTF-8 (``newline=""`` for the csv module). Any ``OSError`` while writing (``ENOSPC``,
    ``EACCES``, ...) removes the temporary file, leaves ``path`` as it was, and becomes a
    :class:`DataError` ``cannot write <path>: <cause>``.
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
    """Write ``text`` (UTF-8) to ``path`` atomically; return the path."""
    with replacing(path) as handle:
        handle.write(text)
    return Path(path)


def save_figure(fig: Any, path: str | os.PathLike[str], **options: Any) -> Path:
    """``fig.savefig`` to ``path`` atomically, in the format its suffix names (``.png``, ``.pdf``, ``.svg``, ...;
    PNG for a name without a suffix, written under exactly that name)."""
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
