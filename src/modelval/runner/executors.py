"""Where a validation run's evaluations happen: in this process (``serial``), as Ray tasks (``ray``) or as
SLURM jobs through submitit (``submitit``).

A zoo that grows past one machine is evaluated as Ray tasks, one task per model (all its normalization
cases, so a model is loaded once), each holding one GPU when the cluster has GPUs and CPUs otherwise. The
tasks only *evaluate*; the judgement of every case, the table and the reports happen in the calling process
from the returned evaluations, exactly as in a serial run, so the decisions and reports are byte-identical
to a serial run's (tests/runner/test_executors.py checks it).

``ray`` is an optional extra (``pip install 'modelval[ray]'``); without an address a local Ray instance is
started for the run and stopped after it. On one node, pytest-xdist (``-n N``) does the same job.

``submitit`` (``pip install 'modelval[slurm]'``) is how research clusters run zoos: one job per model in one
SLURM job array (``array_parallelism`` of them at a time), each requeued when it is preempted (it resumes
from the output cache, which keeps every finished batch), with submitit's local executor (processes on this
machine) where no SLURM exists, as in the tests. As with Ray, the jobs only evaluate; the judgement happens
here, so the reports equal a serial run's.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval.errors import DataError, InputValidationError, ModelvalError, describe_exception

if TYPE_CHECKING:
    from modelval.api.pipeline import ModelRun
    from modelval.runner.matrix import ValidationRunner

EXECUTORS: tuple[str, ...] = ("serial", "ray", "submitit")
#: Where submitit's jobs run: ``auto`` (SLURM where ``sbatch`` exists, else processes here), ``slurm``, ``local``
#: (processes here) or ``debug`` (in this process, for a debugger).
SUBMITIT_CLUSTERS: tuple[str, ...] = ("auto", "slurm", "local", "debug")
#: submitit's own parameters of every cluster; any other ``--slurm KEY=VALUE`` is a SLURM one (``slurm_KEY``).
_SUBMITIT_SHARED = ("timeout_min", "gpus_per_node", "cpus_per_task", "mem_gb", "nodes", "tasks_per_node", "name",
                    "stderr_to_stdout")  # fmt: skip
#: Parameters that are whole numbers (submitit asserts their type only when the jobs are about to be submitted).
_SUBMITIT_WHOLE = ("timeout_min", "gpus_per_node", "cpus_per_task", "nodes", "tasks_per_node", "array_parallelism")


@dataclass(frozen=True)
class SubmititSettings:
    """How ``--executor submitit`` submits: the job folder, the cluster and the SLURM parameters.

    ``folder`` holds each job's script, pickled call and logs; on a cluster it (and the stimuli, and the output
    cache) must be on a file system the compute nodes share. ``parameters`` are submitit's (``timeout_min``,
    ``gpus_per_node``, ...) or SLURM's without their ``slurm_`` prefix (``partition``, ``array_parallelism``,
    ``qos``, ``account``, ...).
    """

    folder: Path = Path("submitit-jobs")
    cluster: str = "auto"
    parameters: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> SubmititSettings:
        """From ``--slurm`` (``--modelval-slurm``): comma-separated ``KEY=VALUE`` items, ``folder`` and ``cluster``
        modelval's own, the rest submitit's or SLURM's; a bad item is one line.

        Parameters
        ----------
        text
            ``folder=/shared/jobs,cluster=slurm,partition=gpu,array_parallelism=8``; ``None``: the defaults.
        """
        parameters: dict[str, str] = {}
        for item in (part.strip() for part in (text or "").split(",") if part.strip()):
            key, equals, value = item.partition("=")
            key = key.strip().removeprefix("slurm_")
            if not equals or not re.fullmatch(r"[a-z][a-z0-9_]*", key) or not value.strip():
                raise InputValidationError(
                    f"--slurm {item!r}: write KEY=VALUE, e.g. partition=gpu, array_parallelism=8, timeout_min=120"
                )
            if key in _SUBMITIT_WHOLE and not value.strip().isdigit():
                raise InputValidationError(f"--slurm {item!r}: {key} is a whole number, 0 or more (e.g. {key}=2)")
            parameters[key] = value.strip()
        folder, cluster = parameters.pop("folder", None), parameters.pop("cluster", "auto")
        if cluster not in SUBMITIT_CLUSTERS:
            choices = ", ".join(SUBMITIT_CLUSTERS)
            raise InputValidationError(f"unknown submitit cluster {cluster!r}; choose one of: {choices}")
        return cls(Path(folder) if folder else cls.folder, cluster, parameters)

    def executor(self, folder: Path, jobs: int) -> Any:
        """submitit's executor of the jobs' ``folder``, its parameters set; a parameter submitit refuses (unknown to
        the cluster, of the wrong type) or a cluster that is not here is one :class:`InputValidationError` line.

        Parameters
        ----------
        folder
            The jobs' folder (``%j``: the job id).
        jobs
            How many jobs the array holds.
        """
        import submitit

        try:
            executor = submitit.AutoExecutor(folder=folder, cluster=None if self.cluster == "auto" else self.cluster)
            executor.update_parameters(**self.executor_parameters(jobs))
        except (ValueError, TypeError, RuntimeError, AssertionError, NameError) as error:  # submitit's refusals
            raise InputValidationError(f"--executor submitit: {describe_exception(error)}") from None
        return executor

    def check(self) -> None:
        """Refuse the parameters before anything loads, as :meth:`executor` would after the stimuli (in a folder
        removed again: submitit writes nothing until a job is submitted, and nothing is)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="modelval-submitit-") as folder:
            self.executor(Path(folder) / "%j", 1)

    def executor_parameters(self, jobs: int) -> dict[str, Any]:
        """submitit's ``update_parameters`` keywords for ``jobs`` jobs (numbers as numbers).

        Parameters
        ----------
        jobs
            How many jobs the array holds.
        """
        given = {key: int(value) if value.isdigit() else value for key, value in self.parameters.items()}
        chosen: dict[str, Any] = {"timeout_min": 60, "slurm_array_parallelism": max(1, jobs)}
        if self.cluster in ("auto", "slurm"):
            chosen["gpus_per_node"] = 1  # one GPU per model, as the Ray executor gives; gpus_per_node=0 for none
        for key, value in given.items():
            chosen[key if key in _SUBMITIT_SHARED else f"slurm_{key}"] = value
        return chosen


