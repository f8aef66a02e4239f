"""modelval's pytest plugin: validate the models of your models file as test cases of your own suite.

Registered as a ``pytest11`` entry point, so ``pip install modelval`` makes it available in any project.
It keeps to itself: its options are ``--modelval-*`` (each also an ini key ``modelval_*``), its fixtures and
markers are ``modelval_*``, it imports no torch until a modelval case runs, and it changes nothing for a
session that collects no modelval case. A test file needs no import::

    def test_my_zoo(modelval_case, modelval_runner):
        judgement = modelval_runner.run(modelval_case)
        assert judgement.passed, judgement.message

``modelval_case`` is parametrized over the models file (``modelval.toml`` or ``[tool.modelval]`` in
``pyproject.toml``; see :mod:`modelval.runner.models_file`), each model under each normalization case.
A broken entry fails its own case with a one-line reason; the others run.

Options (and ini keys, and environment variables): see :data:`modelval.pytest_plugin.settings.SETTINGS`,
or ``pytest --help`` under "modelval". The stimuli are fetched into the per-user cache on first use when
online; when they cannot be had, the cases **fail** with the one-line reason (``--modelval-allow-missing-data``
skips them instead).

Fixtures: ``modelval_case``, ``modelval_runner``, ``modelval_data_root``, ``modelval_stimulus_set``,
``modelval_reference_dir``, ``modelval_device``, ``modelval_checkpoint_dir``, ``modelval_require_weights``.
Markers: ``modelval`` (a validation case; its argument is the model), ``modelval_weights`` (needs downloaded
weights; skipped when absent unless ``--modelval-strict-weights``).

Parallel runs (pytest-xdist, ``-n N``): each model's cases stay on one worker, so no model is evaluated
twice, without rewriting the session's ``--dist`` (:mod:`modelval.pytest_plugin.xdist_scheduling`); with several
GPUs visible, worker ``gwK`` uses ``cuda:K mod count``; the controller prints one summary table and writes
one report folder from every worker's rows.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from modelval.pytest_plugin.settings import (
    add_options,
    check_settings,
    find_models_file,
    missing_resource,
    setting,
    worker_device,
)

MARKERS = (
    "modelval(model): a modelval validation case of `model` (its cases share one xdist worker)",
    "modelval_weights: needs downloaded model weights (modelval models fetch); skipped when absent unless "
    "--modelval-strict-weights",
)
RUNNER_KEY = pytest.StashKey[Any]()
MERGED_KEY = pytest.StashKey[list]()
CASES_KEY = pytest.StashKey[list]()
_WORKER_OUTPUT = "modelval_validation"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


#: Registered only where pytest-xdist is not (it registers its own): the cases carry it for ``--dist loadgroup``,
#: and a project running ``--strict-markers`` without xdist would otherwise fail to collect them.
XDIST_GROUP_MARKER = "xdist_group(name): pytest-xdist's group mark (modelval's cases carry it; unused without xdist)"


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if not config.pluginmanager.hasplugin("xdist"):
        config.addinivalue_line("markers", XDIST_GROUP_MARKER)
    check_settings(config)
    if getattr(config, "workerinput", None) is None and not os.environ.get("MODELVAL_SESSION"):
        # One session for the controller and every xdist worker it starts (they inherit the environment), so the
        # nightly verdict takes all the records of this pytest run as one nightly (records.provenance.session_id).
        import uuid

        os.environ["MODELVAL_SESSION"] = f"pytest-{uuid.uuid4().hex[:12]}"
    home = setting(config, "data_home")
    if home is not None:  # below the door every data folder is found from this variable (docs/data.md)
        os.environ["MODELVAL_DATA_HOME"] = str(home)


SESSION_KEY = pytest.StashKey[Any]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[SESSION_KEY] = session  # the summary sets its exit status when the reports fail


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist load`` (what ``-n`` uses), keep each model's cases on one worker; nothing else changes."""
    if config.getvalue("dist") != "load":
        return None
    from modelval.pytest_plugin.xdist_scheduling import ModelvalScheduling
    from modelval.runner.cases import build_cases

    # The ids the workers give the cases: the models file's, and the registry's (modelval's own matrix).
    cases = [case for case in _user_cases(config) if not isinstance(case, CaseProblem)] + build_cases("all")
    return ModelvalScheduling(config, log, {case.id: case.model for case in cases})


