"""Records: what produced a result and what it produced, kept so a later run can trust or compare it.

The provenance record (:mod:`~modelval.records.provenance`: versions, digests of weights and stimuli,
the device), the output cache of a model's raw outputs (:mod:`~modelval.records.output_cache`) and the
SQLite run store behind ``modelval runs`` (:mod:`~modelval.records.run_store`).
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

_EXPORTS = {
    "OutputCache": "modelval.records.output_cache",
    "environment": "modelval.records.provenance",
    "forget_digests": "modelval.records.digests",
    "state_dict_digest": "modelval.records.digests",
    "RunStore": "modelval.records.run_store",
    "default_run_store": "modelval.records.run_store",
    "record_run": "modelval.records.run_store",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
