"""``validate --executor ray`` gives the serial run's reports, decision files byte for byte.

Ray runs on a local instance that the executor starts (2 CPUs here); each model is one task.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

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
    from modelval.runner.executors import _check_executor, evaluate_models

    with pytest.raises(ModelvalError, match="unknown executor 'dask'"):
        _check_executor("dask")
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'modelval\[ray\]'"):
        evaluate_models(None, [("m", ["model"])], executor="ray")  # type: ignore[arg-type]


# --- bounded waits and one-line errors for Ray (issue 31: 9 and 10) -------------------------------------------


def test_a_bogus_ray_address_is_one_line_before_anything_loads(capsys, tmp_path, monkeypatch):
    """Before: ``unexpected error: ValueError: Invalid address format: bogus``, exit 3, after the stimuli loaded.
    The address is Ray's own variable (or the config file's ray_address)."""
    (tmp_path / "modelval.toml").write_text(MODELS)
    monkeypatch.setenv("RAY_ADDRESS", "bogus")
    argv = ["validate", "--models-file", str(tmp_path / "modelval.toml"), "--executor", "ray"]
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
def test_a_closed_port_fails_within_the_bound(capsys, tmp_path, stimulus_subset, scheme, monkeypatch):
    """Before: a Ray address on a closed port was still connecting after 180 s (GCS) or 30 s (Ray Client)."""
    (tmp_path / "modelval.toml").write_text(MODELS)
    address = f"{scheme}127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    start = time.perf_counter()
    code = main([
        "validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(stimulus_subset(1)),
        "--allow-modified-stimuli", "--executor", "ray",
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


# --- submitit: SLURM job arrays, requeue on preemption (issue 28, point 7) -------------------------------------


@pytest.mark.slow
def test_submitit_and_serial_reports_are_identical(tmp_path, stimulus_subset, capsys):
    """submitit's local executor (processes on this machine, as on a node without SLURM): one job per model."""
    pytest.importorskip("submitit", reason="pip install 'modelval[slurm]'")
    (tmp_path / "modelval.toml").write_text(MODELS)
    common = [
        "validate", "--models-file", str(tmp_path / "modelval.toml"), "--data-root", str(stimulus_subset(2)),
        "--allow-modified-stimuli", "--device", "cpu", "--json",
    ]  # fmt: skip
    assert main([*common, "--report-dir", str(tmp_path / "serial")]) == 0
    jobs = tmp_path / "jobs"
    argv = ["--executor", "submitit", "--slurm", f"cluster=local,folder={jobs},timeout_min=20",
            "--report-dir", str(tmp_path / "submitit")]  # fmt: skip
    assert main([*common, *argv]) == 0
    capsys.readouterr()
    serial, submitted = _reports(tmp_path / "serial"), _reports(tmp_path / "submitit")
    assert serial[0] == submitted[0] and len(serial[0]) == 3
    assert serial[1] == submitted[1] and len(serial[1]) == 3  # the decision CSVs, byte for byte
    # one job per model, each with its log folder named by its job id
    logs = [folder for folder in jobs.iterdir() if folder.is_dir() and folder.name.isdigit()]
    assert len(logs) == 2 and all(any(folder.glob("*_log.err")) for folder in logs)


SLOW_NETS = """
import time

from efficientnet_lite_pytorch import EfficientNet


class Slow(EfficientNet):
    def forward(self, x):
        time.sleep(0.3)  # long enough for the test to preempt the job between two batches
        return super().forward(x)


def slow():
    return Slow.from_name("efficientnet-lite0")
"""

SLOW_MODEL = """
[models.slow]
spec = "nets.py:slow"
checkpoint = "weights/lite0.pt"
mean = [0.5, 0.5, 0.5]
std = [0.5, 0.5, 0.5]
normalizations = ["model"]
"""