# --- the models file and the cases ----------------------------------------------------------


class CaseProblem:
    """A parameter of ``modelval_case`` that cannot run: its case fails with ``message`` (one line)."""

    def __init__(self, id: str, message: str) -> None:
        self.id, self.message = id, message


def _user_cases(config: pytest.Config) -> list[Any]:
    """The cases of the models file (each model under each normalization), and a CaseProblem per broken entry.

    Read once per session. No models file: one problem that says where it was looked for.
    """
    if CASES_KEY in config.stash:
        return config.stash[CASES_KEY]
    from modelval.errors import ModelvalError
    from modelval.runner.cases import build_user_cases
    from modelval.runner.models_file import read_models_file_entries

    path = find_models_file(config)
    cases: list[Any]
    if path is None:
        folders = dict.fromkeys((str(config.invocation_params.dir), str(config.rootpath)))
        message = (
            f"no models file: no modelval.toml or [tool.modelval] in pyproject.toml in {' or '.join(folders)}; "
            "pass --modelval-models-file FILE"
        )
        cases = [CaseProblem("no-models-file", message)]
    else:
        try:
            entries = read_models_file_entries(path)
        except ModelvalError as error:
            cases = [CaseProblem("models-file", str(error))]
        else:
            cases = []
            for entry in entries:
                if isinstance(entry, ModelvalError):
                    cases.append(CaseProblem(getattr(entry, "model_id", "entry"), str(entry)))
                else:
                    cases.extend(build_user_cases([entry]))
    config.stash[CASES_KEY] = cases
    return cases


