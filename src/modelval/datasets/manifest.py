"""SHA-256 manifests of the published stimuli (committed in ``fixtures/``) and verification against them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from modelval.datasets.stimuli import discover_stimuli
from modelval.download import sha256_of
from modelval.errors import ChecksumError, DataError
from modelval.paths import fixtures_dir

MANIFEST_NAME = "cue_conflict_manifest.json"


def manifest_path() -> Path:
    return fixtures_dir() / MANIFEST_NAME


def load_manifest(path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """``{relpath: sha256}`` of the 1280 published stimuli (committed in ``fixtures/``)."""
    path = Path(path) if path else manifest_path()
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"checksum manifest not found: {path}") from None
    return dict(payload["files"])


def build_manifest(root: str | os.PathLike[str]) -> dict[str, object]:
    """A manifest of the stimuli under ``root`` (how ``fixtures/cue_conflict_manifest.json`` was made)."""
    stimuli = discover_stimuli(root)
    return {
        "description": "SHA-256 of the 1280 cue-conflict stimuli (Geirhos et al., ICLR 2019; CC BY 4.0)",
        "count": len(stimuli),
        "files": {s.relpath: sha256_of(Path(root) / s.relpath) for s in stimuli},
    }


def verify_stimuli(root: str | os.PathLike[str], manifest: dict[str, str] | None = None) -> None:
    """Check every file under ``root`` against the manifest; raise naming the first bad file."""
    manifest = manifest if manifest is not None else load_manifest()
    root = Path(root)
    found = {s.relpath for s in discover_stimuli(root, expected_count=None)}
    missing = sorted(set(manifest) - found)
    extra = sorted(found - set(manifest))
    if missing or extra:
        raise DataError(
            f"{root} does not match the manifest: {len(missing)} missing (e.g. {missing[:3]}), "
            f"{len(extra)} unexpected (e.g. {extra[:3]})"
        )
    for relpath, expected in manifest.items():
        actual = sha256_of(root / relpath)
        if actual != expected:
            raise ChecksumError(f"{root / relpath}: SHA-256 {actual} does not match the manifest ({expected})")