def _check_executor(name: str) -> str:
    if name not in EXECUTORS:
        raise ModelvalError(f"unknown executor {name!r}; choose one of: {', '.join(EXECUTORS)}")
    return name


#: Seconds to wait for a Ray cluster's address to answer before ``ray.init`` (whose own wait on a closed port or
#: on a service that is not Ray's runs past minutes).
RAY_CONNECT_TIMEOUT = 10.0
_RAY_ADDRESS = re.compile(
    r"^(?:(?P<scheme>ray)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*):(?P<port>\d{1,5})$"
)
RAY_ADDRESS_FORMS = (
    "auto (the cluster this machine belongs to), local (a new instance), HOST:PORT (the head's GCS, e.g. "
    "10.0.0.5:6379) or ray://HOST:PORT (Ray Client, e.g. ray://head:10001)"
)
#: An HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS and its client server are
#: gRPC) answers with a SETTINGS frame of its own; anything else at that port is not a Ray cluster.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def ray_address_problem(address: str | None) -> str | None:
    """Why ``address`` is not a Ray address (one line, with the forms that are), or None.

    Parameters
    ----------
    address
        The address given (``None``: none).
    """
    if address is None or address in ("auto", "local"):
        return None
    match = _RAY_ADDRESS.match(address)
    if match is None or not 1 <= int(match.group("port")) <= 65535:
        return f"{address!r} is not a Ray address; use {RAY_ADDRESS_FORMS}"
    return None


def check_ray_address(address: str | None) -> str | None:
    """``address`` when :func:`ray_address_problem` finds nothing; else an InputValidationError (exit status 2).

    Parameters
    ----------
    address
        The address given (``None``: none).
    """
    problem = ray_address_problem(address)
    if problem is not None:
        raise InputValidationError(f"the Ray address ($RAY_ADDRESS, or ray_address in modelval.toml) {problem}")
    return address


