"""The project's own pytest set-up: modelval's plugin, plus what only this suite needs.

The ``--modelval-*`` options, ``modelval_*`` fixtures and markers and the validation summary live in the
plugin (:mod:`modelval.pytest_plugin.plugin`, a ``pytest11`` entry point), which users get with
``pip install modelval``. Listing it here also loads it when plugin autoloading is off
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``). This checkout's data convention (``../shared``, the data home beside
the checkout) is here, in ``pytest_configure``, not in the plugin.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["modelval.pytest_plugin.plugin", "pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    # This suite's own option (not the plugin's): which built-in registry families the validation matrix
    # (tests/runner/test_shape_bias_validation.py) runs. The nightly GPU job picks one with it.
    parser.addoption(
        "--family",
        default="all",
        choices=("resnet", "deit", "efficientnet", "all", "none"),
        help="built-in model families in modelval's own validation matrix",
    )


#: This checkout keeps its test data beside it (CI fills ../shared): a data home, with cue-conflict/, edges/,
#: filled-silhouettes/ and reference/raw-data/ under it. The plugin itself knows no such convention.
SHARED = Path(__file__).resolve().parent.parent / "shared"
#: Set by the first process of a session (xdist's workers inherit it): the temporary per-user cache of the session.
TEST_CACHE_ENV = "MODELVAL_TEST_SESSION_CACHE"


def pytest_configure(config: pytest.Config) -> None:
    """Find the data, then move every modelval cache to a temporary folder for the session.

    The data: the data home is ``$MODELVAL_DATA_HOME`` (CI sets it), else ``../shared`` beside the checkout, else
    a data home of the session whose folders link to what the per-user cache holds (``make stimuli`` fetches the
    stimuli there; ``modelval data download --humans`` the human data). Then
    MODELVAL_CACHE_DIR points at a temporary folder: no test writes to (or fetches into) the user's caches,
    weights included (``MODELVAL_CHECKPOINT_DIR`` set by the caller, as the nightly job sets it, is kept).
    """
    import shutil
    import tempfile

    from modelval.datasets.stimuli import DATA_HOME_ENV, MODEL_VS_HUMAN_SUBDIR, REFERENCE_SUBDIR
    from modelval.paths import user_cache_dir

    if os.environ.get(TEST_CACHE_ENV):  # an xdist worker: its controller did all this
        one_thread_per_worker()
        return
    session_cache = tempfile.mkdtemp(prefix="modelval-test-cache-")
    if os.environ.get(DATA_HOME_ENV):
        pass  # the caller's data home
    elif (SHARED / "cue-conflict").is_dir():
        os.environ[DATA_HOME_ENV] = str(SHARED)
    else:  # the per-user cache's folders, in a data home's layout (the session's, removed with it)
        cache, home = user_cache_dir(), Path(session_cache) / "data-home"
        links = {name: cache / name for name in ("cue-conflict", "edges", "filled-silhouettes")}
        links.update({REFERENCE_SUBDIR: cache / "raw-data", MODEL_VS_HUMAN_SUBDIR: cache / "model-vs-human-raw-data"})
        for name, folder in links.items():
            if folder.is_dir():
                (home / name).parent.mkdir(parents=True, exist_ok=True)
                (home / name).symlink_to(folder)
        os.environ[DATA_HOME_ENV] = str(home)
    config.add_cleanup(lambda: shutil.rmtree(session_cache, ignore_errors=True))
    os.environ[TEST_CACHE_ENV] = session_cache
    os.environ["MODELVAL_CACHE_DIR"] = session_cache


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with slow tests first, so that xdist's workers start on the long ones and the short ones fill
    the end.

    ``make test`` runs the whole suite in one session over the cores with ``--dist loadfile
    --no-loadscope-reorder``: xdist hands out whole test files in the order their first test has here, so a
    module's fixtures (an evaluation, a built wheel) are computed once, on one worker. Serially, the order
    changes nothing but the order.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: each file stays whole and in its order


@pytest.fixture(scope="session", autouse=True)
def _no_user_caches(tmp_path_factory):
    """Tests never read or write the user's caches or run store (MODELVAL_CACHE_DIR is the session's, see
    pytest_configure).

    Every cache is off (MODELVAL_NO_CACHE=1: a test that checks the forward path must run it, not read a stored
    result); cache tests pass their own folders. Runs are recorded into a store of the session.
    """
    from modelval.records.run_store import RUNS_DB_ENV

    runs = tmp_path_factory.getbasetemp() / "runs.sqlite"  # one store per session (shared by xdist workers)
    settings = {"MODELVAL_NO_CACHE": "1", RUNS_DB_ENV: str(runs)}
    previous = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    yield
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


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


def one_thread_per_worker() -> None:
    """An xdist worker's torch (and the commands its tests start) runs one thread, unless OMP_NUM_THREADS says
    otherwise: the workers already fill the cores, and each worker's own thread pool on top of them made the
    threads wait for each other. The fast tier on 2 cores with 2 workers (issue 28): 205 s wall and 378 s of CPU
    with torch's default threads, 168 s and 291 s with one. A test that sets its thread count still sets it.
    """
    if "OMP_NUM_THREADS" in os.environ:
        return
    import torch

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
