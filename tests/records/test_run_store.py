"""The run store: runs recorded by the commands, listed, shown, and compared field by field."""

from __future__ import annotations

import json
import sqlite3

import pytest

from modelval.cli import main
from modelval.records.run_diff import diff_runs, since_last_run
from modelval.records.run_store import RunStore


def _provenance(**changes):
    record = {
        "schema_version": 1,
        "created": "2026-11-24T00:00:00+00:00",
        "packages": {"torch": "2.15.0", "torchvision": "0.29.2"},
        "preprocessing": {"resize": None, "crop": None, "mean": [0.5, 0.5, 0.5]},
        "output_cache": "miss",
    }
    for path, value in changes.items():
        section, key = path.split("__")
        record[section] = {**record[section], key: value}
    return record


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELVAL_RUNS_DB", str(tmp_path / "runs.sqlite"))
    return RunStore()


def test_diff_names_values_flips_per_category_and_provenance(store):
    first = store.record("shape-bias", model="m", dataset="cue-conflict", label="p",
                         summary={"shape_bias": 0.24, "shape_hits": 197},
                         decisions={"a.png": ["cat", "cat"], "b.png": ["cat", "dog"], "c.png": ["dog", "dog"]},
                         provenance=_provenance())  # fmt: skip
    second = store.record("shape-bias", model="m", dataset="cue-conflict", label="p",
                          summary={"shape_bias": 0.22, "shape_hits": 197},
                          decisions={"a.png": ["cat", "dog"], "b.png": ["cat", "dog"], "c.png": ["dog", "cat"]},
                          provenance={**_provenance(packages__torch="2.16.0", preprocessing__resize=256),
                                      "created": "2026-11-25T00:00:00+00:00", "output_cache": "hit"})  # fmt: skip
    difference = diff_runs(store.get(first), store.get(second))
    assert difference.values == {"shape_bias": (0.24, 0.22)}
    assert difference.flips == {"cat": 1, "dog": 1} and sorted(difference.flipped_images) == ["a.png", "c.png"]
    # what differs, by name; the timestamp and the cache status are not reasons for a change
    assert difference.provenance_text() == "torch 2.15.0 → 2.16.0, resize none → 256"
    assert since_last_run(store, second).a.id == first  # the previous run of the same command, model and label
    assert since_last_run(store, first) is None
    assert since_last_run(None, second) is None  # nothing recorded, nothing to compare
    json.dumps(difference.to_dict())


def test_commands_record_runs_and_the_cli_lists_shows_and_diffs_them(store, modelval_reference_dir, capsys):
    path = modelval_reference_dir / "edge-experiment_vgg_session_1.csv"
    for _ in range(2):
        assert main(["accuracy", "--decisions", str(path), "--json"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [run["command"] for run in runs] == ["accuracy", "accuracy"]
    assert runs[0]["summary"]["accuracy"] == pytest.approx(0.24375)
    assert runs[0]["provenance"]["decisions_file"]["path"] == str(path)
    assert main(["runs", "diff", str(runs[0]["id"])]) == 0
    out = capsys.readouterr().out
    assert "no reported value differs" in out and "decisions flipped: 0 of 160" in out
    assert main(["runs", "show", "999"]) == 2
    assert "no run 999" in capsys.readouterr().err


def test_nothing_is_recorded_when_turned_off(store, modelval_reference_dir, monkeypatch):
    monkeypatch.setenv("MODELVAL_NO_RUN_STORE", "1")
    assert main(["accuracy", "--decisions", str(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")]) == 0
    monkeypatch.delenv("MODELVAL_NO_RUN_STORE")
    assert store.runs() == []


def test_an_unusable_store_is_a_warning_not_a_failure(tmp_path, monkeypatch, modelval_reference_dir):
    bad = tmp_path / "runs.sqlite"
    bad.write_text("not a database")
    monkeypatch.setenv("MODELVAL_RUNS_DB", str(bad))
    with pytest.warns(UserWarning, match="the run was not recorded"):
        assert main(["accuracy", "--decisions", str(modelval_reference_dir / "edge-experiment_vgg_session_1.csv")]) == 0
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(bad).execute("SELECT 1 FROM runs")  # the file was left as it was


def test_a_library_call_records_only_into_a_store_it_is_given(store, modelval_reference_dir):
    """Recording is the caller's choice (as lm-evaluation-harness passes its evaluation_tracker in): the front
    door writes nothing to the per-user store by itself, even where the command line would."""
    import modelval

    path = modelval_reference_dir / "edge-experiment_vgg_session_1.csv"
    modelval.accuracy(path)
    resnet50 = modelval_reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
    modelval.shape_bias_of_decisions(resnet50, bootstrap=0)
    assert store.runs() == []
    report = modelval.accuracy(path, run_store=store)
    assert [run.command for run in store.runs()] == ["accuracy"]
    assert store.runs()[0].summary["accuracy"] == pytest.approx(report.accuracy)


# --- ids past SQLite's integer and rows modelval did not write (issue 31: 10) -------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "show", str(2**64)], "argument ID: 18446744073709551616 is out of range; a run id is 1 to"),
        (["runs", "diff", "1", str(2**63)], "argument B: 9223372036854775808 is out of range; a run id is 1 to"),
        (["runs", "show", "0"], "argument ID: 0 is out of range"),
        (["runs", "list", "--limit", str(10**20)], "`runs list --limit` shows 1 to 1000000 runs"),
        (["runs", "list", "--limit", "-1"], "`runs list --limit` shows 1 to 1000000 runs"),
    ],
)
def test_ids_past_sqlites_integer_are_one_line(store, capsys, argv, message):
    """Before: ``unexpected error: OverflowError: Python int too large to convert to SQLite INTEGER``, exit 3
    (``--limit 10**20``: "datatype mismatch (not a modelval run store?)"; ``--limit -1`` listed everything)."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err
    with pytest.raises(Exception, match="run id=18446744073709551616 is out of range"):
        store.get(2**64)  # the library says the same


def _foreign(store, **row):
    store.record("shape-bias", model="m", dataset="cue-conflict", summary={"shape_bias": 0.2}, provenance=_provenance())
    values = {"created": "x", "command": "shape-bias", "model": "m", "summary": "{}", "provenance": "{}", **row}
    with sqlite3.connect(store.path) as connection:
        connection.execute(
            f"INSERT INTO runs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", list(values.values())
        )


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ({"summary": "not json"}, "summary is not JSON"),
        ({"summary": "[1, 2]"}, "summary is a JSON list, not an object"),
        ({"provenance": "3"}, "provenance is a JSON int, not an object"),
        ({"summary": b"\xff\xfe"}, "summary is bytes, not text"),
        ({"decisions": "[]"}, "decisions is a JSON list, not an object"),
    ],
)
def test_a_row_modelval_did_not_write_is_one_line(store, capsys, row, why):
    """Before: ``unexpected error: JSONDecodeError: Expecting value`` (or AttributeError), exit 3, and ``runs
    list`` showed nothing at all; now ``show`` names the row and how to remove it, ``list`` shows the others."""
    _foreign(store, **row)
    assert main(["runs", "show", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"run 2 is not a run modelval recorded ({why})" in err
    assert "DELETE FROM runs WHERE id = 2" in err
    assert main(["runs", "list", "--json"]) == 0
    captured = capsys.readouterr()
    assert [run["id"] for run in json.loads(captured.out)] == [1]
    assert "modelval: warning: " in captured.err and "it is left out" in captured.err
    assert main(["runs", "diff", "1", "2"]) == 2
