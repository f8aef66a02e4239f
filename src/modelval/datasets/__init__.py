"""Datasets: the stimulus folders on disk, their checksum manifests, downloads, the decode cache, and the
stimuli decoded once (:class:`~modelval.datasets.stimulus_set.StimulusSet`).
"""

from __future__ import annotations

from modelval.lazy import lazy_exports

_EXPORTS = {
    "cache_enabled": "modelval.datasets.cache",
    "load_or_decode": "modelval.datasets.cache",
    "default_raw_data_dir": "modelval.datasets.fetch",
    "download_raw_data": "modelval.datasets.fetch",
    "download_stimuli": "modelval.datasets.fetch",
    "ensure_stimuli": "modelval.datasets.fetch",
    "source_url": "modelval.datasets.fetch",
    "build_manifest": "modelval.datasets.manifest",
    "load_manifest": "modelval.datasets.manifest",
    "manifest_path": "modelval.datasets.manifest",
    "verify_stimuli": "modelval.datasets.manifest",
    "DatasetEntry": "modelval.datasets.registry",
    "get_dataset": "modelval.datasets.registry",
    "list_datasets": "modelval.datasets.registry",
    "EXPECTED_CONFLICTS": "modelval.datasets.stimuli",
    "EXPECTED_IMAGES": "modelval.datasets.stimuli",
    "IMAGE_SIZE": "modelval.datasets.stimuli",
    "Stimulus": "modelval.datasets.stimuli",
    "decode_stimuli": "modelval.datasets.stimuli",
    "default_data_root": "modelval.datasets.stimuli",
    "discover_stimuli": "modelval.datasets.stimuli",
    "load_image": "modelval.datasets.stimuli",
    "parse_stimulus_name": "modelval.datasets.stimuli",
    "resolve_data_root": "modelval.datasets.stimuli",
    "summarize": "modelval.datasets.stimuli",
    "StimulusSet": "modelval.datasets.stimulus_set",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
