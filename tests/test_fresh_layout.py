"""A clean clone in the project's layout runs its tests with no variable set: the data home ``../shared`` beside
the checkout is found by ``conftest.py``; without it, a per-user cache that holds the data is read; and the
tests never write to the user's caches.

Was: 3 failures of `make test-fast` unless MODELVAL_DATA_ROOT and MODELVAL_REFERENCE_DIR were set as only CI
set them; those tests tried to fetch the stimuli into ``~/.cache/modelval``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
#: Tests that failed in a fresh clone without CI's variables: they need the stimuli, the human data, or both.
NEEDING_DATA = (
    "tests/cli/test_bad_inputs.py::test_the_library_refuses_what_the_command_line_refuses",
    "tests/cli/test_benchmark_metadata.py::test_without_metadata_the_reproduction_outputs_are_unchanged",
    "tests/models/test_checkpoints.py::test_pickled_objects_in_timms_cached_weights_never_suggest_running_them",
)

pytestmark = [
    pytest.mark.slow,  # a pytest in a subprocess, with torch
    pytest.mark.skipif(
        not (SHARED / "cue-conflict").is_dir() or not (SHARED / "reference" / "raw-data").is_dir(),
        reason="the project's data home ../shared is not beside the checkout",
    ),
]


def clean_environment(cache: Path) -> dict[str, str]:
    """No modelval variable (strict mode on, so missing data fails instead of skipping), an empty user cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODELVAL_", "PYTEST_", "XDG_"))}
    env.update(MODELVAL_STRICT_DATA="1", XDG_CACHE_HOME=str(cache), MPLBACKEND="Agg")
    return env


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_symlink() or p.is_file())


def run_pytest(checkout: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *NEEDING_DATA]
    return subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, timeout=900)


def test_the_checkout_finds_its_data_home_beside_it_without_variables(tmp_path):
    cache = tmp_path / "user-cache"
    cache.mkdir()
    result = run_pytest(ROOT, clean_environment(cache))
    assert result.returncode == 0, result.stdout[-3000:]
    assert f"{len(NEEDING_DATA)} passed" in result.stdout
    assert not (cache / "modelval").exists()  # nothing fetched into, or written to, the user's cache


def test_a_checkout_without_shared_reads_the_per_user_cache_and_leaves_it_as_it_was(tmp_path):
    """The other fresh case: `make stimuli` (or `modelval data download`) put the data in the per-user cache."""
    checkout = tmp_path / "clone"
    checkout.mkdir()
    for name in ("conftest.py", "pyproject.toml", "src"):
        (checkout / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "tests", checkout / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "user-cache"
    (cache / "modelval").mkdir(parents=True)
    (cache / "modelval" / "cue-conflict").symlink_to(SHARED / "cue-conflict")
    (cache / "modelval" / "raw-data").symlink_to(SHARED / "reference" / "raw-data")
    before = files_under(cache)
    result = run_pytest(checkout, clean_environment(cache))
    assert result.returncode == 0, result.stdout[-3000:]
    assert f"{len(NEEDING_DATA)} passed" in result.stdout
    assert files_under(cache) == before
