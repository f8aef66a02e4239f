"""Datasets: the stimulus folders on disk, their checksum manifests, downloads and the decode cache."""

from modelval.datasets.cache import NO_CACHE_ENV, cache_enabled, load_or_decode
from modelval.datasets.fetch import (
    DATA_MIRROR_ENV,
    default_raw_data_dir,
    download_raw_data,
    download_stimuli,
    ensure_stimuli,
    source_url,
)
from modelval.datasets.manifest import build_manifest, load_manifest, manifest_path, verify_stimuli
from modelval.datasets.registry import DatasetEntry, get_dataset, list_datasets
from modelval.datasets.stimuli import (
    DATA_ROOT_ENV,
    EXPECTED_CONFLICTS,
    EXPECTED_IMAGES,
    IMAGE_SIZE,
    Stimulus,
    decode_stimuli,
    default_data_root,
    discover_stimuli,
    load_image,
    parse_stimulus_name,
    resolve_data_root,
    summarize,
)

__all__ = [
    "DATA_MIRROR_ENV",
    "DATA_ROOT_ENV",
    "EXPECTED_CONFLICTS",
    "EXPECTED_IMAGES",
    "IMAGE_SIZE",
    "NO_CACHE_ENV",
    "DatasetEntry",
    "Stimulus",
    "build_manifest",
    "cache_enabled",
    "decode_stimuli",
    "default_data_root",
    "default_raw_data_dir",
    "discover_stimuli",
    "download_raw_data",
    "download_stimuli",
    "ensure_stimuli",
    "get_dataset",
    "list_datasets",
    "load_image",
    "load_manifest",
    "load_or_decode",
    "manifest_path",
    "parse_stimulus_name",
    "resolve_data_root",
    "source_url",
    "summarize",
    "verify_stimuli",
]
