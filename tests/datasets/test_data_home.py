"""One data home: ``MODELVAL_DATA_HOME`` (the data commands' ``--data-home DIR``, the config file's ``data_home``)
names the folder that holds every stimulus set and the human reference data, laid out as this project's
``../shared``; a folder given (``--data-root``, ``--reference-dir``) wins for its one folder; every "not found"
names where it looked and the one setting that fixes it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelval.cli import main
from modelval.datasets.fetch import ensure_stimuli, resolve_reference_dir
from modelval.datasets.human_data import human_data_dir
from modelval.datasets.stimuli import data_home, discover_stimuli, resolve_data_root
from modelval.errors import DataError

#: The data home beside this checkout, as CI fills it (the real published files).
SHARED = Path(__file__).resolve().parents[3] / "shared"
needs_shared = pytest.mark.skipif(
    not (SHARED / "cue-conflict").is_dir() or not (SHARED / "reference" / "raw-data").is_dir(),
    reason="the data home ../shared (cue-conflict/, reference/raw-data/) is not beside the checkout",
)
DATA_ENVS = ("MODELVAL_DATA_HOME",)


@pytest.fixture
def no_data_settings(monkeypatch, tmp_path):
    """No data setting at all, and an empty per-user cache."""
    for name in DATA_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_data_home_names_every_folder(no_data_settings, monkeypatch, tmp_path):
    home = tmp_path / "home"
    (home / "reference" / "raw-data").mkdir(parents=True)
    assert data_home() is None
    assert resolve_data_root() == no_data_settings / "cue-conflict"
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(home))
    assert data_home() == home
    assert resolve_data_root() == home / "cue-conflict"
    assert resolve_data_root(dataset="filled-silhouettes") == home / "filled-silhouettes"
    assert resolve_reference_dir() == home / "reference" / "raw-data"
    # a folder given still wins, for its one folder
    assert resolve_data_root(tmp_path / "given") == tmp_path / "given"
    assert resolve_data_root(dataset="edges") == home / "edges"
    assert resolve_reference_dir(tmp_path) == tmp_path


@needs_shared
def test_the_projects_shared_folder_is_a_data_home(no_data_settings, monkeypatch):
    """Every published folder of ../shared is found from the one variable: stimuli, both humans' raw data."""
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(SHARED))
    assert len(discover_stimuli(ensure_stimuli(progress=False))) == 1280
    assert len(discover_stimuli(resolve_data_root(dataset="edges"), dataset="edges")) == 160
    assert human_data_dir("cue-conflict") == SHARED / "reference" / "raw-data"
    if (SHARED / "reference" / "model-vs-human" / "raw-data" / "sketch").is_dir():
        assert human_data_dir("sketch") == SHARED / "reference" / "model-vs-human" / "raw-data"


def test_a_missing_folder_names_where_it_looked_and_the_one_setting(no_data_settings, monkeypatch, tmp_path):
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(tmp_path / "home"))
    with pytest.raises(DataError) as stimuli:
        ensure_stimuli(progress=False)
    message = str(stimuli.value)
    assert str(tmp_path / "home" / "cue-conflict") in message and "from the data home MODELVAL_DATA_HOME" in message
    assert "set MODELVAL_DATA_HOME=DIR to the folder that holds cue-conflict/" in message
    with pytest.raises(DataError) as reference:
        resolve_reference_dir()
    message = str(reference.value)
    assert str(tmp_path / "home" / "reference" / "raw-data") in message
    assert "MODELVAL_DATA_HOME=DIR to the folder that holds reference/raw-data/" in message
    # a Python caller is not told about a command-line option alone
    assert "pass --reference-dir" not in message and "pass --data-root" not in message
    with pytest.raises(DataError) as humans:
        human_data_dir("edges")
    message = str(humans.value)
    assert str(tmp_path / "home" / "reference" / "raw-data") in message and "MODELVAL_DATA_HOME=DIR" in message


