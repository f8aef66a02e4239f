"""HuggingFace models: ``hf:<repo>`` and ``hf:./folder`` entries, and their image processors as
:class:`PreprocessConfig` (what a processor config really does)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.errors import DataError, ModelvalError, describe_exception
from modelval.models.entry import LoadContext, ModelEntry
from modelval.models.sources import DEFAULT_ORIGIN, spec_entry
from modelval.models.specs import ModelSpec, not_zero_shot
from modelval.models.weights import HFRepo, hf_cache_dir
from modelval.preprocessing import PreprocessConfig

if TYPE_CHECKING:
    from torch import nn

    from modelval.models.zero_shot import ZeroShotSettings

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


#: An HF config passes as ImageNet-1k when this share of its 1000 labels match torchvision's names.
IMAGENET_LABEL_AGREEMENT = 0.9


def _check_imagenet_id2label(id2label: dict[int, str], repo: str) -> None:
    """Refuse an HF classifier whose labels are not ImageNet-1k (it needs a label map)."""
    from torchvision.models._meta import _IMAGENET_CATEGORIES

    if len(id2label) != len(_IMAGENET_CATEGORIES):
        raise ModelvalError(
            f"{repo}: the head has {len(id2label)} labels (config.id2label), not ImageNet-1k's 1000: pass "
            "--label-map FILE.json mapping each of the 16 categories to its output indices"
        )

    def first_name(label: str) -> str:
        return label.split(",")[0].strip().lower().replace("_", " ")

    agree = sum(
        first_name(str(id2label.get(i, id2label.get(str(i), "")))) == first_name(name)  # type: ignore[call-overload]
        for i, name in enumerate(_IMAGENET_CATEGORIES)
    )
    if agree < IMAGENET_LABEL_AGREEMENT * len(_IMAGENET_CATEGORIES):
        raise ModelvalError(
            f"{repo}: config.id2label has 1000 labels but only {agree} match ImageNet-1k's class names in order; "
            "the head is not ImageNet-1k: pass --label-map FILE.json for its classes"
        )


def _hf_classifier(
    where: str, source: str | Path, imagenet_head: bool, zero_shot: ZeroShotSettings | None = None, **options: Any
) -> nn.Module:
    """The transformers classifier of an HF repository in the cache or a local folder, in one code path.

    transformers' own errors on a broken ``config.json``, one without ``model_type``, or an empty, garbage
    or pickle-bearing weights file (``weights_only`` loading refuses its objects, and no code runs) are
    tracebacks of 40 lines; here each is one line naming the folder and the exception.
    """
    from transformers import AutoConfig

    from modelval.models.convert import load_hf_image_classifier
    from modelval.models.wrappers import LogitsOf

    with _hf_errors(f"{where}: transformers cannot read its config.json"):
        config = AutoConfig.from_pretrained(source, **options)
    if getattr(config, "model_type", None) in ZERO_SHOT_MODEL_TYPES:
        from modelval.models.zero_shot import ZeroShotSettings

        return _hf_zero_shot(where, source, zero_shot or ZeroShotSettings(), **options)
    if zero_shot is not None:
        raise DataError(not_zero_shot(f"{where} (model_type {getattr(config, 'model_type', None)!r})"))
    if imagenet_head:
        _check_imagenet_id2label(dict(config.id2label), where)
    with _hf_errors(f"{where}: transformers cannot load the model"):
        return LogitsOf(load_hf_image_classifier(source, **options))


#: ``config.model_type`` of the transformers image-text models read as zero-shot classifiers.
ZERO_SHOT_MODEL_TYPES: tuple[str, ...] = ("clip", "siglip", "siglip2")


def _hf_zero_shot(where: str, source: str | Path, settings: ZeroShotSettings, **options: Any) -> nn.Module:
    """A transformers CLIPModel / SiglipModel and its tokenizer as a zero-shot classifier."""
    from transformers import AutoModel, AutoTokenizer

    from modelval.models.zero_shot import hf_classifier

    with _hf_errors(f"{where}: transformers cannot load the model"):
        model = AutoModel.from_pretrained(source, **options).eval()
    with _hf_errors(f"{where}: transformers cannot load its tokenizer"):
        tokenizer = AutoTokenizer.from_pretrained(source, **options)
    return hf_classifier(model, tokenizer, settings, source=f"transformers {type(model).__name__} {where}")


@contextlib.contextmanager
def _hf_errors(what: str) -> Iterator[None]:
    """transformers' exceptions (OSError, ValueError, UnpicklingError, safetensors', ...) as one DataError line."""
    try:
        yield
    except ModelvalError:
        raise
    except Exception as error:
        if "weights_only" in str(error):
            # torch's message advises weights_only=False, i.e. running the file's code: never do that.
            raise DataError(
                f"{what}: a weights file holds objects other than tensors, which weights_only loading refuses "
                "(loading it otherwise would run code, which modelval never does); save it as model.safetensors"
            ) from error
        raise DataError(f"{what} ({describe_exception(error)})") from error


def hf_entry(spec: ModelSpec, *, imagenet_head: bool = True, zero_shot: ZeroShotSettings | None = None) -> ModelEntry:
    """``hf:<repo_id>[@<revision>]``: AutoModelForImageClassification with the repository's processor.

    Parameters
    ----------
    spec
        The parsed spec.
    imagenet_head
        Refuse a head that is not ImageNet-1k.
    zero_shot
        How a CLIP or SigLIP model becomes a classifier.
    """
    repo_id, revision = spec.target, spec.detail
    repo = HFRepo(repo_id, optional_files=("preprocessor_config.json",), revision=revision)

    def build(context: LoadContext) -> nn.Module:
        options = dict(cache_dir=hf_cache_dir(), local_files_only=True, revision=revision)
        return _hf_classifier(repo_id, repo_id, imagenet_head, zero_shot, **options)

    def resolve(context: LoadContext) -> tuple[PreprocessConfig, str]:
        if repo.cached_file("preprocessor_config.json") is None:
            return PreprocessConfig(), f"{DEFAULT_ORIGIN}: {repo_id} has no preprocessor_config.json"
        with _hf_errors(f"{repo_id}: transformers cannot read its preprocessor_config.json"):
            config, _ = processor_to_config(load_processor(repo_id, cache_dir=hf_cache_dir(), revision=revision))
        return config, f"{repo_id} preprocessor_config.json (AutoImageProcessor)"

    return spec_entry(
        spec,
        "huggingface",
        build,
        resolve_preprocess=resolve,
        weights=(repo,),
        weights_url=repo.url(),
        provenance=f"transformers AutoModelForImageClassification {repo_id}" + (f"@{revision}" if revision else ""),
    )


def hf_local_folder(spec: ModelSpec, base_dir: Path | None = None) -> Path | None:
    """The local ``save_pretrained`` folder an ``hf:`` spec names, or None for a Hub repository.

    ``hf:./dir`` and ``hf:/abs/dir`` always name a folder (relative to ``base_dir``, the models file's folder,
    when given); ``hf:<owner>/<name>`` names one when that folder exists, as transformers itself reads it.

    Parameters
    ----------
    spec
        The parsed spec.
    base_dir
        A relative folder is read from here.
    """
    if spec.kind != "hf":
        return None
    path = Path(spec.target).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if spec.local:
        if not path.is_dir():
            raise DataError(f"{spec.text}: no folder {path} (a local save_pretrained folder was named)")
        return path
    return path if spec.detail is None and path.is_dir() else None


def hf_folder_entry(
    spec: ModelSpec, folder: Path, *, imagenet_head: bool = True, zero_shot: ZeroShotSettings | None = None
) -> ModelEntry:
    """``hf:./<folder>``: a ``save_pretrained`` folder, its processor config as the preprocessing source.

    Parameters
    ----------
    spec
        The parsed spec.
    folder
        The ``save_pretrained`` folder.
    imagenet_head
        Refuse a head that is not ImageNet-1k.
    zero_shot
        How a CLIP or SigLIP model becomes a classifier.
    """
    if not (folder / "config.json").is_file():
        raise DataError(
            f"{spec.text}: {folder} is not a save_pretrained folder (no config.json); write it with "
            "model.save_pretrained(folder) and processor.save_pretrained(folder)"
        )

    def build(context: LoadContext) -> nn.Module:
        return _hf_classifier(str(folder), folder, imagenet_head, zero_shot, local_files_only=True)

    def resolve(context: LoadContext) -> tuple[PreprocessConfig, str]:
        if not (folder / "preprocessor_config.json").is_file():
            return PreprocessConfig(), f"{DEFAULT_ORIGIN}: {folder} has no preprocessor_config.json"
        with _hf_errors(f"{folder}: transformers cannot read its preprocessor_config.json"):
            config, _ = processor_to_config(load_processor(folder))
        return config, f"{folder / 'preprocessor_config.json'} (AutoImageProcessor)"

    return spec_entry(
        spec,
        "huggingface",
        build,
        resolve_preprocess=resolve,
        provenance=f"transformers AutoModelForImageClassification from the local folder {folder}",
    )
