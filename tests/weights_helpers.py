"""Shared helpers for the model tests: a local HTTP server, checkpoint writers, a fake HF cache.

Everything runs on 127.0.0.1 or in temporary folders; nothing here touches the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from http_server import LocalFileServer


@contextlib.contextmanager
def serve(directory: Path, mode: str = "ok") -> Iterator[LocalFileServer]:
    """Serve every file below ``directory`` on 127.0.0.1 (random port). Modes: ok, error500, close, truncate."""
    server = LocalFileServer()
    try:
        server.add_directory(directory, mode=mode)
        yield server
    finally:
        server.close()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_with_hash_name(payload: object, directory: Path, stem: str, suffix: str) -> Path:
    """``torch.save`` then rename to torch.hub's ``<stem>-<sha256[:8]><suffix>``."""
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f"{stem}.tmp"
    torch.save(payload, temporary)
    final = directory / f"{stem}-{sha256_file(temporary)[:8]}{suffix}"
    temporary.rename(final)
    return final


def save_geirhos_checkpoint(model: nn.Module, directory: Path, stem: str = "resnet50_train_60_epochs") -> Path:
    """The texture-vs-shape format: ``{"state_dict": ...}`` of an ``nn.DataParallel`` model, plus its metadata."""
    state = nn.DataParallel(model).state_dict()  # keys "module.*", as DataParallel saves them
    payload = {"epoch": 60, "arch": "resnet50", "state_dict": state, "best_prec1": torch.tensor(0.0)}
    return save_with_hash_name(payload, directory, stem, ".pth.tar")


def write_hf_cache_repo(cache: Path, repo_id: str, files: dict[str, Path | str | dict]) -> Path:
    """Lay out ``files`` as huggingface_hub's cache does (refs/main -> snapshots/<commit>/...)."""
    commit = hashlib.sha1(repo_id.encode()).hexdigest()
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    for name, content in files.items():
        target = snapshot / name
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        elif isinstance(content, dict):
            target.write_text(json.dumps(content))
        else:
            target.write_text(content)
    return snapshot


#: facebookresearch/deit's hubconf.py and models.py, reduced to the three entry points modelval uses,
#: with the same names, signatures and construction (timm VisionTransformer, @register_model).
DEIT_HUBCONF = """
dependencies = ["torch", "timm"]
from models import deit_tiny_patch16_224, deit_small_patch16_224, deit_base_patch16_224
"""
DEIT_MODELS = """
from functools import partial
import torch
import torch.nn as nn
from timm.models.vision_transformer import VisionTransformer, _cfg
from timm.models import register_model

def _deit(embed_dim, num_heads, pretrained, url, **kwargs):
    model = VisionTransformer(
        patch_size=16, embed_dim=embed_dim, depth=12, num_heads=num_heads, mlp_ratio=4, qkv_bias=True,
        norm_layer=partial(nn.LayerNorm, eps=1e-6), **kwargs)
    model.default_cfg = _cfg()
    if pretrained:
        checkpoint = torch.hub.load_state_dict_from_url(url=url, map_location="cpu", check_hash=True)
        model.load_state_dict(checkpoint["model"])
    return model

@register_model
def deit_tiny_patch16_224(pretrained=False, **kwargs):
    return _deit(192, 3, pretrained, "https://dl.fbaipublicfiles.com/deit/deit_tiny_patch16_224-a1311bcf.pth", **kwargs)

@register_model
def deit_small_patch16_224(pretrained=False, **kwargs):
    url = "https://dl.fbaipublicfiles.com/deit/deit_small_patch16_224-cd65a155.pth"
    return _deit(384, 6, pretrained, url, **kwargs)

@register_model
def deit_base_patch16_224(pretrained=False, **kwargs):
    url = "https://dl.fbaipublicfiles.com/deit/deit_base_patch16_224-b5f2ef4d.pth"
    return _deit(768, 12, pretrained, url, **kwargs)
"""


def write_deit_hub(torch_home: Path) -> Path:
    """A hub checkout where torch.hub caches facebookresearch/deit:main under ``torch_home``."""
    repo = torch_home / "hub" / "facebookresearch_deit_main"
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "hubconf.py").write_text(DEIT_HUBCONF)
    (repo / "models.py").write_text(DEIT_MODELS)
    return repo


def random_deit(variant: str = "tiny", seed: int = 0) -> nn.Module:
    """timm's DeiT with random weights (the point is the code path, not the accuracy)."""
    import timm

    torch.manual_seed(seed)
    return timm.create_model(f"deit_{variant}_patch16_224", pretrained=False).eval()


def save_deit_release(model: nn.Module, directory: Path, variant: str = "tiny") -> Path:
    """The facebookresearch/deit release format: ``{"model": state_dict}``, hash-prefixed name."""
    return save_with_hash_name({"model": model.state_dict()}, directory, f"deit_{variant}_patch16_224", ".pth")


