"""HuggingFace image processors as :class:`PreprocessConfig` (what a processor config really does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelval.errors import DataError
from modelval.preprocessing import PreprocessConfig

_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}


def _size(value: object, what: str) -> tuple[int | None, bool]:
    """(pixels, is_direct) of a processor size: ``{"shortest_edge": n}`` or a square ``{"height", "width"}``."""
    get = (lambda k: value.get(k)) if isinstance(value, dict) else (lambda k: getattr(value, k, None))
    if isinstance(value, int):
        return value, True
    shortest = get("shortest_edge")
    if shortest:
        return int(shortest), False
    height, width = get("height"), get("width")
    if height and width:
        if height != width:
            raise DataError(f"{what} {height}x{width} is not square; a PreprocessConfig cannot express it")
        return int(height), True
    return None, False


def processor_to_config(processor: Any) -> tuple[PreprocessConfig, list[str]]:
    """The effective preprocessing of a transformers image processor, and notes on what it does.

    A direct ``(h, w)`` resize is recorded as ``resize=h``: on square images (the cue-conflict stimuli)
    it equals the shorter-side resize a PreprocessConfig applies; the note says so.

    Parameters
    ----------
    processor
        A transformers image processor.
    """
    notes = [f"{type(processor).__name__}"]
    resize = crop = None
    if getattr(processor, "do_resize", False):
        resize, direct = _size(processor.size, "resize")
        if direct:
            notes.append(f"direct {resize}x{resize} resize (no aspect-preserving resize)")
    if getattr(processor, "do_center_crop", False):
        crop, _ = _size(processor.crop_size, "crop")
    resample = int(getattr(processor, "resample", 2) or 2)
    if getattr(processor, "do_normalize", True):
        mean, std = tuple(processor.image_mean), tuple(processor.image_std)
    else:
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
        notes.append("no normalization")
    config = PreprocessConfig(
        mean=mean, std=std, interpolation=_RESAMPLE.get(resample, "bilinear"), resize=resize, crop=crop
    )
    return config, notes


def load_processor(
    path_or_repo: str | Path,
    *,
    cache_dir: Path | None = None,
    local_files_only: bool = True,
    revision: str | None = None,
):
    """``AutoImageProcessor.from_pretrained`` (the real resolution from ``preprocessor_config.json``).

    Parameters
    ----------
    path_or_repo
        A local folder or a Hub repository.
    cache_dir
        The HuggingFace cache.
    local_files_only
        Never download.
    revision
        The repository's revision.
    """
    from transformers import AutoImageProcessor

    return AutoImageProcessor.from_pretrained(
        path_or_repo, cache_dir=cache_dir, local_files_only=local_files_only, revision=revision
    )
