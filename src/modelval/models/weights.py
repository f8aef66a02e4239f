"""Where an entry's weights come from, whether they are present, and how to get them.

Three kinds of source, each answering the same questions (present? where? how to fetch?):

- :class:`UrlCheckpoint`: one file modelval downloads itself into the checkpoint cache
  (torchvision, texture-vs-shape, DeiT release files). Verified against its hash prefix before load.
- :class:`HubCode`: a torch.hub repository's code in ``$TORCH_HOME/hub/<owner>_<repo>_<ref>``.
- :class:`HFRepo`: files of a HuggingFace Hub repository in the HF cache (``$HF_HOME/hub``); timm
  pretrained weights live there too.

``weights_status`` never downloads; its message is the exact instruction the loader raises when
weights are missing, so tests can skip (or fail in strict mode) with the same text.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    pass

from modelval.errors import ChecksumError, DataError, DownloadError, NetworkError, WeightsNotAvailableError
from modelval.models.checkpoints import (
    checkpoint_url,
    fetch_checkpoint,
    find_cached_checkpoint,
    torch_hub_dir,
    verify_checkpoint,
)


class WeightsStatus(NamedTuple):
    available: bool
    message: str


class WeightsPart(Protocol):
    """One thing a model needs (a file, a code checkout, a set of hub files); each kind subclasses this, so its
    methods are documented here once."""

    def locate(self, checkpoint_dir: Path) -> Path | None:
        """The part on disk, or ``None`` when it is not there (nothing is downloaded).

        Parameters
        ----------
        checkpoint_dir
            The weights folder (``checkpoint_dir`` setting); parts cached by a library ignore it.
        """

    def expected(self, checkpoint_dir: Path) -> str:
        """Where the part is expected, in words, for the message that it is missing.

        Parameters
        ----------
        checkpoint_dir
            The weights folder.
        """

    def url(self) -> str:
        """Where the part is downloaded from."""

    def fetch(self, checkpoint_dir: Path, *, progress: bool = True, force: bool = False) -> Path:
        """Download the part (verified) and return where it is.

        Parameters
        ----------
        checkpoint_dir
            The weights folder.
        progress
            A progress bar on stderr.
        force
            Download again even when it is there.
        """


@dataclass(frozen=True)
class UrlCheckpoint(WeightsPart):
    """A checkpoint file downloaded by modelval (hash prefix in its name, torch.hub convention)."""

    source_url: str

    @property
    def file_name(self) -> str:
        return self.source_url.rsplit("/", 1)[-1]

    def url(self) -> str:
        return checkpoint_url(self.source_url)

    def locate(self, checkpoint_dir: Path) -> Path | None:
        return find_cached_checkpoint(self.file_name, checkpoint_dir)

    def expected(self, checkpoint_dir: Path) -> str:
        return f"file {checkpoint_dir / self.file_name}"

    def fetch(self, checkpoint_dir: Path, *, progress: bool = True, force: bool = False) -> Path:
        return fetch_checkpoint(self.source_url, checkpoint_dir, progress=progress, force=force)


@dataclass(frozen=True)
class HubCode(WeightsPart):
    """A torch.hub repository checkout (what ``torch.hub.load(github_repo, ...)`` caches)."""

    repo: str  # "facebookresearch/deit"
    ref: str = "main"

    @property
    def github(self) -> str:
        return f"{self.repo}:{self.ref}"

    def directory(self) -> Path:
        owner, name = self.repo.split("/")
        return torch_hub_dir() / f"{owner}_{name}_{self.ref.replace('/', '_')}"

    def url(self) -> str:
        return f"https://github.com/{self.repo}/tree/{self.ref}"

    def locate(self, checkpoint_dir: Path) -> Path | None:
        directory = self.directory()
        return directory if (directory / "hubconf.py").is_file() else None

    def expected(self, checkpoint_dir: Path) -> str:
        return f"torch.hub code of {self.github} in {self.directory()} (TORCH_HOME)"

    def fetch(self, checkpoint_dir: Path, *, progress: bool = True, force: bool = False) -> Path:
        from modelval.models.hub import download_hub_code

        return download_hub_code(self.github, force=force)


def hf_cache_dir() -> Path:
    """The HF Hub cache, resolved from the environment at call time, as huggingface_hub resolves it.

    huggingface_hub freezes ``constants.HF_HUB_CACHE`` when it is first imported; reading the variables
    here keeps ``HF_HOME`` / ``HF_HUB_CACHE`` set later (a CLI wrapper, a test) effective.
    """
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


@dataclass(frozen=True)
class HFRepo(WeightsPart):
    """Files of a HuggingFace Hub model repository; ``weight_files`` are alternatives (first present wins)."""

    repo_id: str
    files: tuple[str, ...] = ("config.json",)
    weight_files: tuple[str, ...] = ("model.safetensors", "pytorch_model.bin")
    optional_files: tuple[str, ...] = ()
    revision: str | None = None  # a branch, tag or commit; None: main

    def url(self) -> str:
        return f"https://huggingface.co/{self.repo_id}" + (f"/tree/{self.revision}" if self.revision else "")

    def cached_file(self, name: str) -> Path | None:
        """The cached file ``name`` of the repository, or ``None``.

        Parameters
        ----------
        name
            A file of the repository (``config.json``).
        """
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(self.repo_id, name, cache_dir=hf_cache_dir(), revision=self.revision)
        return Path(found) if isinstance(found, str) else None

    def weights_path(self) -> Path | None:
        return next((p for p in map(self.cached_file, self.weight_files) if p is not None), None)

    def locate(self, checkpoint_dir: Path) -> Path | None:
        if any(self.cached_file(name) is None for name in self.files):
            return None
        return self.weights_path()

    def expected(self, checkpoint_dir: Path) -> str:
        wanted = [*self.files, " or ".join(self.weight_files)]
        return f"{', '.join(wanted)} of {self.repo_id} in the HF cache {hf_cache_dir()} (HF_HOME)"

    def fetch(self, checkpoint_dir: Path, *, progress: bool = True, force: bool = False) -> Path:
        from huggingface_hub import constants, hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

        from modelval.download import check_reachable, network_cause

        # Offline, huggingface_hub retries each file 5 times with backoff (about 24 s a file) and then says it
        # "cannot find the requested files": one look at the host first, so the network is named as such, at once.
        check_reachable(constants.ENDPOINT, advice=HF_NETWORK_ADVICE)
        cache = hf_cache_dir()
        try:
            for name in (*self.files, *self.optional_files):
                try:
                    hf_hub_download(self.repo_id, name, cache_dir=cache, force_download=force, revision=self.revision)
                except EntryNotFoundError as error:
                    if name in self.files or isinstance(error, LocalEntryNotFoundError):
                        raise
            for name in self.weight_files:
                try:
                    return Path(
                        hf_hub_download(
                            self.repo_id, name, cache_dir=cache, force_download=force, revision=self.revision
                        )
                    )
                except EntryNotFoundError as error:
                    if isinstance(error, LocalEntryNotFoundError):  # not reached, not "absent from the repository"
                        raise
                    continue
        except Exception as error:  # huggingface_hub/httpx errors have no common base worth naming
            cause = network_cause(error)
            if cause is not None:
                host = constants.ENDPOINT.split("://", 1)[-1].split("/", 1)[0]
                raise NetworkError(f"could not reach {host} (network): {cause}; {HF_NETWORK_ADVICE}") from None
            raise DownloadError(f"could not download {self.url()}: {error.__class__.__name__}: {error}") from None
        raise DownloadError(f"{self.url()} has none of {', '.join(self.weight_files)}")


#: What to do when the HF Hub cannot be reached.
HF_NETWORK_ADVICE = (
    "set HF_HUB_OFFLINE=1 to use only what the HF cache holds, or load a local file or folder "
    "(hf:./saved_folder, --checkpoint FILE)"
)


def _fetch_command(name: str, parts: Sequence[WeightsPart], checkpoint_dir: Path) -> str:
    """The command that fetches the weights, naming the weights' folder where it is not the default one."""
    from modelval.paths import user_cache_dir

    uses_cache_dir = any(isinstance(p, UrlCheckpoint) for p in parts)
    moved = uses_cache_dir and Path(checkpoint_dir).expanduser() != user_cache_dir() / "checkpoints"
    return (f"MODELVAL_CHECKPOINT_DIR={checkpoint_dir} " if moved else "") + f"modelval models fetch {name}"


