"""The plugin in a user's throwaway project: their models file, their test file, -n 0 and -n 2.

The project gets nothing from this repository but ``pip install modelval``: the plugin comes in
through its ``pytest11`` entry point. Its models file lists the three bundled EfficientNet-Lite
models (two of them through specs); the stimuli are 3 per category, so both runs stay short.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

USER_TEST = """
def test_my_zoo(modelval_case, modelval_runner):
    judgement = modelval_runner.run(modelval_case)
    assert judgement.passed, judgement.message
"""

MODELS_FILE = """
[models.lite0]
label = "Lite0 (registry)"
spec = "efficientnet_lite0"

[models.lite0_mine]
label = "Lite0 (my factory + checkpoint)"
spec = "nets.py:lite0"
checkpoint = "weights/lite0.pt"
mean = [0.5, 0.5, 0.5]
std = [0.5, 0.5, 0.5]
normalizations = ["model"]

[models.lite1]
label = "Lite1"
spec = "efficientnet_lite1"
normalizations = ["model", "wrong"]

[models.lite2]
label = "Lite2"
spec = "efficientnet_lite2"
normalizations = ["model"]
"""

NETS = """
from efficientnet_lite_pytorch import EfficientNet

def lite0():
    return EfficientNet.from_name("efficientnet-lite0")
"""


@pytest.fixture
def user_project(pytester: pytest.Pytester, stimulus_subset, bundled_model) -> tuple[pytest.Pytester, Path]:
    import torch

    subset = stimulus_subset(3, pytester.path / "stimuli")
    (pytester.path / "weights").mkdir()
    torch.save(bundled_model.model.state_dict(), pytester.path / "weights" / "lite0.pt")
    (pytester.path / "modelval.toml").write_text(MODELS_FILE)
    (pytester.path / "nets.py").write_text(NETS)
    pytester.makepyfile(test_zoo=USER_TEST)
    return pytester, subset


def summary_table(output: str) -> str:
    """The lines of the plugin's summary section (the comparison and breakdown tables)."""
    section = output.split("shape-bias validation", 1)[1]
    return "\n".join(line.rstrip() for line in section.splitlines()[1:] if line.strip() and "=" * 5 not in line
                     and not line.startswith("reports written"))  # fmt: skip


@pytest.mark.slow
def test_plugin_runs_a_users_zoo_and_xdist_gives_the_same_table(user_project, tmp_path):
    pytester, subset = user_project
    common = ["-p", "no:cacheprovider", f"--modelval-data-root={subset}", "--modelval-allow-modified-stimuli",
              "--modelval-device", "cpu"]  # fmt: skip
    serial = pytester.runpytest_subprocess(*common, f"--modelval-report-dir={tmp_path / 'n0'}")
    serial.assert_outcomes(passed=6)
    parallel = pytester.runpytest_subprocess(*common, "-n", "2", "-v", f"--modelval-report-dir={tmp_path / 'n2'}")
    parallel.assert_outcomes(passed=6)
    # Each model's cases ran on one worker (evaluated once), though the session's --dist stayed "load".
    workers: dict[str, set[str]] = {}
    passed = re.findall(r"\[(gw\d)\] .*PASSED test_zoo\.py::test_my_zoo\[(\w+?)-\w+-norm\]", parallel.stdout.str())
    for worker, model in passed:
        workers.setdefault(model, set()).add(worker)
    assert sorted(workers) == ["lite0", "lite0_mine", "lite1", "lite2"]
    assert all(len(used) == 1 for used in workers.values()), workers
    table = summary_table(serial.stdout.str())
    assert table == summary_table(parallel.stdout.str())
    assert re.search(r"Lite0 \(my factory \+ checkpoint\)\s+factory\s+model \(half\)", table)
    assert "DETECTED (" in table and "FINDING (no expected value)" in table
    # Both report folders hold the same rows, merged from the two workers.
    rows = {run: json.loads((tmp_path / run / "shape_bias.json").read_text()) for run in ("n0", "n2")}
    for run in rows.values():  # when and in which process a case ran differs; what it measured does not
        assert all(row.pop("provenance")["weights_sha256"] for row in run)
    assert rows["n0"] == rows["n2"] and len(rows["n0"]) == 6
    # each run recorded its cases, so the second run's report says what changed since the first (nothing)
    changes = json.loads((tmp_path / "n2" / "since_last_run.json").read_text())
    assert len(changes) == 6 and all(c is None or c["flips"]["total"] == 0 for c in changes.values())
    # The registry and the factory + checkpoint specs of Lite0 decide alike.
    by_label = {(r["label"], r["normalization"]): r for r in rows["n0"]}
    registry, mine = (
        by_label[("Lite0 (registry)", "model (half)")],
        by_label[("Lite0 (my factory + checkpoint)", "model (half)")],
    )
    assert (registry["shape_hits"], registry["texture_hits"]) == (mine["shape_hits"], mine["texture_hits"])