@needs_shared
def test_the_data_home_given_as_the_data_root_says_what_to_do(no_data_settings, capsys):
    """Was: "unknown category folder 'cue-conflict'" for ``--data-root ../shared``."""
    with pytest.raises(DataError) as error:
        discover_stimuli(SHARED)
    message = str(error.value)
    assert "unknown category folder" not in message
    assert f"MODELVAL_DATA_HOME={SHARED}" in message and str(SHARED / "cue-conflict") in message
    code = main(["data", "verify", "--data-root", str(SHARED)])
    err = capsys.readouterr().err
    assert code == 2 and "it is a data home" in err and err.count("\n") == 1


@needs_shared
def test_data_home_option_holds_for_one_command(no_data_settings, capsys):
    assert main(["data", "verify", "--data-home", str(SHARED)]) == 0
    assert str(SHARED / "cue-conflict") in capsys.readouterr().out
    assert "MODELVAL_DATA_HOME" not in os.environ  # restored after the command
    assert main(["data", "verify", "--data-home", str(SHARED), "--dataset", "edges"]) == 0
    assert main(["data", "verify"]) == 2  # without it: the empty per-user cache
    err = capsys.readouterr().err
    assert str(no_data_settings / "cue-conflict") in err and "MODELVAL_DATA_HOME=DIR" in err


@needs_shared
def test_the_config_files_data_home_holds_for_every_command(no_data_settings, tmp_path, monkeypatch, capsys):
    """The data home of a project's modelval.toml ([settings] data_home): the one precedence (flag, variable,
    config file, default) for every setting."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "modelval.toml").write_text(f'[settings]\ndata_home = "{SHARED}"\n')
    decisions = SHARED / "reference" / "raw-data" / "edge-experiment_vgg_session_1.csv"
    assert main(["humans", "--decisions", str(decisions), "--bootstrap", "0", "--json"]) == 0
    assert str(SHARED / "reference" / "raw-data") in capsys.readouterr().out
    assert "MODELVAL_DATA_HOME" not in os.environ  # restored after the command
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(tmp_path / "elsewhere"))  # the variable wins over the file
    assert main(["data", "verify"]) == 2
    assert str(tmp_path / "elsewhere" / "cue-conflict") in capsys.readouterr().err


@needs_shared
def test_humans_reads_the_reference_data_of_the_data_home(no_data_settings, monkeypatch, capsys):
    decisions = SHARED / "reference" / "raw-data" / "edge-experiment_vgg_session_1.csv"
    argv = ["humans", "--decisions", str(decisions), "--bootstrap", "0", "--json"]
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(SHARED))
    assert main(argv) == 0
    assert str(SHARED / "reference" / "raw-data") in capsys.readouterr().out
    monkeypatch.delenv("MODELVAL_DATA_HOME")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not found" in err and "MODELVAL_DATA_HOME=DIR" in err


def test_runs_list_names_the_run_store_and_how_to_move_it(monkeypatch, tmp_path, capsys):
    store = tmp_path / "elsewhere" / "runs.sqlite"
    monkeypatch.setenv("MODELVAL_RUNS_DB", str(store))
    assert main(["runs", "list"]) == 0
    out = capsys.readouterr().out
    assert str(store) in out and "MODELVAL_RUNS_DB=FILE moves it" in out


def test_a_command_that_takes_no_setting_still_reads_the_config_files_machine_settings(monkeypatch, tmp_path, capsys):
    """`modelval runs` and `modelval cache` take no flag of a setting, yet a project's modelval.toml moves the run
    store and the cache folder for them too (was: only the commands that take a setting read the file)."""
    monkeypatch.delenv("MODELVAL_RUNS_DB", raising=False)
    monkeypatch.delenv("MODELVAL_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "modelval.toml").write_text('[settings]\nruns_db = "project.sqlite"\ncache_dir = "project-cache"\n')
    assert main(["runs", "list"]) == 0
    assert str(tmp_path / "project.sqlite") in capsys.readouterr().out
    assert main(["cache", "info", "--json"]) == 0
    assert str(tmp_path / "project-cache") in capsys.readouterr().out
    assert "MODELVAL_RUNS_DB" not in os.environ  # restored after the command