def _case_param(case: Any) -> Any:
    """A validation case as a pytest param, grouped by model (xdist), marked by what it needs."""
    if isinstance(case, CaseProblem):
        return pytest.param(case, id=case.id)
    marks = [pytest.mark.modelval(case.model), pytest.mark.xdist_group(case.model)]
    if case.user is None and case.source != "pypi":
        marks.append(pytest.mark.modelval_weights)
    return pytest.param(case, id=case.id, marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "modelval_case" in metafunc.fixturenames:
        params = [_case_param(case) for case in _user_cases(metafunc.config)]
        metafunc.parametrize("modelval_case", params, indirect=True)


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def modelval_case(request: pytest.FixtureRequest) -> Any:
    """One validation case of the models file (a model under one normalization)."""
    case = getattr(request, "param", None)
    if case is None:
        pytest.fail("modelval_case is parametrized by the modelval plugin; it cannot be requested here", pytrace=False)
    if isinstance(case, CaseProblem):
        pytest.fail(case.message, pytrace=False)
    return case


@pytest.fixture(scope="session")
def modelval_data_root(pytestconfig: pytest.Config) -> Path:
    """The cue-conflict stimuli: the setting, else the per-user cache (fetched there on first use when online)."""
    from modelval.datasets.fetch import ensure_stimuli
    from modelval.errors import ModelvalError

    try:
        return ensure_stimuli(setting(pytestconfig, "data_root"), progress=False)
    except ModelvalError as error:
        problem = f"modelval: {error}"  # reported outside the handler: pytest would print the error twice
    missing_resource(pytestconfig, problem)
    raise AssertionError("unreachable")  # pragma: no cover - missing_resource always raises


@pytest.fixture(scope="session")
def modelval_stimulus_set(pytestconfig: pytest.Config, modelval_data_root: Path) -> Any:
    """The stimuli, verified and decoded once per test session (per worker under xdist)."""
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.errors import ModelvalError

    try:
        return StimulusSet.load(
            modelval_data_root, progress=False, allow_modified=bool(setting(pytestconfig, "allow_modified_stimuli"))
        )
    except ModelvalError as error:
        problem = f"modelval: {error}"
    missing_resource(pytestconfig, problem)


@pytest.fixture(scope="session")
def modelval_reference_dir(pytestconfig: pytest.Config) -> Path:
    """Published per-image decisions of Geirhos et al. (texture-vs-shape raw-data/)."""
    from modelval.datasets.fetch import resolve_reference_dir
    from modelval.errors import ModelvalError

    try:
        return resolve_reference_dir(setting(pytestconfig, "reference_dir"))
    except ModelvalError as error:
        problem = f"modelval: {error}"
    missing_resource(pytestconfig, problem)
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture(scope="session")
def modelval_device(pytestconfig: pytest.Config) -> str:
    """The device cases run on (default auto: CUDA when available, as everywhere in modelval); one GPU per xdist
    worker when several are visible."""
    return worker_device(setting(pytestconfig, "device") or "auto", os.environ.get("PYTEST_XDIST_WORKER"))


@pytest.fixture
def modelval_preprocess_diff(modelval_data_root: Path, modelval_device: str) -> Any:
    """A function that diffs two preprocessing pipelines on this session's stimuli and device, and fails the test
    with the diff's report when they differ: ``modelval_preprocess_diff("model", my_transform, model=...)``.

    It takes :func:`modelval.preprocess_diff`'s arguments (``expect="differs"`` passes only when they differ) and
    returns its :class:`~modelval.judgement.preprocess_diff.PreprocessDiff`.
    """
    from modelval.api.preprocessing_diff import preprocess_diff

    def diff(a: Any, b: Any, *, expect: str = "same", **options: Any) -> Any:
        if expect not in ("same", "differs"):
            raise ValueError(f"expect must be 'same' or 'differs', got {expect!r}")
        options.setdefault("data_root", modelval_data_root)
        options.setdefault("device", modelval_device)
        result = preprocess_diff(a, b, **options)
        if result.status != expect:
            pytest.fail(f"preprocessing expected {expect}, found {result.status}\n{result.text()}", pytrace=False)
        return result

    return diff


@pytest.fixture(scope="session")
def modelval_checkpoint_dir(pytestconfig: pytest.Config) -> Path:
    from modelval.models import resolve_checkpoint_dir

    return resolve_checkpoint_dir(setting(pytestconfig, "checkpoint_dir"))


@pytest.fixture(scope="session")
def modelval_require_weights(pytestconfig: pytest.Config, modelval_checkpoint_dir: Path) -> Any:
    """``modelval_require_weights(model)``: skip with the fetch command (fail with --modelval-strict-weights)."""
    from modelval.models import weights_status

    def check(model: str) -> None:
        available, message = weights_status(model, modelval_checkpoint_dir)
        if not available:
            missing_resource(pytestconfig, message, kind="weights")

    return check


def _reference_csv(config: pytest.Config) -> Path | None:
    from modelval.datasets.fetch import resolve_reference_dir
    from modelval.errors import ModelvalError

    try:
        folder = resolve_reference_dir(setting(config, "reference_dir"))
    except ModelvalError:
        return None  # optional: without it the diagnosis says the calculation was "not checked"
    return folder / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"


@pytest.fixture(scope="session")
def modelval_runner(
    pytestconfig: pytest.Config, modelval_stimulus_set: Any, modelval_device: str, modelval_checkpoint_dir: Path
) -> Any:
    """Evaluates each (model, normalization) once per session through the front door; its rows feed the final
    table and reports, and each case is recorded in the run store (``MODELVAL_NO_RUN_STORE=1``: not)."""
    from modelval.records.run_store import default_run_store
    from modelval.runner.matrix import ValidationRunner

    runner = ValidationRunner(
        stimuli=modelval_stimulus_set,
        device=modelval_device,
        checkpoint_dir=modelval_checkpoint_dir,
        reference_csv=_reference_csv(pytestconfig),
        run_store=default_run_store(),
        # Not the CLI's default 32, so modelval's own CLI test also checks batch-size independence; not 64
        # either, which is up to 25% slower on CPU for the larger EfficientNets (docs/performance.md).
        batch_size=48,
    )
    cases = [case for case in _user_cases(pytestconfig) if not isinstance(case, CaseProblem)]
    runner.add_user_models(case.user for case in cases)
    executor = setting(pytestconfig, "executor") or "serial"
    if executor != "serial":
        # Evaluate every model up front as tasks (one per model); each case then judges its stored evaluation.
        from modelval.runner.executors import evaluate_models

        work: dict[str, list[str]] = {}
        for case in cases:
            work.setdefault(case.model, []).append(case.normalization)
        submitit = None
        if executor == "submitit":
            from modelval.runner.executors import SubmititSettings

            submitit = SubmititSettings.parse(setting(pytestconfig, "slurm"))
        evaluate_models(
            runner, list(work.items()), executor=executor,
            address=setting(pytestconfig, "ray_address") or os.environ.get("RAY_ADDRESS"),
            submitit=submitit,
        )  # fmt: skip
    pytestconfig.stash[RUNNER_KEY] = runner
    return runner


# --- the summary: one table, merged from every xdist worker -----------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: send this worker's rows and evaluations to the controller."""
    config = session.config
    runner = config.stash.get(RUNNER_KEY, None)
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None and runner is not None and runner.rows:
        # Our own objects between our own processes (not untrusted input): pickle keeps them whole.
        workeroutput[_WORKER_OUTPUT] = pickle.dumps((runner.rows, runner.evaluations, runner.run_store))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: collect a finished worker's rows."""
    payload = getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT)
    if payload is not None:
        node.config.stash.setdefault(MERGED_KEY, []).append(pickle.loads(payload))


