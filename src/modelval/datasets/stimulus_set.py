"""Decoded stimuli: a stimulus folder discovered, verified against its manifest and decoded once (uint8)."""

from __future__ import annotations

import hashlib
import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from modelval.datasets.cache import cache_enabled, load_or_decode
from modelval.datasets.manifest import hash_stimuli, load_manifest, manifest_differences
from modelval.datasets.registry import DEFAULT_DATASET, get_dataset
from modelval.datasets.stimuli import Stimulus, decode_stimuli, discover_stimuli
from modelval.errors import DataError
from modelval.records.digests import DIGESTS_COMPUTED
from modelval.records.provenance import json_digest


@dataclass
class StimulusSet:
    """The stimuli's names and categories plus their pixels, decoded once as uint8 (N, 3, 224, 224).

    Evaluate any number of models or preprocessing configurations on one instance: the pixels are
    decoded once (and, with ``cache=True``, once per data set across processes).

    Parameters
    ----------
    root
        The stimulus folder.
    stimuli
        The stimuli, in the order of ``images``.
    images
        Their pixels, uint8 (N, 3, 224, 224); or a function that decodes them and returns ``(pixels, decode cache
        status)``, called on the first use of ``images`` (as :meth:`load` with ``decode=False`` passes).
    cache_status
        The decode cache's part: ``"hit"``, ``"miss"``, ``"rebuilt"`` (a bad entry replaced), ``"off"``, or
        ``"not decoded"`` (yet).
    verification
        ``"verified"``, ``"modified: ..."`` or ``"not checked"`` (a subset).
    digests
        SHA-256 of each file's bytes, by relative path (``None`` for a set built in memory).
    dataset
        One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
    """

    root: Path
    stimuli: list[Stimulus]
    images: torch.Tensor  # a property below: decoded on first use when given a function
    cache_status: str = "off"
    verification: str = "not checked"
    digests: dict[str, str] | None = None
    dataset: str = DEFAULT_DATASET
    #: (what the content digest was computed from, the digest): every evaluation's cache key needs it, and the
    #: pixel digest of a set built in memory hashes every pixel. ``dataclasses.replace`` starts a new one.
    _content: tuple[tuple[Any, ...], str] | None = field(default=None, init=False, repr=False, compare=False)
    _images: torch.Tensor | Callable[[], tuple[torch.Tensor, str]] = field(init=False, repr=False, compare=False)

    @classmethod
    def load(
        cls,
        root: str | os.PathLike[str],
        *,
        workers: int = 0,
        progress: bool = True,
        expected_count: int | Literal["registry"] | None = "registry",
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        dataset: str = DEFAULT_DATASET,
        verify: bool | None = None,
        allow_modified: bool = False,
        decode: bool = True,
    ) -> StimulusSet:
        """Discover, verify and decode the stimuli of ``dataset`` under ``root``.

        Parameters
        ----------
        root
            The stimulus folder.
        workers
            DataLoader worker processes for decoding (0: none).
        progress
            Show a progress bar.
        expected_count
            The number of images required (``"registry"``: the dataset's; ``None``: any).
        cache
            Use the decode cache (:mod:`modelval.datasets.cache`), keyed by the files' content digests; it holds
            the cue-conflict set, as the 160-image sets decode in well under a second.
        cache_dir
            The decode cache's folder (default: the user cache).
        dataset
            One of :data:`~modelval.datasets.registry.DATASET_NAMES`.
        verify
            Check every file's name and SHA-256 against the committed manifest and refuse a modified set, naming
            the files; default: when the full official set is loaded (``expected_count="registry"``).
        allow_modified
            Evaluate a modified set (:attr:`verification` says what differs) or a subset of any size, which is
            always checked against the manifest, so the result says which files are missing.
        decode
            Decode now; ``False``: on the first use of :attr:`images`, so that a run whose model fails to load
            (a factory that raises, weights not available offline) fails without decoding anything.
        """
        root = Path(root)
        if allow_modified and expected_count == "registry":
            # A subset is a modified set too; it is verified below and reported as such.
            expected_count, verify = None, True if verify is None else verify
        stimuli = discover_stimuli(root, expected_count=expected_count, dataset=dataset)
        check = expected_count == "registry" if verify is None else verify
        digests = hash_stimuli(root, [s.relpath for s in stimuli])
        verification = "not checked"
        if check:
            verification = _verify(root, digests, dataset, allow_modified)

        def decoded() -> tuple[torch.Tensor, str]:
            def pixels() -> torch.Tensor:
                return decode_stimuli(root, stimuli, workers=workers, progress=progress)

            if not get_dataset(dataset).decode_cache or not cache_enabled(cache):
                return pixels(), "off"
            return load_or_decode(root, stimuli, pixels, cache_dir=cache_dir, digests=digests)

        loaded = cls(root, stimuli, decoded, "not decoded", verification, digests, dataset)  # type: ignore[arg-type]
        if decode:
            loaded.images  # noqa: B018 (decoding is the point)
        return loaded

    def __len__(self) -> int:
        return len(self.stimuli)

    def pixels_of(self, indices: Sequence[int]) -> torch.Tensor:
        """The pixels of the stimuli at ``indices``: of a set not decoded yet, only those are decoded (the sanity
        probe's sample, which may reject a model before the rest are needed).

        Parameters
        ----------
        indices
            Positions in :attr:`stimuli`.
        """
        if callable(self._images):
            return decode_stimuli(self.root, [self.stimuli[i] for i in indices], progress=False)
        return self.images[torch.as_tensor(list(indices), dtype=torch.long)]

    def __getstate__(self) -> dict[str, Any]:
        # A set is pickled to Ray workers (ray.put); the remembered digest holds a weak reference, which pickle
        # refuses, and a copy computes its own anyway.
        self.images  # noqa: B018 (a worker gets the pixels, not a function that decodes them)
        return {**self.__dict__, "_content": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def provenance(self, content_sha256: str | None = None) -> dict[str, object]:
        """The ``"stimuli"`` part of a provenance record.

        Parameters
        ----------
        content_sha256
            The content digest when already computed (``None``: computed here).
        """
        return {
            "dataset": self.dataset,
            "images": len(self),
            "content_sha256": content_sha256 or self.content_digest(),
            "verification": self.verification,
            "root": str(self.root),
        }

    def content_digest(self) -> str:
        """One SHA-256 for exactly these stimuli in this order: of each file's digest, else of the pixels.

        Computed once per set and remembered while its stimuli list, file digests and pixel tensor are the same
        objects, of the same length, and the pixels were not written in place (torch's version counter).
        """
        signature = self._content_signature()
        if self._content is not None and _same_signature(self._content[0], signature):
            return self._content[1]
        DIGESTS_COMPUTED["stimuli"] += 1
        if self._of_files():
            digest = json_digest([[s.relpath, self.digests[s.relpath]] for s in self.stimuli])  # type: ignore[index]
        else:
            pixels = hashlib.sha256(f"{tuple(self.images.shape)}|{self.images.dtype}|".encode())
            data = self.images.detach().contiguous()
            if data.numel():  # the pixels' own memory: no copy of a decoded set to hash it
                pixels.update(data.reshape(-1).view(torch.uint8).numpy().data)
            digest = json_digest([[s.relpath for s in self.stimuli], pixels.hexdigest()])
        self._content = (signature, digest)
        return digest

    def _of_files(self) -> bool:
        """Whether the content digest is of the files' digests (else of the pixels)."""
        return self.digests is not None and all(s.relpath in self.digests for s in self.stimuli)

    def _content_signature(self) -> tuple[Any, ...]:
        files = (self.stimuli, len(self.stimuli), self.digests, None if self.digests is None else len(self.digests))
        if self._of_files():  # the pixels play no part (nor need decoding)
            return (*files, _no_pixels, 0, None)
        images = self.images
        version = images._version if not images.is_inference() else None  # inference tensors keep no counter
        stamps = (images.data_ptr(), tuple(images.shape), images.dtype)
        return (*files, weakref.ref(images), version, stamps)


def _pixels(self: StimulusSet) -> torch.Tensor:
    """The pixels, uint8 (N, 3, 224, 224), decoded now when the set was given a function that decodes them."""
    if callable(self._images):
        self._images, self.cache_status = self._images()
    return self._images


def _set_pixels(self: StimulusSet, images: torch.Tensor | Callable[[], tuple[torch.Tensor, str]]) -> None:
    self._images = images


# After the class statement, so that the dataclass keeps `images` as an ordinary field (its __init__, repr and
# dataclasses.replace) while reads go through the decoder.
StimulusSet.images = property(_pixels, _set_pixels)  # type: ignore[assignment]


def _no_pixels() -> None:
    """The pixels' stand-in (a dead reference) in the signature of a set whose digest is of its files."""


def _same_signature(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """The same objects (``is``, never ``==``: a tensor's ``==`` is element-wise) with the same stamps.

    An inference tensor has no version counter: its set is hashed again each time.
    """
    (stimuli, count, digests, digest_count, images, version, *rest) = old
    (stimuli2, count2, digests2, digest_count2, images2, version2, *rest2) = new
    return (
        stimuli is stimuli2 and digests is digests2 and images() is images2() and version is not None
        and (count, digest_count, version, rest) == (count2, digest_count2, version2, rest2)
    )  # fmt: skip


def _verify(root: Path, digests: dict[str, str], dataset: str, allow_modified: bool) -> str:
    """ "verified", or what differs from the manifest (only with ``allow_modified``; else an error)."""
    if get_dataset(dataset).manifest is None:
        # model-vs-human's further sets publish no checksums: the structure, and the record of the first fetch
        from modelval.datasets.release import release_status

        return release_status(root, dataset, digests, allow_modified=allow_modified)
    problems = manifest_differences(digests, load_manifest(dataset=dataset))
    if not problems:
        return "verified"
    shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    summary = f"{len(problems)} file{'s' if len(problems) != 1 else ''} differ{'' if len(problems) != 1 else 's'}"
    if not allow_modified:
        raise DataError(
            f"{root} is not the published {dataset} set: {shown}. Restore it (`modelval data download --force`) "
            "or pass --allow-modified-stimuli to evaluate it anyway"
        )
    return f"modified: {summary} from the manifest ({shown})"