def _missing_message(
    name: str, parts: Sequence[WeightsPart], checkpoint_dir: Path, missing: Sequence[WeightsPart]
) -> str:
    """The instruction text for absent weights: the model, the files expected, their URLs, the command."""
    expected = "; ".join(p.expected(checkpoint_dir) for p in missing)
    urls = ", ".join(p.url() for p in missing)
    return (
        f"weights for model {name!r} are not available: expected {expected} (from {urls}). "
        f"Fetch them with: {_fetch_command(name, parts, checkpoint_dir)}"
    )


def parts_status(name: str, parts: Sequence[WeightsPart], checkpoint_dir: Path) -> WeightsStatus:
    """Whether every part of a model is on disk, and otherwise the message saying what is missing.

    Parameters
    ----------
    name
        The model's name.
    parts
        Its parts.
    checkpoint_dir
        The weights folder.
    """
    missing = [p for p in parts if p.locate(checkpoint_dir) is None]
    if not missing:
        found = ", ".join(str(p.locate(checkpoint_dir)) for p in parts) or "bundled with the package"
        return WeightsStatus(True, f"weights for model {name!r} are present: {found}")
    return WeightsStatus(False, _missing_message(name, parts, checkpoint_dir, missing))


def ensure_parts(
    name: str, parts: Sequence[WeightsPart], checkpoint_dir: Path, *, offline: bool, progress: bool = True
) -> list[Path]:
    """Paths of every part: cached ones are verified, missing ones downloaded unless ``offline``.

    Raises :class:`WeightsNotAvailableError` with the instruction text when something is missing
    and cannot be downloaded, and :class:`ChecksumError` (with the repair command) for a corrupt cache.

    Parameters
    ----------
    name
        The model's name.
    parts
        Its parts.
    checkpoint_dir
        The weights folder.
    offline
        Never download.
    progress
        Progress bars.
    """
    status = parts_status(name, parts, checkpoint_dir)
    if not status.available and offline:
        raise WeightsNotAvailableError(f"{status.message} (offline mode: nothing is downloaded)")
    if status.available:
        return _located(name, parts, checkpoint_dir, status.message, progress)
    # Two processes (pytest-xdist workers, parallel jobs) that miss the same weights: one downloads,
    # the other waits, then finds them. Each part's own download is atomic too (temp file, rename).
    from filelock import FileLock

    # The lock lives outside the caches (their folders hold only what the user downloaded).
    key = hashlib.sha1(f"{checkpoint_dir.resolve()}|{name}".encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / "modelval-locks" / f"weights-{key}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock), timeout=3600):
        return _located(name, parts, checkpoint_dir, status.message, progress)


def _located(name: str, parts: Sequence[WeightsPart], checkpoint_dir: Path, message: str, progress: bool) -> list[Path]:
    paths = []
    for part in parts:
        path = part.locate(checkpoint_dir)
        if path is None:
            try:
                path = part.fetch(checkpoint_dir, progress=progress)
            except NetworkError as error:  # the network first, in few words: no list of files that were not asked for
                raise WeightsNotAvailableError(f"weights for model {name!r} are not available: {error}") from None
            except (DownloadError, ChecksumError) as error:
                raise WeightsNotAvailableError(f"{message}. The download failed: {error}") from None
        elif isinstance(part, UrlCheckpoint):
            try:
                verify_checkpoint(path)
            except DataError as error:
                raise ChecksumError(
                    f"cached checkpoint of model {name!r} is corrupt: {error}. "
                    f"Re-fetch it with: {_fetch_command(name, parts, checkpoint_dir)} (replaces the bad file)"
                ) from None
        elif isinstance(part, HFRepo):
            # The HF cache holds no digests modelval could check; an empty or garbage weights file reached
            # torch.load, whose errors were exit 3 (and advised weights_only=False). Its first bytes tell.
            from modelval.models.checkpoints import weights_file_problem

            problem = weights_file_problem(path)
            if problem is not None:
                raise ChecksumError(
                    f"cached weights of model {name!r} are damaged: {path} {problem}. Re-fetch them with: "
                    f"{_fetch_command(name, parts, checkpoint_dir)} --force (replaces the damaged file)"
                )
        paths.append(path)
    return paths
