"""``validate --executor ray`` gives the serial run's reports, decision files byte for byte.

Ray runs on a local instance that the executor starts (2 CPUs here); each model is one task.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from modelval.cli import main

MODELS = """
[models.lite0]
spec = "efficientnet_lite0"

[models.lite1]
spec = "efficientnet_lite1"
normalizations = ["model"]
"""


def _reports(folder):
    rows = json.loads((folder / "shape_bias.json").read_text())
    for row in rows:
        row.pop("provenance")  # when and where it ran differs; what it measured does not
    decisions = {path.name: path.read_bytes() for path in sorted((folder / "decisions").glob("*.csv"))}
    return rows, decisions


@pytest.mark.slow
def test_ray_and_serial_reports_are_identical(tmp_path, stimulus_subset, capsys):
    pytest.importorskip("ray", reason="pip install 'modelval[ray]'")
    (tmp_path / "modelval.toml").write_text(MODELS)
    common = [
        "validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(stimulus_subset(2)),
        "--allow-modified-stimuli", "--device", "cpu", "--json",
    ]  # fmt: skip
    timings = {}
    for executor in ("serial", "ray"):
        start = time.perf_counter()
        assert main([*common, "--executor", executor, "--report-dir", str(tmp_path / executor)]) == 0
        timings[executor] = time.perf_counter() - start
    serial, ray = _reports(tmp_path / "serial"), _reports(tmp_path / "ray")
    assert serial[0] == ray[0] and len(serial[0]) == 3
    assert serial[1] == ray[1] and len(serial[1]) == 3  # the decision CSVs, byte for byte
    print(f"validate on 32 stimuli, 3 cases: serial {timings['serial']:.1f} s, ray {timings['ray']:.1f} s",
          file=sys.stderr)  # fmt: skip


def test_an_unknown_executor_and_a_missing_ray_say_what_to_do(monkeypatch):
    from modelval.errors import ModelvalError
    from modelval.extras import MissingExtraError
    from modelval.runner.executors import check_executor, evaluate_models

    with pytest.raises(ModelvalError, match="unknown executor 'dask'"):
        check_executor("dask")
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'modelval\[ray\]'"):
        evaluate_models(None, [("m", ["model"])], executor="ray")  # type: ignore[arg-type]


# --- bounded waits and one-line errors for Ray (issue 31: 9 and 10) -------------------------------------------


def test_a_bogus_ray_address_is_one_line_before_anything_loads(capsys, tmp_path):
    """Before: ``unexpected error: ValueError: Invalid address format: bogus``, exit 3, after the stimuli loaded."""
    (tmp_path / "modelval.toml").write_text(MODELS)
    argv = ["validate", "--models-file", str(tmp_path / "modelval.toml"), "--executor", "ray", "--ray-address", "bogus"]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "'bogus' is not a Ray address; use auto" in err
    from modelval.errors import InputValidationError
    from modelval.runner.executors import evaluate_models

    with pytest.raises(InputValidationError, match="'bogus' is not a Ray address"):
        evaluate_models(None, [], executor="ray", address="bogus")  # type: ignore[arg-type]  # the library too


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_closed_port_fails_within_the_bound(capsys, tmp_path, stimulus_subset, scheme):
    """Before: ``--ray-address`` to a closed port was still connecting after 180 s (GCS) or 30 s (Ray Client)."""
    (tmp_path / "modelval.toml").write_text(MODELS)
    address = f"{scheme}127.0.0.1:{_closed_port()}"
    start = time.perf_counter()
    code = main([
        "validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(stimulus_subset(1)),
        "--allow-modified-stimuli", "--executor", "ray", "--ray-address", address,
    ])  # fmt: skip
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"cannot reach the Ray cluster at {address}" in err
    assert "Connection refused" in err and elapsed < 10


def test_a_port_that_is_not_rays_fails_within_the_bound():
    """An HTTP server where the GCS should be: refused from its answer (ray.init waited past two minutes)."""
    import http.server
    import threading

    from modelval.errors import DataError
    from modelval.runner.executors import reach_ray_cluster

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        start = time.perf_counter()
        with pytest.raises(DataError, match="answers, but not as Ray does"):
            reach_ray_cluster(f"127.0.0.1:{server.server_address[1]}", timeout=5)
        assert time.perf_counter() - start < 6
    finally:
        server.shutdown()
        server.server_close()


CRASHING = """
import os


def crashes():
    os._exit(1)  # the worker process dies, as on a segfault or the OOM killer
"""


@pytest.mark.slow
def test_a_dying_ray_worker_fails_its_own_cases_and_the_others_keep_their_results(tmp_path, stimulus_subset, capsys):
    """Before: ``ray.get`` of all tasks raised on the first dead worker, and every model's result was lost."""
    pytest.importorskip("ray", reason="pip install 'modelval[ray]'")
    (tmp_path / "nets.py").write_text(CRASHING)
    (tmp_path / "modelval.toml").write_text(
        '[models.crashes]\nspec = "nets.py:crashes"\nnormalizations = ["model"]\n'
        '[models.lite0]\nspec = "efficientnet_lite0"\nnormalizations = ["model"]\n'
    )
    code = main([
        "validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(stimulus_subset(2)),
        "--allow-modified-stimuli", "--device", "cpu", "--executor", "ray", "--json",
        "--report-dir", str(tmp_path / "reports"),
    ])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1, captured.err
    rows = {row["model"]: row for row in json.loads((tmp_path / "reports" / "shape_bias.json").read_text())}
    assert rows["lite0"]["shape_hits"] + rows["lite0"]["texture_hits"] > 0  # kept its result
    assert "the Ray task evaluating crashes failed" in captured.out + captured.err
