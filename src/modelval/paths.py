"""Where modelval finds its own data files and where it keeps its caches.

Nothing here depends on the current folder or on a source checkout, so an installed modelval works
from any folder:

- **Package data** (stimulus manifests, expected values, regression baselines) ships inside the
  package, under ``modelval/data/``, and is read with :mod:`importlib.resources`.
- **Caches** (stimuli, published raw data, model weights, the decode cache) live under the per-user
  cache folder, ``platformdirs.user_cache_dir("modelval")`` (``~/.cache/modelval`` on Linux,
  honouring ``XDG_CACHE_HOME``). ``MODELVAL_CACHE_DIR`` moves all of it; each cache also has its own
  variable (``MODELVAL_CHECKPOINT_DIR``, ``MODELVAL_OUTPUT_CACHE``, ...).
- **Data** (stimuli, published human raw data) live in the data home, ``MODELVAL_DATA_HOME`` (one folder with
  ``cue-conflict/``, ``edges/``, ..., ``reference/raw-data/``; :func:`modelval.datasets.stimuli.data_home`,
  ``docs/data.md``), else in the per-user cache, where ``modelval download-data`` puts them.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

#: Moves every modelval cache (stimuli, raw data, weights, decode cache) to one folder.
CACHE_DIR_ENV = "MODELVAL_CACHE_DIR"


def package_data(name: str) -> Path:
    """A file shipped in the package's ``data/`` folder (``name`` relative to it, e.g. ``baselines/x.csv``).

    The package is installed as plain files (a wheel or an editable install), so the resource is a
    real path that ``open``, ``json`` and ``csv`` can read directly.
    """
    path = Path(str(resources.files("modelval").joinpath("data", *name.split("/"))))
    return path


def package_data_dir() -> Path:
    """The package's ``data/`` folder (manifests, expected values, baselines)."""
    return Path(str(resources.files("modelval").joinpath("data")))


def user_cache_dir() -> Path:
    """The per-user cache: ``$MODELVAL_CACHE_DIR``, else ``platformdirs.user_cache_dir("modelval")``."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("modelval", appauthor=False))
