"""Where a validation run's evaluations happen: in this process (``serial``) or as Ray tasks (``ray``).

A zoo that grows past one machine is evaluated as Ray tasks, one task per model (all its normalization
cases, so a model is loaded once), each holding one GPU when the cluster has GPUs and CPUs otherwise. The
tasks only *evaluate*; the judgement of every case, the table and the reports happen in the calling process
from the returned evaluations, exactly as in a serial run, so the decisions and reports are byte-identical
to a serial run's (tests/runner/test_executors.py checks it).

``ray`` is an optional extra (``pip install 'modelval[ray]'``); without an address a local Ray instance is
started for the run and stopped after it. On one node, pytest-xdist (``-n N``) does the same job.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from modelval.errors import ModelvalError

if TYPE_CHECKING:
    from modelval.api.pipeline import ModelRun
    from modelval.runner.matrix import ValidationRunner

EXECUTORS: tuple[str, ...] = ("serial", "ray")


def check_executor(name: str) -> str:
    if name not in EXECUTORS:
        raise ModelvalError(f"unknown executor {name!r}; choose one of: {', '.join(EXECUTORS)}")
    return name


def evaluate_models(
    runner: ValidationRunner,
    work: Sequence[tuple[str, Sequence[str]]],
    *,
    executor: str = "serial",
    address: str | None = None,
) -> None:
    """Evaluate each ``(model, normalizations)`` of ``work`` into ``runner.runs``.

    ``serial`` evaluates in this process; ``ray`` runs one Ray task per model (``address``: an existing
    cluster, e.g. ``ray://head:10001`` or ``auto``; ``None`` starts a local instance for this call). A model
    that cannot be loaded or run is left out here: its cases meet the error again when they are judged and
    fail with it, one line each, as in a serial run.
    """
    check_executor(executor)
    if executor == "ray":
        from modelval.extras import require

        require("ray", extra="ray", purpose="--executor ray")
    if executor == "serial":
        for model, normalizations in work:
            for normalization in normalizations:
                try:
                    runner.model_run(model, normalization)
                except ModelvalError:
                    break  # recorded in runner.failures; its cases report it
        return
    runner.runs.update(_evaluate_on_ray(runner, work, address))


def _evaluate_on_ray(
    runner: ValidationRunner, work: Sequence[tuple[str, Sequence[str]]], address: str | None
) -> dict[tuple[str, str], ModelRun]:
    import ray

    started = not ray.is_initialized()
    if started:
        # A local instance when no address is given; quiet, no dashboard: a validation run, not a service.
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        gpus = float(ray.cluster_resources().get("GPU", 0))
        task = ray.remote(num_gpus=1 if gpus >= 1 else 0, num_cpus=1 if gpus < 1 else 0)(_evaluate_one_model)
        stimuli = ray.put(runner.stimuli)
        settings = {
            # "auto" inside the task: the GPU Ray gave it, else its CPU (the front door resolves it there, once).
            "device": "auto",
            "checkpoint_dir": runner.checkpoint_dir,
            "reference_csv": runner.reference_csv,
            "batch_size": runner.batch_size,
            "output_cache": runner.output_cache,
        }
        users = list(runner.user_models.values())
        futures = [task.remote(stimuli, settings, users, model, list(normalizations)) for model, normalizations in work]
        results: dict[tuple[str, str], ModelRun] = {}
        for runs, failures in ray.get(futures):
            results.update(runs)
            runner.failures.update(failures)
        return results
    finally:
        if started:
            ray.shutdown()


def _evaluate_one_model(
    stimuli: Any, settings: dict[str, Any], users: list[Any], model: str, normalizations: list[str]
) -> tuple[dict[tuple[str, str], ModelRun], dict[tuple[str, str], str]]:
    """A Ray task: evaluate one model under its normalizations in a runner of its own (a worker process).

    Returns the runs without their modules (the weights stay in the task; the judgement reads the outputs,
    the entry and the provenance) and the one-line reasons of what could not be loaded or run.
    """
    import torch

    from modelval.runner.matrix import ValidationRunner, detached_runs

    # The task holds one CPU (or one GPU): torch in this worker uses that many threads, not the node's all.
    cpus = os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(max(1, int(cpus)) if cpus and cpus.isdigit() else 1)
    runner = ValidationRunner(stimuli=stimuli, **settings)
    runner.add_user_models(users)
    evaluate_models(runner, [(model, normalizations)])
    return detached_runs(runner.runs), runner.failures