def test_models_file_errors_name_the_table_and_key(tmp_path):
    from modelval.errors import DataError
    from modelval.runner.models_file import read_models_file

    path = tmp_path / "modelval.toml"
    cases = {
        '[models.a]\nspec = "x"\nexpectd = 0.2\n': r"\[models\.a\]: 'expectd' is not a known key \(did you",
        '[models.a]\nlabel = "no spec"\n': r"\[models\.a\]: 'spec' is required",
        '[models.a]\nspec = "x"\nexpected = 21.4\ntolerance = 0.01\n': r"'expected' is a fraction between 0 and 1",
        '[models.a]\nspec = "x"\nexpected = 0.2\n': r"'tolerance' is required with 'expected'",
        '[models.a]\nspec = "x"\nmean = [0.5, 0.5]\n': r"'mean': '0.5,0.5': expected three finite",
        '[models.a]\nspec = "x"\nnormalizations = ["sideways"]\n': r"'normalizations' must be a non-empty list",
        '[models.a]\nspec = "x"\ninterpolation = "lanczos"\n': r"'interpolation': 'lanczos' is not one of",
        '[model.a]\nspec = "x"\n': r"unknown table or key 'model'",
        "[models.a\n": r"invalid TOML",
    }
    for text, message in cases.items():
        path.write_text(text)
        with pytest.raises(DataError, match=message):
            read_models_file(path)


def test_pyproject_tool_table_and_relative_paths(tmp_path):
    from modelval.runner.models_file import find_models_file, read_models_file

    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [project]
            name = "mine"
            [tool.modelval.models.net]
            spec = "timm:resnet50.a1_in1k"
            checkpoint = "runs/best.pt"
            expected = 0.2139
            tolerance = 0.015
            source = "our paper, Table 2"
            """
        )
    )
    found = find_models_file(tmp_path)
    assert found == tmp_path / "pyproject.toml"
    (model,) = read_models_file(found)
    assert model.checkpoint == tmp_path / "runs" / "best.pt" and model.expected == 0.2139
    assert model.normalizations == ("model", "wrong")
    (tmp_path / "pyproject.toml").write_text('[tool.modelval.models.net]\nspec = "x"\nbogus = 1\n')
    with pytest.raises(Exception, match=r"\[tool\.modelval\.models\.net\]: 'bogus'"):
        read_models_file(tmp_path / "pyproject.toml")
    shutil.rmtree(tmp_path)


@pytest.mark.parametrize(
    ("requested", "worker", "gpus", "device"),
    [
        ("cuda", "gw0", 4, "cuda:0"),
        ("cuda", "gw5", 4, "cuda:1"),
        ("auto", "gw1", 2, "cuda:1"),
        ("cuda", "gw3", 1, "cuda"),  # one GPU: every worker shares it
        ("cpu", "gw1", 4, "cpu"),  # an explicit CPU run stays on the CPU
        ("cuda", None, 4, "cuda"),  # not under xdist
    ],
)
def test_each_xdist_worker_gets_its_own_gpu(requested, worker, gpus, device, monkeypatch):
    import torch

    from modelval.pytest_plugin.settings import worker_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    assert worker_device(requested, worker) == device


def test_models_file_paths_resolve_once_from_a_relative_config(tmp_path, monkeypatch):
    """`--config sub/modelval.toml`: the checkpoint is sub/w.pt, not sub/sub/w.pt."""
    import torch

    from modelval.models import load_model
    from modelval.runner.models_file import read_models_file

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "nets.py").write_text("import torch\ndef net():\n    return torch.nn.Linear(3, 2)\n")
    torch.save(torch.nn.Linear(3, 2).state_dict(), tmp_path / "sub" / "w.pt")
    (tmp_path / "sub" / "modelval.toml").write_text('[models.m]\nspec = "nets.py:net"\ncheckpoint = "w.pt"\n')
    monkeypatch.chdir(tmp_path)
    (model,) = read_models_file(Path("sub/modelval.toml"))
    assert model.checkpoint == Path("sub/w.pt")
    loaded = load_model(model.spec, checkpoint=model.checkpoint, base_dir=model.base_dir, progress=False)
    assert loaded.config.checkpoint == "sub/w.pt"


NEIGHBOUR_CONFTEST = """
import pytest

