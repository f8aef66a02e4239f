"""`make evaluate` and `make test` need only Python >= 3.10 and make: the Makefile's own behaviour.

Runs the real Makefile with stand-in executables in a temporary folder, so nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def make(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_old_python_is_refused_with_its_version(tmp_path):
    old = script(tmp_path / "python3.8", 'case "$1" in -c) exit 1;; --version) echo "Python 3.8.10";; esac\n')
    result = make("check-python", f"PYTHON={old}")
    assert result.returncode != 0
    assert "Python >= 3.10" in result.stderr and "Python 3.8.10" in result.stderr


def test_missing_python_is_named(tmp_path):
    result = make("check-python", f"PYTHON={tmp_path / 'no-python'}")
    assert result.returncode != 0 and "not found" in result.stderr


def test_this_python_passes():
    assert make("check-python", "PYTHON=python3").returncode == 0


@pytest.mark.parametrize(("data_home", "fetches"), [(None, True), ("somewhere", False)])
def test_make_test_fetches_the_stimuli_only_when_none_are_configured(tmp_path, data_home, fetches):
    """A fresh checkout without ../shared and without a data home runs `modelval data download`."""
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", project / "Makefile")
    (project / "pyproject.toml").write_text("")
    (project / ".venv" / ".installed").write_text("")
    calls = tmp_path / "calls"
    script(project / ".venv" / "bin" / "modelval", f'echo "$@" >> {calls}\n')
    env = {k: v for k, v in os.environ.items() if k != "MODELVAL_DATA_HOME"}
    if data_home:
        (tmp_path / data_home / "cue-conflict").mkdir(parents=True)
        env["MODELVAL_DATA_HOME"] = str(tmp_path / data_home)
    result = make("-o", ".venv/.installed", "-o", "pyproject.toml", "stimuli", cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    assert calls.exists() is fetches
    if fetches:
        assert calls.read_text().split() == ["data", "download"]


def test_offline_fetch_failure_does_not_stop_make_test(tmp_path):
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", project / "Makefile")
    (project / ".venv" / ".installed").write_text("")
    script(project / ".venv" / "bin" / "modelval", 'echo "modelval: error: download failed" >&2; exit 2\n')
    env = {k: v for k, v in os.environ.items() if k != "MODELVAL_DATA_HOME"}
    result = make("-o", ".venv/.installed", "stimuli", cwd=project, env=env)
    assert result.returncode == 0
    assert "download failed" in result.stderr and "will skip" in result.stderr


def test_make_test_runs_lint_before_pytest():
    result = make("-n", "test", "-o", ".venv/.installed-test", "-o", ".venv/.installed")
    commands = result.stdout
    assert commands.index("ruff check") < commands.index("mypy") < commands.index("-m pytest")


def test_make_test_runs_every_test_in_one_session_over_the_cores():
    """Every test (no ``-m``) in one pytest over the cores, each test file whole on one worker (its module
    fixtures computed once), in the order of the root conftest (files with slow tests first)."""
    result = make("-n", "test", "-o", ".venv/.installed-test", "-o", ".venv/.installed")
    runs = [line for line in result.stdout.splitlines() if "-m pytest" in line]
    assert len(runs) == 1, runs
    assert "-n auto --dist loadfile --no-loadscope-reorder" in runs[0] and '-m "' not in runs[0]


def test_files_with_slow_tests_come_first_and_stay_whole(request):
    """The order xdist hands the files out in (this session's own collection, as every worker has it): no file
    is split, and no file without slow tests comes before one with them."""
    items = request.session.items
    files = [item.path for item in items]
    runs = [path for index, path in enumerate(files) if index == 0 or files[index - 1] != path]
    assert len(runs) == len(set(runs)), "a test file is split"
    has_slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    flags = [path in has_slow for path in runs]
    assert flags == sorted(flags, reverse=True)


@pytest.mark.parametrize("beside", [True, False])
def test_make_evaluate_uses_the_data_home_beside_the_checkout(tmp_path, beside):
    """Was: `make evaluate` ignored ../shared (which `make test` uses) and fetched into the user cache."""
    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", project / "Makefile")
    (project / ".venv" / ".installed").write_text("")
    if beside:
        (tmp_path / "shared" / "cue-conflict").mkdir(parents=True)
    calls = tmp_path / "calls"
    script(project / ".venv" / "bin" / "modelval", f'echo "home=$MODELVAL_DATA_HOME $@" >> {calls}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELVAL_")}
    result = make("-o", ".venv/.installed", "evaluate", cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    home = str(tmp_path / "shared") if beside else ""
    assert calls.read_text().split("\n")[0] == f"home={home} shape-bias --model efficientnet_lite0"
    calls.unlink()
    result = make("-o", ".venv/.installed", "evaluate", cwd=project, env={**env, "MODELVAL_DATA_HOME": "/mine"})
    assert calls.read_text().startswith("home=/mine ")  # the user's own data home wins
    (project / "pyproject.toml").write_text("")
    result = make("-o", ".venv/.installed", "-o", "pyproject.toml", "stimuli", cwd=project, env=env)
    assert ("data download" in calls.read_text()) is not beside  # ../shared holds the stimuli: nothing fetched
