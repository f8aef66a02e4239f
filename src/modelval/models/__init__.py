"""Model registry. Importing this package registers every entry (one module per family)."""

from modelval.models import deit, efficientnet, resnet  # noqa: F401  (register their entries)
from modelval.models.registry import (
    LoadContext,
    LoadedModel,
    ModelConfig,
    ModelEntry,
    fetch_weights,
    get_entry,
    list_models,
    load_model,
    register_model,
    resolve_checkpoint_dir,
    resolve_device,
    resolve_offline,
    weights_status,
)
from modelval.models.weights import WeightsStatus

__all__ = [
    "LoadContext",
    "LoadedModel",
    "ModelConfig",
    "ModelEntry",
    "WeightsStatus",
    "fetch_weights",
    "get_entry",
    "list_models",
    "load_model",
    "register_model",
    "resolve_checkpoint_dir",
    "resolve_device",
    "resolve_offline",
    "weights_status",
]
