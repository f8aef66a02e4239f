"""The test tiers: a missing reference package skips only the parity tests that use it, never a unit test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("relplot", "sklearn", "netcal", "calibration", "torchmetrics")


def _pytest(tmp_path: Path, *args: str) -> tuple[int, dict[str, int], str]:
    """pytest in a fresh interpreter where the reference packages cannot be imported."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in BLOCKED)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = result.stdout + result.stderr
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|skipped|failed|errors?)", output)}
    return result.returncode, counts, output


@pytest.mark.slow
def test_without_the_reference_packages_unit_tests_run_and_only_parity_tests_skip(tmp_path):
    files = ["tests/metrics/test_estimators.py", "tests/metrics/test_calibrators.py"]
    code, counts, output = _pytest(tmp_path, *files)
    assert code == 0, output[-3000:]
    assert counts.get("passed", 0) > 50 and counts.get("skipped", 0) > 0, counts
    assert "reference package" in output and "pip install 'modelval[test]'" in output
    # the skipped ones are exactly the parity tests: without them nothing skips
    code, counts, output = _pytest(tmp_path, *files, "-m", "not parity")
    assert code == 0 and counts.get("skipped", 0) == 0 and counts.get("passed", 0) > 50, output[-3000:]


REFERENCE_PACKAGES = (*BLOCKED, "scipy")


def test_no_test_module_imports_a_reference_package_at_import_time():
    """The static half of the promise: a module-level import would fail or skip its whole module
    (unit tests included) when the package is missing; tests/reference_packages.py defers it."""
    import ast

    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:  # module level only; imports inside tests are lazy
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import)
                else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )  # fmt: skip
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] in REFERENCE_PACKAGES
            ]
    assert not offenders, "use tests/reference_packages.py instead:\n" + "\n".join(offenders)
