"""ResNet-50: torchvision's ImageNet weights and the Shape-ResNets of Geirhos et al. (ICLR 2019).

All four are ``torchvision.models.resnet50`` with a checkpoint modelval downloads and verifies.
The texture-vs-shape checkpoints are ``{"state_dict": ...}`` saved from ``nn.DataParallel`` (keys
``module.*``), as ``models/load_pretrained_models.py`` of rgeirhos/texture-vs-shape loads them; the
prefix is stripped and the state dict loaded strictly, so a mismatched file cannot load silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    from torch import nn

from modelval.models.checkpoints import load_state_dict_file, strip_prefix
from modelval.models.entry import LoadContext, ModelEntry
from modelval.models.registry import register_model
from modelval.models.weights import UrlCheckpoint
from modelval.preprocessing import IMAGENET_MEAN, IMAGENET_STD, PreprocessConfig

#: torchvision's ImageNet eval transform (resize 256 bilinear, crop 224, ImageNet mean/std); the
#: Shape-ResNets were trained with the same pipeline (texture-vs-shape uses the PyTorch ImageNet example).
RESNET_PREPROCESS = PreprocessConfig(
    mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bilinear", resize=256, crop=224
)

TORCHVISION_RESNET50_V1_URL = "https://download.pytorch.org/models/resnet50-0676ba61.pth"
_GEIRHOS = "https://bitbucket.org/robert_geirhos/texture-vs-shape-pretrained-models/raw"
SIN_URL = f"{_GEIRHOS}/6f41d2e86fc60566f78de64ecff35cc61eb6436f/resnet50_train_60_epochs-c8e5653e.pth.tar"
SIN_IN_URL = (
    f"{_GEIRHOS}/60b770e128fffcbd8562a3ab3546c1a735432d03/resnet50_train_45_epochs_combined_IN_SF-2a0d100e.pth.tar"
)
SIN_IN_IN_URL = (
    f"{_GEIRHOS}/60b770e128fffcbd8562a3ab3546c1a735432d03/"
    "resnet50_finetune_60_epochs_lr_decay_after_30_start_resnet50_train_45_epochs_combined_IN_SF-ca06340c.pth.tar"
)


def _resnet50_from_checkpoint(path, *, key: str | None) -> nn.Module:
    """torchvision ResNet-50 with a checkpoint's weights, loaded strictly (``module.`` prefix stripped)."""
    from torchvision.models import resnet50

    model = resnet50(weights=None)
    model.load_state_dict(strip_prefix(load_state_dict_file(path, key=key)), strict=True)
    return model


def _builder(key: str | None):
    def build(context: LoadContext) -> nn.Module:
        return _resnet50_from_checkpoint(context.weight_paths[0], key=key)

    return build


def _resnet50_entry(
    name: str, variant: str, url: str, key: str | None, source: str, provenance: str = "", label: str = ""
) -> ModelEntry:
    """A ResNet-50 entry whose checkpoint modelval downloads from ``url`` (tests point it at 127.0.0.1)."""
    checkpoint = UrlCheckpoint(url)
    return ModelEntry(
        name=name,
        family="resnet50",
        variant=variant,
        source=source,
        preprocess=RESNET_PREPROCESS,
        build=_builder(key),
        weights_url=url,
        weights_file=checkpoint.file_name,
        provenance=provenance,
        label=label,
        weights=(checkpoint,),
    )


def _register(
    name: str, variant: str, url: str, key: str | None, source: str, provenance: str = "", label: str = ""
) -> ModelEntry:
    return register_model(_resnet50_entry(name, variant, url, key, source, provenance, label))


RESNET50_IN = _register(
    "resnet50_in",
    "IN",
    TORCHVISION_RESNET50_V1_URL,
    None,
    "torchvision",
    "torchvision ResNet50_Weights.IMAGENET1K_V1 (the original torchvision weights the paper used), raw state dict",
    "ResNet-50 (IN)",
)
RESNET50_SIN = _register(
    "resnet50_sin",
    "SIN",
    SIN_URL,
    "state_dict",
    "texture-vs-shape",
    "rgeirhos/texture-vs-shape models/load_pretrained_models.py 'resnet50_trained_on_SIN': "
    "60 epochs on Stylized-ImageNet",
    "ResNet-50 (SIN)",
)
RESNET50_SIN_IN = _register(
    "resnet50_sin_in",
    "SIN+IN",
    SIN_IN_URL,
    "state_dict",
    "texture-vs-shape",
    "rgeirhos/texture-vs-shape 'resnet50_trained_on_SIN_and_IN': 45 epochs on Stylized-ImageNet + ImageNet",
    "ResNet-50 (SIN+IN)",
)
RESNET50_SIN_IN_IN = _register(
    "resnet50_sin_in_in",
    "SIN+IN->IN",
    SIN_IN_IN_URL,
    "state_dict",
    "texture-vs-shape",
    "rgeirhos/texture-vs-shape 'resnet50_trained_on_SIN_and_IN_then_finetuned_on_IN' (Shape-ResNet): "
    "SIN+IN, then 60 epochs fine-tuning on ImageNet",
    "ResNet-50 (SIN+IN→IN, Shape-ResNet)",
)

__all__ = [
    "RESNET50_IN",
    "RESNET50_SIN",
    "RESNET50_SIN_IN",
    "RESNET50_SIN_IN_IN",
    "_resnet50_entry",
    "_resnet50_from_checkpoint",
]
