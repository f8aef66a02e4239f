"""Where modelval looks for the project's committed files and its caches."""

from __future__ import annotations

import os
from pathlib import Path

#: The package lives in ``<project>/src/modelval``; committed data (``fixtures/``) and the default
#: weight cache (``checkpoints/``) live at the project root. ``MODELVAL_HOME`` overrides it.
_PACKAGE_DIR = Path(__file__).resolve().parent


def project_root() -> Path:
    """The modelval checkout (the folder holding ``pyproject.toml`` and ``fixtures/``)."""
    override = os.environ.get("MODELVAL_HOME")
    if override:
        return Path(override).expanduser().resolve()
    candidate = _PACKAGE_DIR.parent.parent
    if (candidate / "fixtures").is_dir():
        return candidate
    return Path.cwd()


def fixtures_dir() -> Path:
    return project_root() / "fixtures"


def user_cache_dir() -> Path:
    """Per-user cache (``$XDG_CACHE_HOME/modelval``, default ``~/.cache/modelval``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "modelval"
