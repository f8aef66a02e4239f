"""The project's own pytest set-up: modelval's plugin, plus what only this suite needs.

The ``--modelval-*`` options, ``modelval_*`` fixtures and markers and the validation summary live in the
plugin (:mod:`modelval.pytest_plugin.plugin`, a ``pytest11`` entry point), which users get with
``pip install modelval``. Listing it here also loads it when plugin autoloading is off
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``). This checkout's data convention (``../shared``) is in the ini
settings of pyproject.toml, not in the plugin.
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


#: This checkout keeps its test data beside it (CI fills ../shared); the plugin itself knows no such convention.
SHARED = Path(__file__).resolve().parent.parent / "shared"


def pytest_configure(config: pytest.Config) -> None:
    for dest, env, folder in (
        ("modelval_data_root", "MODELVAL_DATA_ROOT", "cue-conflict"),
        ("modelval_reference_dir", "MODELVAL_REFERENCE_DIR", "reference/raw-data"),
    ):
        if config.getoption(dest) is None and not os.environ.get(env) and (SHARED / folder).is_dir():
            setattr(config.option, dest, str(SHARED / folder))


@pytest.fixture(scope="session", autouse=True)
def _no_user_caches(tmp_path_factory):
    """Tests never read or write the user's caches or run store.

    The decode cache and the output cache are off (a test that checks the forward path must run it, not
    read a stored result); cache tests pass their own folders. Runs are recorded into a store of the session.
    """
    from modelval.datasets.cache import NO_CACHE_ENV
    from modelval.records.output_cache import NO_OUTPUT_CACHE_ENV
    from modelval.records.run_store import RUNS_DB_ENV

    runs = tmp_path_factory.getbasetemp() / "runs.sqlite"  # one store per session (shared by xdist workers)
    settings = {NO_CACHE_ENV: "1", NO_OUTPUT_CACHE_ENV: "1", RUNS_DB_ENV: str(runs)}
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