def reach_ray_cluster(address: str | None, timeout: float | None = None) -> None:
    """Within ``timeout`` seconds, check that ``HOST:PORT`` (or ``ray://HOST:PORT``) accepts a connection and
    answers as a gRPC server does; else a one-line :class:`DataError`. ``auto``, ``local`` and ``None`` are
    Ray's to resolve. With ``$RAY_USE_TLS`` set only the connection is checked (the answer is encrypted).

    Parameters
    ----------
    address
        The cluster's address.
    timeout
        Seconds to wait (default: :data:`RAY_CONNECT_TIMEOUT`).
    """
    check_ray_address(address)
    if address is None or address in ("auto", "local"):
        return
    timeout = RAY_CONNECT_TIMEOUT if timeout is None else timeout
    match = _RAY_ADDRESS.match(address)
    assert match is not None
    host, port = match.group("host").strip("[]"), int(match.group("port"))
    what = "the Ray Client server" if match.group("scheme") else "the head's GCS"
    how = "start it (`ray start --head`) or check $RAY_ADDRESS (ray_address in modelval.toml)"
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            if os.environ.get("RAY_USE_TLS", "").lower() in ("1", "true"):
                return
            connection.settimeout(timeout)
            connection.sendall(_HTTP2_PREFACE)
            head = connection.recv(9)
    except TimeoutError:
        raise DataError(f"the Ray cluster at {address} did not answer within {timeout:g} s; {how}") from None
    except OSError as error:
        reason = error.strerror or describe_exception(error)
        raise DataError(f"cannot reach the Ray cluster at {address} ({what}): {reason}; {how}") from None
    if len(head) < 9 or head[3] != 0x04:
        raise DataError(f"{address} answers, but not as Ray does (no gRPC answer): is that the port of {what}? {how}")


def evaluate_models(
    runner: ValidationRunner,
    work: Sequence[tuple[str, Sequence[str]]],
    *,
    executor: str = "serial",
    address: str | None = None,
    submitit: SubmititSettings | None = None,
) -> None:
    """Evaluate each ``(model, normalizations)`` of ``work`` into ``runner.runs``.

    ``serial`` evaluates in this process; ``ray`` runs one Ray task per model (``address``: an existing
    cluster, e.g. ``ray://head:10001`` or ``auto``; ``None`` starts a local instance for this call);
    ``submitit`` submits one job per model as a job array (``submitit``: its settings). A model
    that cannot be loaded or run is left out here: its cases meet the error again when they are judged and
    fail with it, one line each, as in a serial run.

    Parameters
    ----------
    runner
        The validation runner; its ``runs`` receive the evaluations.
    work
        Each model and the normalizations to evaluate it under.
    executor
        ``serial``, ``ray`` or ``submitit``.
    address
        With ``ray``: the cluster (``None``: a local one).
    submitit
        With ``submitit``: its settings.
    """
    _check_executor(executor)
    if executor == "ray":
        from modelval.extras import require

        check_ray_address(address)
        require("ray", extra="ray", purpose="--executor ray")
    if executor == "submitit":
        from modelval.extras import require

        require("submitit", extra="slurm", purpose="--executor submitit")
        runner.runs.update(_evaluate_with_submitit(runner, work, submitit or SubmititSettings()))
        return
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
        reach_ray_cluster(address)  # bounded: ray.init's own wait on a closed port ran past minutes
        # A local instance when no address is given; quiet, no dashboard: a validation run, not a service.
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError, TimeoutError) as error:
            raise DataError(
                f"cannot start or join the Ray cluster{f' at {address}' if address else ''}: "
                f"{describe_exception(error)}"
            ) from None
    try:
        gpus = float(ray.cluster_resources().get("GPU", 0))
        # No retry: a task whose worker died (a crash in the model's code, the OOM killer) would die again.
        task = ray.remote(num_gpus=1 if gpus >= 1 else 0, num_cpus=1 if gpus < 1 else 0, max_retries=0)(
            _evaluate_one_model
        )
        stimuli = ray.put(runner.stimuli)
        settings = {
            # "auto" inside the task: the GPU Ray gave it, else its CPU (the front door resolves it there, once).
            "device": "auto",
            "checkpoint_dir": runner.checkpoint_dir,
            "reference_csv": runner.reference_csv,
            "batch_size": runner.batch_size,
            "cache": runner.cache,
        }
        users = list(runner.user_models.values())
        futures = [task.remote(stimuli, settings, users, model, list(normalizations)) for model, normalizations in work]
        results: dict[tuple[str, str], ModelRun] = {}
        for (model, normalizations), future in zip(work, futures, strict=True):
            # One task at a time: a task that fails or whose worker dies fails its own model's cases (with why),
            # and the other models keep their results (one ray.get of all lost them all).
            try:
                runs, failures = ray.get(future)
            except ray.exceptions.RayError as error:
                cause = getattr(error, "cause", None)
                why = describe_exception(cause if isinstance(cause, BaseException) else error)
                for normalization in normalizations:
                    runner.failures[(model, normalization)] = f"the Ray task evaluating {model} failed: {why}"
                continue
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


