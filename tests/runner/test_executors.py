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
