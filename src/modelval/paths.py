"""Where modelval finds its own data files and where it keeps its caches.

Nothing here depends on the current folder or on a source checkout, so an installed modelval works
from any folder:

- **Package data** (stimulus manifests, expected values, regression baselines) ships inside the
  package, under ``modelval/data/``, and is read with :mod:`importlib.resources`.
- **Caches** (the decode, output and answer caches, downloaded weights and data) live under the one cache
  folder: ``$MODELVAL_CACHE_DIR`` (the ``cache_dir`` setting), else the per-user cache folder,
  ``platformdirs.user_cache_dir("modelval")`` (``~/.cache/modelval`` on Linux, honouring ``XDG_CACHE_HOME``).
  Each cache is a subfolder (:mod:`modelval.records.store`); weights may be moved on their own
  (``MODELVAL_CHECKPOINT_DIR``).
- **Data** (stimuli, published human raw data) live in the data home, ``MODELVAL_DATA_HOME`` (one folder with
  ``cue-conflict/``, ``edges/``, ..., ``reference/raw-data/``; :func:`modelval.datasets.stimuli.data_home`,
  ``docs/data.md``), else in the per-user cache, where ``modelval data download`` puts them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from modelval import settings


def package_data(name: str) -> Path:
    """A file shipped in the package's ``data/`` folder.

    The package is installed as plain files (a wheel or an editable install), so the resource is a
    real path that ``open``, ``json`` and ``csv`` can read directly.

    Parameters
    ----------
    name
        The file's path relative to ``data/``, e.g. ``baselines/x.csv``.
    """
    return Path(str(resources.files("modelval").joinpath("data", *name.split("/"))))


def package_data_dir() -> Path:
    """The package's ``data/`` folder (manifests, expected values, baselines)."""
    return Path(str(resources.files("modelval").joinpath("data")))


def user_cache_dir() -> Path:
    """The one cache folder: ``$MODELVAL_CACHE_DIR`` (the ``cache_dir`` setting), else
    ``platformdirs.user_cache_dir("modelval")``."""
    override = settings.value("cache_dir")
    if override is not None:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("modelval", appauthor=False))