# --- submitit (SLURM job arrays) ---------------------------------------------------------------------------------


def _evaluate_with_submitit(
    runner: ValidationRunner, work: Sequence[tuple[str, Sequence[str]]], settings: SubmititSettings
) -> dict[tuple[str, str], ModelRun]:
    executor = settings.executor(settings.folder / "%j", len(work))
    stimuli = runner.stimuli
    # The jobs read the stimuli from their folder (a shared file system on a cluster) and prove them the same.
    digests = dict(stimuli.digests) if stimuli.digests is not None else None
    source = {"root": str(stimuli.root), "dataset": stimuli.dataset, "digests": digests}
    evaluation = {
        "device": "auto",  # the GPU SLURM gave the job, else its CPU (resolved once, by the front door, there)
        "checkpoint_dir": runner.checkpoint_dir,
        "reference_csv": runner.reference_csv,
        "batch_size": runner.batch_size,
        "cache": runner.cache,
    }
    users = list(runner.user_models.values())
    models = [model for model, _ in work]
    normalizations = [list(names) for _, names in work]
    count = len(work)
    jobs = executor.map_array(
        ModelJob(), [source] * count, [evaluation] * count, [users] * count, models, normalizations
    )
    results: dict[tuple[str, str], ModelRun] = {}
    for job, (model, names) in zip(jobs, work, strict=True):
        try:
            runs, failures = job.result()
        except Exception as error:  # FailedJobError, UncompletedJobError (killed, timed out), a broken pickle
            why = _last_line(error)
            for normalization in names:
                runner.failures[(model, normalization)] = (
                    f"the submitit job {job.job_id} evaluating {model} failed: {why} (log: {job.paths.stderr})"
                )
            continue
        results.update(runs)
        runner.failures.update(failures)
    return results


def _last_line(error: BaseException) -> str:
    """The last non-empty line of a job's error (submitit's message ends with the job's own exception)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[-1] if lines else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class ModelJob:
    """One submitit job: evaluate one model under its normalizations (see :func:`_evaluate_one_model`).

    Checkpointable: when SLURM preempts the job (or it nears its time limit), submitit calls :meth:`checkpoint`
    and requeues the same call; the requeued job resumes from the output cache, which kept every finished batch.
    """

    def __call__(
        self, source: dict[str, Any], settings: dict[str, Any], users: list[Any], model: str, normalizations: list[str]
    ) -> tuple[dict[tuple[str, str], ModelRun], dict[tuple[str, str], str]]:
        from modelval.datasets.stimulus_set import StimulusSet

        stimuli = StimulusSet.load(source["root"], dataset=source["dataset"], allow_modified=True, progress=False)
        if source["digests"] is not None and dict(stimuli.digests or {}) != source["digests"]:
            raise DataError(f"the stimuli under {source['root']} changed after the run was submitted")
        return _evaluate_one_model(stimuli, settings, users, model, normalizations)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """What submitit resubmits when the job is preempted: this job again (it resumes from the output cache).

        Parameters
        ----------
        *args, **kwargs
            The job's arguments, as submitted.
        """
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)