@pytest.mark.slow
def test_a_preempted_job_is_requeued_and_resumes_from_the_output_cache(
    tmp_path, stimulus_subset, bundled_model, monkeypatch
):
    """SLURM preempts with a signal (USR2 here, as submitit's local executor sends it): the job checkpoints, is
    requeued, and the requeued job reuses the batches the output cache kept; its decisions equal a serial run's."""
    submitit = pytest.importorskip("submitit", reason="pip install 'modelval[slurm]'")
    import torch

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.runner.executors import ModelJob
    from modelval.runner.matrix import ValidationRunner
    from modelval.runner.models_file import read_models_file

    cache = tmp_path / "outputs"
    monkeypatch.setenv("MODELVAL_NO_CACHE", "0")  # the job process inherits this environment
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path))  # the output cache: <cache dir>/outputs
    (tmp_path / "weights").mkdir()
    torch.save(bundled_model.model.state_dict(), tmp_path / "weights" / "lite0.pt")
    (tmp_path / "nets.py").write_text(SLOW_NETS)
    (tmp_path / "modelval.toml").write_text(SLOW_MODEL)
    users = read_models_file(tmp_path / "modelval.toml")
    stimuli = StimulusSet.load(stimulus_subset(2), allow_modified=True, progress=False)
    source = {"root": str(stimuli.root), "dataset": stimuli.dataset, "digests": stimuli.digests}
    settings = {"device": "cpu", "checkpoint_dir": None, "reference_csv": None, "batch_size": 4, "cache": True}

    executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="local")
    executor.update_parameters(timeout_min=10)
    job = executor.submit(ModelJob(), source, settings, users, "slow", ["model"])
    deadline = time.monotonic() + 240
    while len(list(cache.rglob("partial/0*.npy"))) < 2:  # two batches of 4 kept, six to go
        assert time.monotonic() < deadline and job.state not in ("FAILED", "DONE"), job.stderr()
        time.sleep(0.1)
    # SLURM signals the job's own processes (USR2, `--signal=USR2@...`) before it preempts; here the task is
    # the child of submitit's local controller.
    (task,) = _children(job._process.pid)
    os.kill(task, signal.SIGUSR2)
    runs, failures = job.result()
    assert not failures
    run = runs[("slow", "model")]
    status = run.evaluation.output_cache
    assert status.startswith("resumed: ") and status.endswith(" of 32 rows reused"), status
    assert "Requeued" in (job.stderr() or "") + (job.stdout() or "")

    runner = ValidationRunner(stimuli=stimuli, device="cpu", batch_size=4, cache=False)
    runner.add_user_models(users)
    serial = runner.evaluate("slow", "model")
    assert [d.response for d in run.evaluation.decisions] == [d.response for d in serial.decisions]


def _children(pid: int) -> list[int]:
    return [int(child) for path in Path(f"/proc/{pid}/task").glob("*/children") for child in path.read_text().split()]


def test_submitit_settings_become_slurm_parameters_and_bad_ones_are_one_line(tmp_path, monkeypatch):
    from modelval.errors import InputValidationError
    from modelval.runner.executors import SubmititSettings

    given = f"folder={tmp_path},cluster=slurm,partition=gpu,array_parallelism=4,timeout_min=120"
    settings = SubmititSettings.parse(given)
    assert settings.folder == tmp_path and settings.cluster == "slurm"
    parameters = settings.executor_parameters(jobs=3)
    assert parameters == {
        "timeout_min": 120, "slurm_array_parallelism": 4, "gpus_per_node": 1, "slurm_partition": "gpu",
    }  # fmt: skip
    assert SubmititSettings.parse(None).executor_parameters(jobs=5) == {
        "timeout_min": 60, "slurm_array_parallelism": 5, "gpus_per_node": 1,
    }  # fmt: skip
    for bad in ("partition", "=gpu", "partition=", "Partition=gpu"):
        with pytest.raises(InputValidationError, match=r"--slurm .*: write KEY=VALUE, e\.g\. partition=gpu"):
            SubmititSettings.parse(bad)
    with pytest.raises(InputValidationError, match="unknown submitit cluster 'pbs'; choose one of: auto, slurm"):
        SubmititSettings.parse("cluster=pbs")

    submitit = pytest.importorskip("submitit", reason="pip install 'modelval[slurm]'")
    # What submitit writes for SLURM from them: the batch script of a 3-job array (submitit wants an `srun` on
    # the PATH before it builds a SLURM executor; rendering the script runs nothing).
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_folder / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_folder}:{os.environ['PATH']}")
    from submitit.slurm.slurm import _make_sbatch_string

    executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="slurm")
    executor.update_parameters(**parameters)
    slurm_parameters = dict(executor._executor.parameters)
    script = _make_sbatch_string("python -m job", tmp_path / "jobs", **{**slurm_parameters, "map_count": 3})
    expected = ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1", "#SBATCH --time=120", "#SBATCH --array=0-2%3",
                "#SBATCH --signal=USR2@")  # fmt: skip
    for line in expected:  # the array runs min(3 jobs, parallelism 4) at once; USR2 is the preemption signal
        assert line in script, script


def test_a_missing_submitit_names_the_extra(monkeypatch, tmp_path, capsys):
    from modelval.extras import MissingExtraError
    from modelval.runner.executors import evaluate_models

    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(MissingExtraError, match=r"--executor submitit needs the optional 'slurm' extra"):
        evaluate_models(None, [("m", ["model"])], executor="submitit")  # type: ignore[arg-type]
    (tmp_path / "modelval.toml").write_text(MODELS)
    code = main(["validate", "--models-file", str(tmp_path / "modelval.toml"), "--executor", "submitit"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "pip install 'modelval[slurm]'" in err
