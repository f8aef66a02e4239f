"""Convert DeiT weights between the timm / torch.hub layout and HuggingFace transformers' ViT layout.

The non-distilled ``facebook/deit-*-patch16-224`` checkpoints on the HF Hub are ViT-architecture
models (``ViTForImageClassification``) converted from the DeiT release files; the DeiT release
files and timm's ``deit_*_patch16_224.fb_in1k`` share timm's ``VisionTransformer`` key names. With
this conversion one set of weights runs through every source, so "is it the model source?" can be
answered by comparing logits (see transformers' ``convert_vit_timm_to_pytorch.py`` for the mapping).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch

from modelval.errors import DataError

#: (hidden size, heads) of the DeiT variants; all are patch 16, 224 px, 12 layers, MLP ratio 4.
DEIT_DIMENSIONS: dict[str, tuple[int, int]] = {"tiny": (192, 3), "small": (384, 6), "base": (768, 12)}


def hf_vit_config(variant: str, *, num_labels: int = 1000):
    """A ``ViTConfig`` matching ``deit_<variant>_patch16_224``, built locally (no download).

    Parameters
    ----------
    variant
        ``tiny``, ``small`` or ``base``.
    num_labels
        The head's classes.
    """
    from transformers import ViTConfig

    hidden, heads = DEIT_DIMENSIONS[variant]
    labels: dict[str, Any] = {}
    if num_labels == 1000:  # the ImageNet-1k names, as the Hub's facebook/deit-* configs carry them
        from torchvision.models._meta import _IMAGENET_CATEGORIES

        id2label = dict(enumerate(_IMAGENET_CATEGORIES))
        labels = {"id2label": id2label, "label2id": {name: i for i, name in id2label.items()}}
    return ViTConfig(  # type: ignore[call-arg]  # num_labels etc. pass through **kwargs to PretrainedConfig
        hidden_size=hidden,
        num_hidden_layers=12,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        hidden_act="gelu",  # exact (erf) GELU, like timm's nn.GELU
        layer_norm_eps=1e-6,  # DeiT/timm use 1e-6; ViTConfig's default is 1e-12
        image_size=224,
        patch_size=16,
        qkv_bias=True,
        num_labels=num_labels,
        **labels,
    )


def timm_vit_to_hf_vit(state_dict: Mapping[str, torch.Tensor], *, depth: int = 12) -> dict[str, torch.Tensor]:
    """timm/DeiT ``VisionTransformer`` state dict -> ``ViTForImageClassification`` state dict.

    Parameters
    ----------
    state_dict
        timm's state dict.
    depth
        The number of transformer blocks.
    """
    sd = dict(state_dict)
    out = {
        "vit.embeddings.cls_token": sd.pop("cls_token"),
        "vit.embeddings.position_embeddings": sd.pop("pos_embed"),
        "vit.embeddings.patch_embeddings.projection.weight": sd.pop("patch_embed.proj.weight"),
        "vit.embeddings.patch_embeddings.projection.bias": sd.pop("patch_embed.proj.bias"),
        "vit.layernorm.weight": sd.pop("norm.weight"),
        "vit.layernorm.bias": sd.pop("norm.bias"),
        "classifier.weight": sd.pop("head.weight"),
        "classifier.bias": sd.pop("head.bias"),
    }
    renames = {
        "norm1": "layernorm_before",
        "norm2": "layernorm_after",
        "attn.proj": "attention.output.dense",
        "mlp.fc1": "intermediate.dense",
        "mlp.fc2": "output.dense",
    }
    for i in range(depth):
        source, target = f"blocks.{i}.", f"vit.encoder.layer.{i}."
        # timm fuses query, key and value into one (3*hidden, hidden) projection, in that order.
        for kind in ("weight", "bias"):
            q, k, v = sd.pop(f"{source}attn.qkv.{kind}").chunk(3, dim=0)
            for name, tensor in (("query", q), ("key", k), ("value", v)):
                out[f"{target}attention.attention.{name}.{kind}"] = tensor.clone()
        for old, new in renames.items():
            for kind in ("weight", "bias"):
                out[f"{target}{new}.{kind}"] = sd.pop(f"{source}{old}.{kind}")
    if sd:
        raise ValueError(f"unconverted timm keys (not a plain DeiT/ViT checkpoint?): {sorted(sd)[:8]}")
    return out


def save_hf_vit_checkpoint(state_dict: Mapping[str, torch.Tensor], variant: str, directory: Path) -> Path:
    """Write timm/DeiT weights as a HuggingFace checkpoint folder (``config.json`` + ``model.safetensors``).

    The keys are those of the checkpoints on the Hub (``vit.encoder.layer.N...``); newer transformers
    rename them while loading, so the folder goes through exactly the conversion real checkpoints do.

    Parameters
    ----------
    state_dict
        timm's state dict.
    variant
        ``tiny``, ``small`` or ``base``.
    directory
        The folder to write.
    """
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    hf_vit_config(variant).save_pretrained(directory)
    tensors = {k: v.contiguous() for k, v in timm_vit_to_hf_vit(state_dict).items()}
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    return directory


def load_hf_image_classifier(path_or_repo: str | Path, **kwargs: object):
    """``AutoModelForImageClassification.from_pretrained`` that refuses missing or unexpected weights.

    transformers only warns about them and initializes missing ones randomly, which would give a
    plausible-looking but meaningless model.

    Parameters
    ----------
    path_or_repo
        A local folder or a Hub repository.
    **kwargs
        Passed to ``from_pretrained`` (``cache_dir``, ``local_files_only``, ``revision``).
    """
    from transformers import AutoModelForImageClassification

    model, info = AutoModelForImageClassification.from_pretrained(path_or_repo, output_loading_info=True, **kwargs)
    problems = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if problems:
        raise DataError(f"{path_or_repo}: checkpoint does not match the model: {problems}")
    return model.eval()


def hf_vit_from_timm_state_dict(state_dict: Mapping[str, torch.Tensor], variant: str):
    """A ``ViTForImageClassification`` holding the given timm/DeiT weights, via transformers' own loader.

    Parameters
    ----------
    state_dict
        timm's state dict.
    variant
        ``tiny``, ``small`` or ``base``.
    """
    with tempfile.TemporaryDirectory() as directory:
        return load_hf_image_classifier(save_hf_vit_checkpoint(state_dict, variant, Path(directory)))