def pytest_addoption(parser):
    # Names any ML project may use; modelval's plugin, installed in the same environment, must not clash.
    parser.addoption("--device", default="cpu")
    parser.addoption("--data-root", default=None)
    parser.addoption("--report-dir", default=None)

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the project's own slow marker")

def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        (session.config.rootpath / "dist.txt").write_text(str(session.config.getoption("dist", "no")))

@pytest.fixture
def device(request):
    return request.config.getoption("--device")

@pytest.fixture
def data_root():
    return "theirs"
"""

NEIGHBOUR_TESTS = """
import sys
import pytest

def test_their_device_option(device):
    assert device == "tpu"

@pytest.mark.slow
def test_their_marker_and_fixture(data_root):
    assert data_root == "theirs"

def test_modelval_imports_no_torch_here():
    assert "torch" not in sys.modules
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_project_with_its_own_device_option_fixture_and_marker_is_unchanged(pytester, workers):
    """modelval installed: the project's --device, `device` fixture and `slow` marker work as before."""
    pytester.makeconftest(NEIGHBOUR_CONFTEST)
    pytester.makepyfile(test_theirs=NEIGHBOUR_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers", "--device", "tpu", *workers)
    result.assert_outcomes(passed=3)
    assert "shape-bias validation" not in result.stdout.str()  # no summary section
    # The session's --dist is what xdist chose ("load" for -n 2), not rewritten by modelval.
    assert (pytester.path / "dist.txt").read_text() == ("load" if workers else "no")
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--modelval-data-root" in help_text and "modelval_data_root" in help_text


def test_broken_entries_fail_alone_with_one_line(pytester, stimulus_subset):
    """A models file with a good model, a table without a spec and a path as id: one case runs, two fail."""
    pytester.path.joinpath("modelval.toml").write_text(
        '[models.lite0]\nspec = "efficientnet_lite0"\nnormalizations = ["model"]\n'
        '[models.nospec]\nlabel = "no spec"\n'
        '[models."../../escape"]\nspec = "efficientnet_lite0"\n'
    )
    pytester.makepyfile(test_zoo=USER_TEST)
    subset = stimulus_subset(2)  # outside the project: the space form would move pytest's rootdir (refused)
    report = pytester.path / "reports"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--modelval-data-root={subset}",
        "--modelval-allow-modified-stimuli",
        f"--modelval-report-dir={report}",
    )
    result.assert_outcomes(passed=1, errors=2)
    output = result.stdout.str()
    assert "[models.nospec]: 'spec' is required" in output
    assert "must be a plain name" in output and "Traceback" not in output
    written = [p for p in pytester.path.parent.rglob("*") if "escape" in p.name]
    assert not written, written  # nothing written outside the report folder


def test_missing_stimuli_fail_the_cases_unless_allowed(pytester, tmp_path, monkeypatch):
    monkeypatch.delenv("MODELVAL_STRICT_DATA", raising=False)  # CI's override would forbid the skip
    pytester.path.joinpath("modelval.toml").write_text('[models.lite0]\nspec = "efficientnet_lite0"\n')
    pytester.makepyfile(test_zoo=USER_TEST)
    absent = ["-p", "no:cacheprovider", f"--modelval-data-root={tmp_path / 'absent'}"]
    result = pytester.runpytest_subprocess(*absent)
    result.assert_outcomes(errors=2)
    assert "cue-conflict folder not found" in result.stdout.str() and "Traceback" not in result.stdout.str()
    # Before: the message named the command line's --data-root, which pytest answers "unrecognized arguments".
    output = result.stdout.str()
    assert "--modelval-data-home DIR" in output and "--data-home" not in output.replace("--modelval-data-home", "")
    pytester.runpytest_subprocess(*absent, "--modelval-allow-missing-data").assert_outcomes(skipped=2)


