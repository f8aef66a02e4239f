"""Model registry. Importing this package registers every entry (one module per family)."""

from modelval.models import efficientnet  # noqa: F401  (registers its entries)
from modelval.models.registry import (
    LoadContext,
    LoadedModel,
    ModelConfig,
    ModelEntry,
    get_entry,
    list_models,
    load_model,
    register_model,
    resolve_checkpoint_dir,
    resolve_device,
    resolve_offline,
)

__all__ = [
    "LoadContext",
    "LoadedModel",
    "ModelConfig",
    "ModelEntry",
    "get_entry",
    "list_models",
    "load_model",
    "register_model",
    "resolve_checkpoint_dir",
    "resolve_device",
    "resolve_offline",
]
