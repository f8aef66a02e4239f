"""modelval: validation of image classifiers.

Shape bias on the cue-conflict stimuli of Geirhos et al. (ICLR 2019), calibration and
imbalance-aware metrics. The public entry points are re-exported here; everything else lives in
one module per concept (data, categories, decisions, shape_bias, evaluation, models, ...).
"""

from modelval.categories import CATEGORIES
from modelval.errors import ModelvalError
from modelval.preprocessing import PreprocessConfig

__version__ = "0.1.0"

__all__ = ["CATEGORIES", "ModelvalError", "PreprocessConfig", "__version__", "list_models", "load_model"]


def __getattr__(name: str):
    # The registry imports torchvision and model code; keep `import modelval` light until it is used.
    if name in ("load_model", "list_models"):
        from modelval import models

        return getattr(models, name)
    raise AttributeError(f"module 'modelval' has no attribute {name!r}")