def test_the_data_home_setting_finds_the_stimuli_under_it(pytester, stimulus_subset, tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    stimulus_subset(1, home / "cue-conflict")
    pytester.path.joinpath("modelval.toml").write_text(ONE_MODEL)
    pytester.makepyfile(test_zoo=USER_TEST)
    # Was: CI's MODELVAL_DATA_ROOT reached the subprocess and won over the data home (as it should), so the test
    # evaluated the 1280 published stimuli and passed whatever the data home did.
    reports = tmp_path_factory.mktemp("reports")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--modelval-data-home={home}", "--modelval-allow-modified-stimuli",
        "--modelval-device", "cpu", f"--modelval-report-dir={reports}",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    (row,) = json.loads((reports / "shape_bias.json").read_text())
    stimuli = row["provenance"]["stimuli"]
    assert stimuli["images"] == 16 and stimuli["root"] == str(home / "cue-conflict"), stimuli


def test_a_test_asking_for_cases_without_a_models_file_fails(pytester):
    pytester.makepyfile(test_zoo=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    assert "no models file" in result.stdout.str() and "--modelval-models-file" in result.stdout.str()


def test_models_file_settings_come_from_the_ini_file(pytester, stimulus_subset, monkeypatch):
    """ini keys work like the options; a path in the ini file is relative to that file."""
    subset = stimulus_subset(1, pytester.path / "data" / "stimuli")
    (pytester.path / "zoo").mkdir()
    (pytester.path / "zoo" / "models.toml").write_text(
        '[models.lite0]\nspec = "efficientnet_lite0"\nnormalizations = ["model"]\n'
    )
    pytester.makeini("""
        [pytest]
        modelval_models_file = zoo/models.toml
        modelval_data_root = data/stimuli
        modelval_allow_modified_stimuli = true
        modelval_report_dir = out
    """)
    pytester.makepyfile(test_zoo=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (row,) = json.loads((pytester.path / "out" / "shape_bias.json").read_text())
    images = row["conflict_images"] + row["excluded_no_conflict"]
    assert images == len(list(subset.rglob("*.png"))) == 16  # the ini's folder, not another
    # the verdict as data: the test passed, and the report says so in fields, not in its text
    assert row["passed"] is True and row["status"] in {"pass", "finding"} and isinstance(row["reason"], str)
    assert (row["normalization_case"], row["normalization"]) == ("model", "model (half)")


def test_xdist_work_units_group_a_models_cases_and_nothing_else():
    from modelval.pytest_plugin.xdist_scheduling import _case_parameter, _scope_of

    models = {"lite0-model-norm": "lite0", "lite0-wrong-norm": "lite0", "a-b-model-norm": "a-b"}
    assert _case_parameter("tests/test[1].py::TestX::test_y[lite0-model-norm]") == "lite0-model-norm"
    assert _case_parameter("test_zoo.py::test_plain") is None
    same_model = _scope_of("t.py::test_zoo[lite0-wrong-norm]", models)
    assert _scope_of("t.py::test_zoo[lite0-model-norm]", models) == same_model
    assert _scope_of("t.py::test_zoo[a-b-model-norm]", models) == "modelval:a-b"
    # a user's own parametrized test is its own unit, whatever its id looks like
    assert _scope_of("t.py::test_theirs[lite0-model-norm-x]", models) == "t.py::test_theirs[lite0-model-norm-x]"


def test_the_settings_table_matches_the_options():
    """The plugin's options are modelval's settings marked for it, each declared once (modelval.settings)."""
    from modelval.pytest_plugin.settings import SETTINGS
    from modelval.settings import SETTINGS as DECLARED

    assert {setting.name for setting in SETTINGS} == {name for name, s in DECLARED.items() if s.plugin}
    for setting in SETTINGS:
        assert setting.plugin_option == "--modelval-" + setting.name.replace("_", "-")
        assert setting.ini == "modelval_" + setting.name


def test_a_model_whose_code_fails_fails_its_own_cases_in_one_line(pytester, stimulus_subset):
    pytester.path.joinpath("modelval.toml").write_text(
        '[models.lite0]\nspec = "efficientnet_lite0"\nnormalizations = ["model"]\n'
        '[models.broken]\nspec = "nets.py:build"\n'
    )
    pytester.path.joinpath("nets.py").write_text('def build():\n    raise RuntimeError("factory exploded")\n')
    pytester.makepyfile(test_zoo=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--modelval-data-root={stimulus_subset(2)}", "--modelval-allow-modified-stimuli"
    )
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    assert f"the model factory {pytester.path / 'nets.py'}:build() raised RuntimeError: factory exploded" in output
    assert "Traceback" not in output and "UserCodeError" not in output


# --- bad settings are one line (issue 31: 8 and 11) ------------------------------------------------------------

ONE_MODEL = '[models.lite0]\nspec = "efficientnet_lite0"\nnormalizations = ["model"]\n'


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--modelval-device", "tpu"], "--modelval-device (or $MODELVAL_DEVICE): unknown device 'tpu'; use auto, cpu"),
        (["--modelval-report-dir", "notes.txt"], "notes.txt: is a file; name a folder (it is created if missing)"),
        (["--modelval-report-dir", "x" * 300], "a name of 300 bytes; file and folder names are at most 255 bytes"),
    ],
)
def test_a_bad_setting_is_one_line_before_any_test_runs(pytester, option, message):
    """Before: ``tpu`` was torch's device list in a traceback through runtime.py once a case ran; a report
    folder naming a file (or too long a name) was 84 lines of traceback after every test had passed."""
    pytester.path.joinpath("modelval.toml").write_text(ONE_MODEL)
    pytester.path.joinpath("notes.txt").write_text("my notes")
    pytester.makepyfile(test_zoo=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1 and message in errors[0] and errors[0].startswith("ERROR: "), result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert pytester.path.joinpath("notes.txt").read_text() == "my notes"


FULL_DISK_CONFTEST = """
import errno
import io

from modelval import atomic

real = atomic._temporary_file


class Full(io.RawIOBase):
    def writable(self):
        return True

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


def temporary(path):
    name, handle = real(path)
    handle.close()
    return name, io.BufferedWriter(Full())


atomic._temporary_file = temporary
"""


def test_reports_on_a_full_disk_are_one_line_and_fail_the_run(pytester, stimulus_subset):
    pytester.path.joinpath("modelval.toml").write_text(ONE_MODEL)
    pytester.makeconftest(FULL_DISK_CONFTEST)
    pytester.makepyfile(test_zoo=USER_TEST)
    report = pytester.path / "reports"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--modelval-data-root={stimulus_subset(2)}", "--modelval-allow-modified-stimuli",
        "--modelval-device", "cpu", f"--modelval-report-dir={report}",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "Traceback" not in output and "shape-bias validation" in output
    (line,) = [line for line in result.stdout.lines if "modelval: error:" in line]
    assert f"the reports were not written to {report}: cannot write" in line and "No space left on device" in line
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the reports a CI job asked for are missing: not green
    assert not [p for p in report.rglob("*") if p.is_file()]  # nothing half-written


# --- what a nightly relies on (issue 28, point 6) --------------------------------------------------------------

THEIR_PROJECT_INI = """
[tool.pytest.ini_options]
addopts = "--strict-markers"
markers = ["mine: their own marker"]
"""

THEIR_MARKED_TEST = """
import pytest


@pytest.mark.mine
def test_theirs(request):
    # their ini file was read: its addopts and its marker are in force
    assert request.config.getoption("strict_markers")
"""


def test_strict_markers_without_xdist_collects_the_cases(pytester):
    """Before: the cases' ``xdist_group`` mark was unregistered without pytest-xdist, so ``--strict-markers``
    gave a collection error and the project ran nothing."""
    pytester.path.joinpath("modelval.toml").write_text(ONE_MODEL)
    pytester.makepyfile(test_zoo=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "--strict-markers",
                                           "--collect-only", "-q")  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "test_zoo.py::test_my_zoo[lite0-model-norm]" in result.stdout.str()
    assert "xdist_group" not in result.stdout.str()


def test_the_space_form_that_moves_the_rootdir_is_refused_and_the_equals_form_works(pytester, tmp_path_factory):
    """Before: ``--modelval-data-root DIR`` (DIR outside the project) made pytest take a folder above DIR as its
    rootdir: the project's ini file (addopts, markers) was silently ignored and ``.pytest_cache`` was written
    into the stimulus folder."""
    data = tmp_path_factory.mktemp("shared") / "cue-conflict"
    data.mkdir()
    pytester.makepyprojecttoml(THEIR_PROJECT_INI)
    pytester.makepyfile(test_theirs=THEIR_MARKED_TEST)

    refused = pytester.runpytest_subprocess("--modelval-data-root", str(data))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in refused.stderr.lines if line.strip()]
    assert len(errors) == 1, refused.stderr.str()
    assert f"--modelval-data-root {data}: write --modelval-data-root={data}" in errors[0]
    assert f"without an ini file, not rootdir {pytester.path} with pyproject.toml)" in errors[0]
    assert not any(data.parent.rglob(".pytest_cache")), "pytest wrote into the data folder"

    accepted = pytester.runpytest_subprocess(f"--modelval-data-root={data}")
    accepted.assert_outcomes(passed=1)
    assert f"rootdir: {pytester.path}" in accepted.stdout.str()
    assert not any(data.parent.rglob(".pytest_cache"))


def test_the_space_form_is_kept_where_it_changes_nothing(pytester):
    """A folder inside the project leaves the rootdir and ini file as they are: no reason to refuse it."""
    data = pytester.path / "data"
    data.mkdir()
    pytester.makepyprojecttoml(THEIR_PROJECT_INI)
    pytester.makepyfile(test_theirs=THEIR_MARKED_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--modelval-data-root", str(data))
    result.assert_outcomes(passed=1)