def write_hf_deit(cache: Path, model: nn.Module, variant: str, processor: dict | None, work: Path) -> Path:
    """A facebook/deit-<variant>-patch16-224 repo in the HF cache holding ``model``'s weights (converted)."""
    from modelval.models.convert import save_hf_vit_checkpoint

    folder = save_hf_vit_checkpoint(model.state_dict(), variant, work / f"hf-{variant}")
    files: dict[str, Path | dict] = {
        "config.json": folder / "config.json",
        "model.safetensors": folder / "model.safetensors",
    }
    if processor is not None:
        files["preprocessor_config.json"] = processor
    return write_hf_cache_repo(cache, f"facebook/deit-{variant}-patch16-224", files)


def write_timm_deit(cache: Path, model: nn.Module, variant: str, work: Path) -> Path:
    """timm/deit_<variant>_patch16_224.fb_in1k in the HF cache (model.safetensors, timm key names)."""
    from safetensors.torch import save_file

    work.mkdir(parents=True, exist_ok=True)
    file = work / f"timm-{variant}.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, file)
    return write_hf_cache_repo(cache, f"timm/deit_{variant}_patch16_224.fb_in1k", {"model.safetensors": file})


#: The processor configs the audit must tell apart, in the shapes the Hub checkpoints ship them.
VIT_HALF_PROCESSOR = {  # non-distilled facebook/deit-{small,base}-patch16-224
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "ViTFeatureExtractor",
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 2,
    "size": 224,
}
DEIT_IMAGENET_PROCESSOR = {  # facebook/deit-base-distilled-patch16-224
    "crop_size": 224,
    "do_center_crop": True,
    "do_normalize": True,
    "do_resize": True,
    "feature_extractor_type": "DeiTFeatureExtractor",
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "resample": 3,
    "size": 256,
}


# --- Random-init models in the exact cache layouts of timm, transformers, torchvision and torch.hub ---


def write_timm_random(cache: Path, name: str, work: Path, seed: int = 0) -> nn.Module:
    """timm's ``name`` with random weights, as ``timm/<name>`` model.safetensors in the HF cache."""
    import timm
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False).eval()
    work.mkdir(parents=True, exist_ok=True)
    file = work / f"{name}.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, file)
    hub_id = timm.models.get_pretrained_cfg(name).hf_hub_id
    write_hf_cache_repo(cache, hub_id, {"model.safetensors": file})
    return model


def imagenet_id2label() -> dict[str, str]:
    """ImageNet-1k labels in the style of HF configs ("tench, Tinca tinca")."""
    from torchvision.models._meta import _IMAGENET_CATEGORIES

    return {str(i): f"{name}, synonym" for i, name in enumerate(_IMAGENET_CATEGORIES)}


def write_hf_random_vit(cache: Path, repo_id: str, work: Path, *, processor: dict | None, num_labels: int = 1000):
    """A tiny random ViTForImageClassification saved by transformers, laid out in the HF cache."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    id2label = imagenet_id2label() if num_labels == 1000 else {str(i): f"class {i}" for i in range(num_labels)}
    config = ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=224,
        patch_size=32, num_labels=num_labels, id2label=id2label, label2id={v: int(k) for k, v in id2label.items()},
    )  # fmt: skip
    folder = work / "hf-vit"
    ViTForImageClassification(config).eval().save_pretrained(folder)
    files: dict[str, Path | str | dict] = {
        "config.json": folder / "config.json",
        "model.safetensors": folder / "model.safetensors",
    }
    if processor is not None:
        files["preprocessor_config.json"] = processor
    return write_hf_cache_repo(cache, repo_id, files)


def write_torchvision_random(torch_home: Path, builder: str, weights: str = "DEFAULT", seed: int = 0) -> Path:
    """A random-init state dict where torchvision's weights enum caches its file ($TORCH_HOME/hub/checkpoints)."""
    import torchvision

    enum = torchvision.models.get_model_weights(builder)[weights]
    torch.manual_seed(seed)
    model = torchvision.models.get_model(builder, weights=None)
    target = torch_home / "hub" / "checkpoints" / Path(enum.url).name
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), target)
    return target


HUB_TINY = """
dependencies = ["torch", "torchvision"]
import torch, torchvision

def tiny(pretrained=False):
    torch.manual_seed(0)
    return torchvision.models.mobilenet_v3_small(weights=None)
"""


def write_hub_repo(torch_home: Path, owner: str = "someone", repo: str = "tinynets", ref: str = "main") -> Path:
    """A torch.hub checkout of a repository whose ``tiny`` entry builds a random MobileNetV3-Small."""
    directory = torch_home / "hub" / f"{owner}_{repo}_{ref}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hubconf.py").write_text(HUB_TINY)
    return directory
