"""The project's own pytest set-up: modelval's plugin, plus fixtures only this suite needs.

The options, markers, fixtures and the validation summary live in the plugin
(:mod:`modelval.validation.pytest_plugin`, a ``pytest11`` entry point), which users get with
``pip install modelval``; its docstring lists the options. Listing it here also loads it when
plugin autoloading is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``).
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["modelval.validation.pytest_plugin", "pytester"]


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
