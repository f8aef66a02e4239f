"""`import modelval` and the command line's start-up load no torch, torchvision or matplotlib.

Each check runs in a fresh interpreter, because this test process has long imported torch.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "torchvision", "matplotlib")


def loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    last_line = (result.stdout.strip().splitlines() or [""])[-1]
    return [name for name in last_line.split(",") if name]


@pytest.mark.parametrize(
    "code",
    [
        "import modelval",
        "import modelval.metrics",
        "import modelval.api",
        "import modelval; dir(modelval); modelval.EvaluationOptions()",
        "from modelval.cli import build_parser; build_parser()",
    ],
)
def test_import_loads_no_torch(code):
    assert loaded_after(code) == []


def test_help_and_the_model_list_start_without_torch():
    code = (
        "import contextlib, io\n"
        "from modelval.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['--help']) == 0\n"
        "    assert main(['models', 'list']) == 0\n"
    )
    assert loaded_after(code) == []


def test_dir_lists_the_front_door():
    import modelval

    names = dir(modelval)
    for name in ("shape_bias", "accuracy", "compare_with_humans", "sensitivity", "calibration_card", "ModelOptions"):
        assert name in names
        assert getattr(modelval, name) is getattr(modelval.api, name)


def test_a_library_figure_keeps_the_callers_matplotlib_backend(tmp_path, resnet50_reference_csv):
    """Drawing a figure must not switch the backend a notebook or program chose (no matplotlib.use inside)."""
    code = (
        "import matplotlib\n"
        "matplotlib.use('svg')\n"
        "import matplotlib.pyplot as plt\n"
        "from modelval.figures import plot_per_category, plot_reliability, save\n"
        "from modelval.behaviour.decisions import read_decisions\n"
        "from modelval.behaviour.shape_bias import compute_shape_bias\n"
        "from modelval.metrics.calibration import reliability_bins\n"
        "import numpy as np\n"
        "bins = reliability_bins(np.array([0.6, 0.9]), np.array([1, 0]), n_bins=2)\n"
        f"result = compute_shape_bias(read_decisions({str(resnet50_reference_csv)!r}), n_bootstrap=0)\n"
        "fig, (left, right) = plt.subplots(1, 2)\n"
        "assert plot_reliability(bins, ax=left) is fig and plot_per_category({'ResNet-50': result}, ax=right) is fig\n"
        "print(matplotlib.get_backend())\n"
        f"save(fig, {str(tmp_path / 'r.png')!r})\n"
        "print(matplotlib.get_backend())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-2:] == ["svg", "svg"]  # after drawing, and after saving
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_every_lazy_export_resolves():
    """Each package's re-exported names load from the module named for them (a module split or a rename that
    leaves an entry behind fails here, not in a user's import)."""
    import importlib
    import pkgutil

    import modelval

    packages = ["modelval", *(f"modelval.{m.name}" for m in pkgutil.iter_modules(modelval.__path__) if m.ispkg)]
    for name in packages:
        package = importlib.import_module(name)
        for exported in getattr(package, "__all__", ()):
            assert getattr(package, exported) is not None, f"{name}.{exported}"
