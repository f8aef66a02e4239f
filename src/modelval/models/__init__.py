"""Model registry. Importing this package registers every entry (one module per family)."""

# Registration order is listing order: the paper's ResNet-50s, then DeiT, then the bundled model.
from modelval.models import resnet  # noqa: F401, I001  (registers its entries)
from modelval.models import deit  # noqa: F401
from modelval.models import efficientnet  # noqa: F401
from modelval.models.registry import (
    LoadContext,
    LoadedModel,
    ModelConfig,
    ModelEntry,
    fetch_weights,
    get_entry,
    list_models,
    load_entry,
    register_model,
    resolve_checkpoint_dir,
    resolve_offline,
    weights_status,
)
from modelval.models.loader import entry_for_spec, load_model
from modelval.models.specs import ModelSpec, is_spec, parse_spec
from modelval.models.weights import WeightsStatus

__all__ = [
    "LoadContext",
    "LoadedModel",
    "ModelConfig",
    "ModelEntry",
    "ModelSpec",
    "WeightsStatus",
    "entry_for_spec",
    "fetch_weights",
    "get_entry",
    "is_spec",
    "list_models",
    "load_entry",
    "load_model",
    "parse_spec",
    "register_model",
    "resolve_checkpoint_dir",
    "resolve_offline",
    "weights_status",
]
