"""DeiT tiny/small/base (patch 16, 224 px) from three sources: torch.hub, HuggingFace transformers, timm.

The weights are the same DeiT release in all three (HF and timm converted them from the files of
facebookresearch/deit), so differences between sources come from the code path or the preprocessing:

- ``deit_*_hub``: ``torch.hub.load("facebookresearch/deit:main", "deit_<v>_patch16_224")`` built with
  ``pretrained=False`` from the hub code in ``$TORCH_HOME/hub/facebookresearch_deit_main``, then the
  release checkpoint (``{"model": state_dict}``) downloaded and verified by modelval, loaded strictly.
  Preprocessing: the DeiT repository's eval transform (resize int(224/0.875)=256 bicubic, crop 224,
  ImageNet mean/std), the one the paper reports.
- ``deit_*_hf``: ``AutoModelForImageClassification.from_pretrained("facebook/deit-<v>-patch16-224")``
  (a ``ViTForImageClassification``), from the HF cache. Preprocessing: whatever the checkpoint's
  ``preprocessor_config.json`` says, read from the cache at load time; the non-distilled checkpoints
  ship mean/std 0.5 and a direct 224 resize, NOT the ImageNet statistics DeiT was trained with.
- ``deit_*_timm``: ``timm.create_model("deit_<v>_patch16_224.fb_in1k", pretrained=True)`` with the
  weights file from the HF cache (``timm/deit_<v>_patch16_224.fb_in1k``). Preprocessing: timm's
  pretrained config (crop_pct 0.9, i.e. resize 248 bicubic, crop 224, ImageNet mean/std).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    from torch import nn

from modelval.models.checkpoints import load_state_dict_file
from modelval.models.entry import LoadContext, ModelEntry
from modelval.models.registry import register_model
from modelval.models.sources import timm_data_config, timm_preprocess, timm_preprocess_origin
from modelval.models.weights import HFRepo, HubCode, UrlCheckpoint, hf_cache_dir
from modelval.preprocessing import HALF_MEAN, HALF_STD, IMAGENET_MEAN, IMAGENET_STD, PreprocessConfig

VARIANTS: tuple[str, ...] = ("tiny", "small", "base")
DEIT_HUB = HubCode("facebookresearch/deit", "main")
DEIT_RELEASE_URLS: dict[str, str] = {
    "tiny": "https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth",
    "small": "https://dl.fbaipublicfiles.com/deit/deit_small_patch16_224-cd65a155.pth",
    "base": "https://dl.fbaipublicfiles.com/deit/deit_base_patch16_224-b5f2ef4d.pth",
}

#: facebookresearch/deit ``datasets.build_transform`` at eval: Resize(int(224 / 0.875)) bicubic, CenterCrop(224).
DEIT_REPO_PREPROCESS = PreprocessConfig(
    mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", resize=256, crop=224
)
#: What the non-distilled facebook/deit-*-patch16-224 processor configs say (ViTImageProcessor:
#: mean/std 0.5, direct 224x224 resize). Used only while the checkpoint's own config is not cached.
HF_SHIPPED_PREPROCESS = PreprocessConfig(mean=HALF_MEAN, std=HALF_STD, interpolation="bilinear", resize=224)
#: timm ``deit_*_patch16_224.fb_in1k``: crop_pct 0.9 -> resize floor(224 / 0.9) = 248, bicubic, crop 224.
TIMM_PREPROCESS = PreprocessConfig(
    mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic", resize=math.floor(224 / 0.9), crop=224
)


def _hub_entrypoint(variant: str) -> str:
    return f"deit_{variant}_patch16_224"


def hf_repo_id(variant: str) -> str:
    """The Hub repository of a DeiT variant (``facebook/deit-small-patch16-224``).

    Parameters
    ----------
    variant
        ``tiny``, ``small`` or ``base``.
    """
    return f"facebook/deit-{variant}-patch16-224"


def timm_model_name(variant: str) -> str:
    """timm's pretrained name of a DeiT variant (``deit_small_patch16_224.fb_in1k``).

    Parameters
    ----------
    variant
        ``tiny``, ``small`` or ``base``.
    """
    return f"deit_{variant}_patch16_224.fb_in1k"


def _build_hub(variant: str):
    def build(context: LoadContext) -> nn.Module:
        from modelval.models.hub import load_hub_model

        repo_dir, checkpoint = context.weight_paths
        model = load_hub_model(repo_dir, _hub_entrypoint(variant), pretrained=False)
        model.load_state_dict(load_state_dict_file(checkpoint, key="model"), strict=True)
        return model

    return build


def _build_hf(variant: str):
    def build(context: LoadContext) -> nn.Module:
        from modelval.models.convert import load_hf_image_classifier

        # local_files_only: load_model has already fetched (or refused to, offline) what is needed.
        model = load_hf_image_classifier(hf_repo_id(variant), cache_dir=hf_cache_dir(), local_files_only=True)
        from modelval.models.wrappers import LogitsOf

        return LogitsOf(model)

    return build


def _hf_shipped_preprocess(repo_id: str) -> tuple[PreprocessConfig, list[str]]:
    """The processor config a cached HF checkpoint ships, or the documented one when it is not cached."""
    from modelval.models.hf import load_processor, processor_to_config
    from modelval.models.weights import HFRepo

    if HFRepo(repo_id).cached_file("preprocessor_config.json") is None:
        return HF_SHIPPED_PREPROCESS, [f"{repo_id} not in the HF cache: documented config, not read from the file"]
    config, notes = processor_to_config(load_processor(repo_id, cache_dir=hf_cache_dir()))
    return config, [f"read from the cached preprocessor_config.json of {repo_id}", *notes]


def _timm_preprocess(variant: str):
    def resolve(context: LoadContext) -> tuple[PreprocessConfig, str]:
        name = timm_model_name(variant)
        return timm_preprocess(name), timm_preprocess_origin(name)

    return resolve


def _build_timm(variant: str):
    def build(context: LoadContext) -> nn.Module:
        import timm

        (weights,) = context.weight_paths
        # timm's own pretrained loader (filters, adapters) reads the file we resolved in the HF cache.
        return timm.create_model(
            timm_model_name(variant), pretrained=True, pretrained_cfg_overlay={"file": str(weights)}
        )

    return build


def _deit_hub_entry(variant: str, *, url: str | None = None, name: str | None = None) -> ModelEntry:
    """The torch.hub DeiT entry; ``url`` replaces the release checkpoint URL (tests serve one locally)."""
    release = UrlCheckpoint(url or DEIT_RELEASE_URLS[variant])
    return ModelEntry(
        name=name or f"deit_{variant}_hub",
        family="deit",
        variant=variant,
        source="torch.hub",
        preprocess=DEIT_REPO_PREPROCESS,
        build=_build_hub(variant),
        weights_url=release.source_url,
        weights_file=release.file_name,
        provenance=(
            f"torch.hub facebookresearch/deit:main entry {_hub_entrypoint(variant)}(pretrained=False) + "
            f"release checkpoint {release.file_name} ['model'], loaded strictly"
        ),
        label=f"DeiT-{variant.capitalize()} (torch.hub)",
        weights=(DEIT_HUB, release),
    )


def _register(variant: str) -> list[ModelEntry]:
    size = variant.capitalize()
    hub = _deit_hub_entry(variant)
    hf_repo = HFRepo(hf_repo_id(variant), optional_files=("preprocessor_config.json",))
    hf = ModelEntry(
        name=f"deit_{variant}_hf",
        family="deit",
        variant=variant,
        source="huggingface",
        # "model" normalization = what DeiT was trained with (ImageNet mean/std), as for the other
        # sources; the checkpoint's shipped processor config (0.5/0.5) is what the audit exposes and
        # what the "half" case of the validation matrix measures.
        preprocess=DEIT_REPO_PREPROCESS,
        build=_build_hf(variant),
        weights_url=hf_repo.url(),
        provenance=(
            f"transformers AutoModelForImageClassification {hf_repo_id(variant)} (ViTForImageClassification); "
            "preprocessing: DeiT's training config (ImageNet mean/std); the shipped preprocessor_config.json says "
            "mean/std 0.5 (not DeiT's training normalization), see `modelval models audit`"
        ),
        label=f"DeiT-{size} (HF)",
        weights=(hf_repo,),
    )
    timm_repo = HFRepo(f"timm/{timm_model_name(variant)}", files=())
    timm_entry = ModelEntry(
        name=f"deit_{variant}_timm",
        family="deit",
        variant=variant,
        source="timm",
        preprocess=TIMM_PREPROCESS,
        build=_build_timm(variant),
        weights_url=timm_repo.url(),
        provenance=f"timm.create_model('{timm_model_name(variant)}', pretrained=True), weights from the HF Hub",
        label=f"DeiT-{size} (timm)",
        weights=(timm_repo,),
        resolve_preprocess=_timm_preprocess(variant),
    )
    return [register_model(e) for e in (hub, hf, timm_entry)]


DEIT_ENTRIES: list[ModelEntry] = [entry for variant in VARIANTS for entry in _register(variant)]

__all__ = [
    "DEIT_ENTRIES",
    "DEIT_HUB",
    "DEIT_RELEASE_URLS",
    "DEIT_REPO_PREPROCESS",
    "HF_SHIPPED_PREPROCESS",
    "TIMM_PREPROCESS",
    "_deit_hub_entry",
    "_hf_shipped_preprocess",
    "timm_data_config",
    "timm_preprocess",
    "timm_preprocess_origin",
]