def _merged_results(config: pytest.Config) -> tuple[list[Any], dict[Any, Any], Any]:
    """Rows and evaluations of this process and of every worker, ordered by model and case, and the run store
    their cases were recorded in."""
    rows: list[Any] = []
    evaluations: dict[Any, Any] = {}
    store = None
    runner = config.stash.get(RUNNER_KEY, None)
    if runner is not None:
        rows.extend(runner.rows)
        evaluations.update(runner.evaluations)
        store = runner.run_store
    for worker_rows, worker_evaluations, worker_store in config.stash.get(MERGED_KEY, []):
        rows.extend(worker_rows)
        evaluations.update(worker_evaluations)
        store = store or worker_store
    # The same order whatever worker ran what (-n 2 prints the table -n 0 prints): registry order,
    # then the models file's order; within a model, its own normalization first.
    from modelval.models import list_models

    order = {entry.name: index for index, entry in enumerate(list_models())}
    for case in _user_cases(config):
        if not isinstance(case, CaseProblem):
            order.setdefault(case.model, len(order))
    rows.sort(key=lambda r: (order.get(r.model, len(order)), r.normalization_case != "model", r.normalization))
    return rows, evaluations, store


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print the comparison table and breakdown of every validation case run in this session."""
    if getattr(config, "workerinput", None) is not None:
        return  # a worker: the controller prints
    rows, evaluations, store = _merged_results(config)
    if not rows:
        return
    from modelval.judgement.rows import format_breakdown, format_comparison
    from modelval.runner.reports import format_notes, write_validation_reports

    terminalreporter.section("shape-bias validation")
    terminalreporter.write_line(format_comparison(rows))
    terminalreporter.write_line("")
    terminalreporter.write_line(format_breakdown(rows))
    for line in format_notes(rows):
        terminalreporter.write_line(line)
    report_dir = setting(config, "report_dir")
    if report_dir:
        from modelval.errors import ModelvalError

        try:
            written = write_validation_reports(rows, evaluations, Path(report_dir), store)
        except (ModelvalError, OSError) as error:
            # One line after the table, not a traceback after every test passed; and the run fails, so a CI job
            # that needed the reports notices.
            message = str(error) if isinstance(error, ModelvalError) else f"{error.strerror or error}"
            terminalreporter.write_line(
                f"\nmodelval: error: the reports were not written to {report_dir}: {message}", red=True, bold=True
            )
            session = config.stash.get(SESSION_KEY, None)
            if session is not None and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        terminalreporter.write_line(f"\nreports written to {report_dir}: {len(written)} files")
