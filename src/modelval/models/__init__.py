"""Model registry. Importing this package registers every entry (one module per family).
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

# Registration order is listing order: the paper's ResNet-50s, then DeiT, then the bundled model. These
# modules import no torch (their builders import it when a model is built).
from modelval.models import (
    deit,  # noqa: F401  (registers its entries)
    efficientnet,  # noqa: F401  (registers its entries)
    resnet,  # noqa: F401  (registers its entries)
)

_EXPORTS = {
    "LoadContext": "modelval.models.entry",
    "LoadedModel": "modelval.models.entry",
    "ModelConfig": "modelval.models.entry",
    "ModelEntry": "modelval.models.entry",
    "fetch_weights": "modelval.models.registry",
    "get_entry": "modelval.models.registry",
    "list_models": "modelval.models.registry",
    "load_entry": "modelval.models.registry",
    "register_model": "modelval.models.registry",
    "resolve_checkpoint_dir": "modelval.models.registry",
    "resolve_offline": "modelval.models.registry",
    "weights_status": "modelval.models.registry",
    "entry_for_spec": "modelval.models.loader",
    "load_model": "modelval.models.loader",
    "ModelSpec": "modelval.models.specs",
    "check_spec_consent": "modelval.models.specs",
    "runs_code": "modelval.models.specs",
    "parse_spec": "modelval.models.specs",
    "WeightsStatus": "modelval.models.weights",
    "ZeroShotSettings": "modelval.models.zero_shot",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
