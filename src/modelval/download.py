"""Atomic, verified HTTP downloads with retries, a stall guard and a progress bar.

A download streams into a temporary ``.part`` file beside the destination (:mod:`modelval.atomic`'s rule), is
verified (full SHA-256, or the hash prefix of a torch.hub-style name) and only then renamed into place; whatever
goes wrong, the temporary file is removed, and one a killed process left goes with the next download. pooch does
not fit (no stall guard, unbounded retries, an unmarked temporary file): docs/architecture.md says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import requests
import urllib3
from tqdm.auto import tqdm

from modelval import atomic
from modelval.errors import ChecksumError, DataError, DownloadError, InputValidationError, NetworkError

_CHUNK = 1 << 20
#: The slowest transfer a download accepts, in bytes per second, measured over windows of ``timeout`` seconds.
#: ``timeout`` alone bounds each socket read: a server sending one byte every 3 s never trips a 5 s timeout
#: and would hold the download forever. Below this rate the attempt fails as a stalled transfer (retried).
MIN_BYTES_PER_SECOND = 1024
#: torch.hub's convention: ``name-<first 8+ hex digits of sha256>.ext``.
_HASH_PREFIX = re.compile(r"-([a-f0-9]{8,64})\.")


def resolve_offline(offline: bool | None = None) -> bool:
    """Whether this run is offline: ``offline`` when given, else ``$MODELVAL_OFFLINE`` (the ``offline`` setting)
    or HuggingFace's own ``$HF_HUB_OFFLINE`` set to 1/true/yes.

    Parameters
    ----------
    offline
        ``True``/``False`` from a flag or an argument; ``None`` reads the variables.
    """
    from modelval import settings

    if offline is not None:
        return offline
    return bool(settings.value("offline")) or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")


def mirrored(path: str) -> str | None:
    """``$MODELVAL_MIRROR/<path>`` (the ``mirror`` setting), or ``None`` when no mirror is set.

    One base URL serves every download under the names docs/data.md lists: the data (``<set>.tar.gz``,
    ``<set>/...``, ``raw-data/...``, ``model-vs-human/raw-data/...``) and the weights (``<file name>``).

    Parameters
    ----------
    path
        The file's place under the mirror, e.g. ``cue-conflict.tar.gz``.
    """
    from modelval import settings

    base = str(settings.value("mirror") or "").strip().rstrip("/")
    return f"{base}/{path}" if base else None


#: Seconds :func:`check_reachable` waits for a TCP connection to the host before calling the network down.
REACHABLE_TIMEOUT = 10.0
#: Exception types (by name, from requests, urllib3, httpx, httpcore) that mean the host was never reached.
_UNREACHED = frozenset(
    {"ConnectError", "ConnectTimeout", "NameResolutionError", "NewConnectionError", "ConnectionError"}
)


def network_cause(error: BaseException) -> str | None:
    """Why a host could not be reached, read from an exception and its causes; ``None`` when it was reached.

    ``"could not resolve the host name (...)"``, ``"connection refused"``, ``"the connection timed out"`` or
    ``"connection failed (...)"`` (requests, urllib3, httpx, httpcore); the whole chain is read, as libraries
    wrap these (huggingface_hub's ``LocalEntryNotFoundError``).

    Parameters
    ----------
    error
        The exception a request raised.
    """
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    for link in chain:  # the most telling link first: the resolver's own error, at the bottom of the chain
        if isinstance(link, socket.gaierror):
            return f"could not resolve the host name ({link.strerror or link})"
    for link in chain:
        if isinstance(link, ConnectionRefusedError):
            return "connection refused"
        if isinstance(link, TimeoutError | socket.timeout) or type(link).__name__ == "ConnectTimeout":
            return "the connection timed out"
    for link in chain:
        for words in ("Name or service not known", "Temporary failure in name resolution", "nodename nor servname"):
            if words in str(link):  # urllib3 keeps the resolver's words in a message, not as a cause
                return f"could not resolve the host name ({words})"
    for link in chain:
        if type(link).__name__ in _UNREACHED:
            return f"connection failed ({type(link).__name__}: {link})"
    return None


def _proxied(url: str) -> bool:
    """Whether requests to ``url`` go through a proxy (then the host's own name need not resolve here)."""
    import urllib.parse
    import urllib.request

    parts, proxies = urllib.parse.urlsplit(url), urllib.request.getproxies()
    return bool(proxies.get(parts.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(
        parts.hostname or ""
    )


def check_reachable(url: str, *, timeout: float = REACHABLE_TIMEOUT, advice: str = "") -> None:
    """Raise :class:`~modelval.errors.NetworkError` at once when the host of ``url`` cannot be reached.

    Resolves the host name and opens (then closes) one TCP connection, so an offline machine gets one line in
    well under a second instead of a library's retries with backoff (huggingface_hub: 5 retries, about 24 s per
    file). Behind a proxy (``HTTPS_PROXY``, ...) nothing is checked: the proxy resolves the name.

    Parameters
    ----------
    url
        The address about to be requested, e.g. ``https://huggingface.co``.
    timeout
        Seconds to wait for the TCP connection.
    advice
        Appended to the message: what to do instead (e.g. "set HF_HUB_OFFLINE=1 to use the cache").

    Raises
    ------
    modelval.errors.NetworkError
        ``could not reach <host> (network): <why>[; <advice>]``.
    """
    import urllib.parse

    if _proxied(url):
        return
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    tail = f"; {advice}" if advice else ""
    try:
        socket.create_connection((host, parts.port or (443 if parts.scheme == "https" else 80)), timeout).close()
    except (OSError, UnicodeError) as error:
        raise NetworkError(f"could not reach {host} (network): {network_cause(error) or error}{tail}") from None


def sha256_of(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes (hex), read in 1 MiB chunks.

    Parameters
    ----------
    path
        The file.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def hash_prefix_from_filename(filename: str) -> str | None:
    """The SHA-256 prefix a torch.hub-style file name carries (``resnet50-0676ba61.pth`` -> ``0676ba61``).

    Parameters
    ----------
    filename
        A file name or path.
    """
    match = _HASH_PREFIX.search(Path(filename).name)
    return match.group(1) if match else None


def verify_sha256(path: Path, *, sha256: str | None = None, sha256_prefix: str | None = None) -> str:
    """Check a file's digest and return it; a mismatch is a :class:`ChecksumError` naming the file.

    Parameters
    ----------
    path
        The file.
    sha256
        The full digest it must have.
    sha256_prefix
        The digest's first hex digits it must have (a torch.hub-style name's).
    """
    actual = sha256_of(path)
    if sha256 is not None and actual != sha256.lower():
        raise ChecksumError(f"{path}: SHA-256 is {actual}, expected {sha256.lower()} (corrupt or wrong file)")
    if sha256_prefix is not None and not actual.startswith(sha256_prefix.lower()):
        raise ChecksumError(
            f"{path}: SHA-256 starts with {actual[: len(sha256_prefix)]}, expected prefix {sha256_prefix} "
            "from the file name (corrupt, truncated or wrong file)"
        )
    return actual


def download_file(
    url: str,
    destination: str | os.PathLike[str],
    *,
    sha256: str | None = None,
    sha256_prefix: str | None = None,
    timeout: float = 30.0,
    retries: int = 3,
    backoff: float = 1.0,
    progress: bool = True,
    session: requests.Session | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Download ``url`` to ``destination`` atomically and verified; return the destination path.

    Retries connection errors, timeouts, stalled and truncated transfers and 5xx/429 answers with exponential
    backoff; a 4xx answer and a checksum mismatch are final, a host name that does not resolve is a
    :class:`~modelval.errors.NetworkError` at once. See the module docstring for the temporary file.

    Parameters
    ----------
    url
        An ``http://`` or ``https://`` address.
    destination
        The file to write (its folder is made).
    sha256, sha256_prefix
        The file's full SHA-256 (hex), or the prefix a torch.hub-style name carries, checked before the rename.
    timeout
        Seconds for connecting and for each read; a body slower than :data:`MIN_BYTES_PER_SECOND` over any
        such window is a stalled transfer, so no attempt lasts longer than its size at that rate.
    retries, backoff
        Further attempts after the first; seconds before the first retry, doubled for each next one.
    progress
        A progress bar on stderr.
    session, sleep
        The ``requests`` session (default: a new one) and the wait between attempts (tests pass a recorder).
    """
    check_transfer_settings(timeout, retries, backoff)
    if not re.match(r"^https?://[^/\s]+", url):
        # requests would try it ``retries + 1`` times and answer "Perhaps you meant https://..."
        raise DownloadError(f"{url!r} is not an http:// or https:// address (e.g. https://host/path/file.tar.gz)")
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    http = session or requests.Session()
    last_error: Exception | None = None
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff * 2 ** (attempt - 1))
        try:
            _download_once(url, destination, http, timeout, progress, sha256, sha256_prefix)
            return destination
        except _FinalHTTPError as error:
            raise DownloadError(str(error)) from None
        except (requests.RequestException, urllib3.exceptions.HTTPError, _RetriedError) as error:
            last_error = error
            cause = network_cause(error)
            if cause is not None and cause.startswith("could not resolve"):
                # a name that does not resolve will not resolve in a second either: no retries, one line
                host = re.sub(r"^https?://([^/:]+).*$", r"\1", url)
                raise NetworkError(f"could not download {url}: could not reach {host} (network): {cause}") from None
    raise DownloadError(
        f"could not download {url} after {retries + 1} attempts: {_describe(last_error)}"
    ) from last_error


#: A ``.part`` file younger than this may be a live download's; an older one whose lock is free is a killed one's.
STALE_PART_SECONDS = atomic.STARTING_SECONDS


def remove_stale_parts(destination: Path) -> list[Path]:
    """Delete the ``.part`` files that killed downloads of ``destination`` left (every download does it first).

    Parameters
    ----------
    destination
        The downloaded file whose leftovers are looked for beside it.
    """
    return atomic.remove_dead_temporaries(destination, ".part")


#: The marker file of a download's staging folder (``.<destination>.modelval-staging-<random>/``): only a folder
#: with that name and this file is ever removed as a leftover, so a folder of the user's own beside the
#: destination (``.cue-conflict.old``) is never touched.
STAGING_MARKER = ".modelval-staging"
_STAGING = "modelval-staging-"


@contextlib.contextmanager
def staging_folder(destination: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh hidden folder beside ``destination`` to assemble a download in, removed afterwards.

    The download holds a lock on ``destination`` meanwhile (filelock), so any other folder named
    ``.<destination>.modelval-staging-*`` holding the marker file is a killed download's and is removed first.

    Parameters
    ----------
    destination
        The folder the download will fill.
    """
    from filelock import FileLock

    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    # The lock lives outside the data folder (which holds only what the user downloaded).
    key = hashlib.sha1(str(destination.resolve()).encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / "modelval-locks" / f"download-{key}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock)):
        for leftover in destination.parent.glob(f".{destination.name}.{_STAGING}*"):
            if leftover.is_symlink() or not leftover.is_dir():
                continue
            if (leftover / STAGING_MARKER).is_file():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    leftover.rmdir()  # killed between making it and marking it: empty, so rmdir only
        staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.{_STAGING}", dir=destination.parent))
        try:
            (staging / STAGING_MARKER).write_text("modelval assembles a download here; the next one removes it.\n")
            yield staging
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def fill_folder(
    destination: Path,
    what: str,
    check: Callable[[Path], object],
    fill: Callable[[Path], Path],
    *,
    force: bool = False,
    offline: bool | None = None,
) -> Path:
    """The one course of every download of a folder: an existing one is checked, not fetched again (unless
    ``force``); offline nothing is fetched; else the files are assembled in a staging folder beside it (under its
    lock), checked, and only then moved into place. A killed download's staging folder goes with the next.

    Parameters
    ----------
    destination
        The folder to fill.
    what
        What goes in it, for the messages ("the cue-conflict stimuli").
    check
        Raises when a folder is not complete and correct.
    fill
        Downloads into the staging folder it is given; returns the folder it filled.
    force
        Fetch again even when ``destination`` exists; it is replaced once the new copy passed ``check``.
    offline
        ``True`` never downloads (a one-line :class:`DownloadError`); ``None``: :func:`resolve_offline`.
    """
    if destination.exists() and not destination.is_dir():
        raise DataError(f"{destination} is a file; {what} go into a folder: name one (made if missing)")
    if destination.exists() and not force:
        check(destination)
        return destination
    if resolve_offline(offline):
        raise DownloadError(f"this run is offline (--offline, MODELVAL_OFFLINE or HF_HUB_OFFLINE): not fetching "
                            f"{what} into {destination}")  # fmt: skip
    with staging_folder(destination) as staging:
        if destination.exists() and not force:  # another process finished it while this one waited
            check(destination)
            return destination
        filled = fill(staging)
        check(filled)
        if destination.exists():
            shutil.rmtree(destination)
        os.replace(filled, destination)
    return destination


@contextlib.contextmanager
def sigterm_exits_cleanly() -> Iterator[None]:
    """Turn SIGTERM into SystemExit inside the block, so ``finally`` clauses remove temporary files.

    SIGTERM's default ends the process without unwinding, which leaves a download's ``.part`` file behind. A
    handler belongs to the whole process, so the library installs none: the command line wraps each command in
    this block, as a program of your own may. Outside the main thread this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _FinalHTTPError(Exception):
    """An answer that another attempt would not change (4xx)."""


class _RetriedError(Exception):
    """A truncated or stalled transfer: tried again, like a broken connection."""


def check_transfer_settings(timeout: float, retries: int, backoff: float = 1.0) -> None:
    """Refuse a timeout that is not a positive finite number of seconds, or a negative retry count.

    Parameters
    ----------
    timeout
        Seconds for connecting and for each read.
    retries
        Further attempts after the first.
    backoff
        Seconds before the first retry.
    """
    for name, value, least in (("timeout", timeout, "above 0"), ("backoff", backoff, ">= 0")):
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or value < 0 or (name == "timeout" and value == 0):
            raise InputValidationError(f"the download {name} must be a finite number of seconds {least}, got {value!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise InputValidationError(f"download retries must be a whole number >= 0, got {retries!r}")


def _body(response: requests.Response, url: str, timeout: float) -> Iterator[bytes]:
    """The body in the chunks the socket delivers; a transfer slower than MIN_BYTES_PER_SECOND is cut."""
    raw = response.raw
    # read1 returns what has arrived (each wait bounded by the socket timeout); read(n) would block until n
    # bytes came, however slowly. urllib3 < 2.3 has no read1: small reads keep the check close.
    read = getattr(raw, "read1", None) or (
        lambda size, decode_content: raw.read(1 << 14, decode_content=decode_content)
    )
    started, counted = time.monotonic(), 0
    while chunk := read(_CHUNK, decode_content=True):
        yield chunk
        counted += len(chunk)
        elapsed = time.monotonic() - started
        if elapsed >= timeout:  # one window
            if counted < MIN_BYTES_PER_SECOND * elapsed:
                raise _RetriedError(
                    f"{url}: the server sent {counted} bytes in {elapsed:.1f} s, below {MIN_BYTES_PER_SECOND} "
                    "bytes/s (a stalled transfer)"
                )
            started, counted = time.monotonic(), 0


def _describe(error: Exception | None) -> str:
    if isinstance(error, requests.ConnectionError):
        return f"connection failed ({error.__class__.__name__}: no network, or the server refused it)"
    if isinstance(error, requests.Timeout | urllib3.exceptions.TimeoutError):
        return "the server did not answer in time (timeout)"
    return str(error)


def _download_once(
    url: str,
    destination: Path,
    http: requests.Session,
    timeout: float,
    progress: bool,
    sha256: str | None,
    sha256_prefix: str | None,
) -> None:
    with atomic.temporary_beside(destination, ".part") as (temporary, output):
        with http.get(url, stream=True, timeout=timeout) as response:
            if response.status_code >= 500 or response.status_code == 429:
                raise requests.HTTPError(f"HTTP {response.status_code} from {url}")
            if response.status_code >= 400:
                raise _FinalHTTPError(f"HTTP {response.status_code} for {url}: the file is not there")
            expected = int(response.headers.get("Content-Length") or 0) or None
            received = 0
            with tqdm(total=expected, unit="B", unit_scale=True, desc=destination.name, disable=not progress,
                      leave=False) as bar:  # fmt: skip
                for chunk in _body(response, url, timeout):
                    output.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
        output.flush()  # still open, so still locked: no other download takes it for a killed one's
        if expected is not None and received != expected:
            raise _RetriedError(f"{url}: got {received} of {expected} bytes (connection cut short)")
        if sha256 is not None or sha256_prefix is not None:
            try:
                verify_sha256(temporary, sha256=sha256, sha256_prefix=sha256_prefix)
            except ChecksumError as error:
                raise ChecksumError(f"download of {url} failed verification: {error}") from None
        os.replace(temporary, destination)
