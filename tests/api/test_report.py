"""The nightly's page (issue 41): what it says of a regressed and a fixed model, its coverage, its determinism, its
bounds on what it refers to, and bad inputs."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from modelval.api.report import nightly_report
from modelval.errors import DataError
from modelval.records.run_store import RunStore
from nightly_records import STIMULI, record_case, two_nightlies


@pytest.fixture
def nightlies(tmp_path):
    return two_nightlies(tmp_path)


def _report(tmp_path, store, status, folder="page", **kw):
    return nightly_report(tmp_path / folder, status, run_store=store, stimuli=kw.pop("stimuli", None), **kw)


def test_the_page_names_the_regression_the_fix_and_the_coverage(nightlies, tmp_path, modelval_data_root):
    store, status = nightlies
    report = _report(tmp_path, store, status, stimuli=modelval_data_root)
    cases = {case["model"]: case for case in report.data["cases"]}
    assert {m: c["outcome"] for m, c in cases.items()} == {
        "regressed": "new failure", "repaired": "fixed", "steady": "pass", "broken": "new failure", "absent": "not run",
    }  # fmt: skip
    assert report.data["coverage"] == {"cells": 5, "scored": 3, "failed": 1, "never run": 1,
                                       "classes": {"not run": 1, "out of memory": 1}}  # fmt: skip
    flipped = cases["regressed"]["flipped"]
    assert flipped["since"] == "last pass" and flipped["count"] == len(STIMULI)
    assert list(flipped["groups"]) == ["shape -> texture"]
    assert cases["repaired"].get("flipped") is None  # a fix passes: nothing to show
    assert [p["shape_bias"] for p in cases["regressed"]["trend"]] == [0.2, 0.05]
    page = (tmp_path / "page" / "index.html").read_text()
    assert "2 regressed</strong>: broken <code>model/cuda/fp32</code>, regressed <code>model/cuda/fp32</code>" in page
    assert "1 fixed</strong>: repaired" in page
    assert "Coverage: <strong>3 of 5</strong> cells scored; 1 failed, 1 never run" in page
    thumbs = sorted(p.name for p in (tmp_path / "page" / "thumbs").iterdir())
    assert len(thumbs) == len(STIMULI) and report.data["files"].count("index.html") == 1
    for src in re.findall(r'<img src="([^"]+)"', page):
        assert (tmp_path / "page" / src).is_file()
    assert 'reproduce: <code>modelval validate --models-file zoo.toml  # regressed</code>' in page
    assert page.count('<svg class="per-category"') == 4  # each measured case; "absent" never ran
    assert "<title>cat: 25.0%</title>" in page and "<title>clock: n/a</title>" in page


def test_rendering_twice_gives_the_same_bytes_and_no_url_leaves_the_folder(nightlies, tmp_path, modelval_data_root):
    store, status = nightlies
    first = _report(tmp_path, store, status, "a", stimuli=modelval_data_root)
    second = _report(tmp_path, store, status, "b", stimuli=modelval_data_root)
    assert [p.name for p in first.files] == [p.name for p in second.files]
    for a, b in zip(first.files, second.files, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    page = (tmp_path / "a" / "index.html").read_text()
    for target in re.findall(r'(?:src|href)="([^"]*)"', page):
        assert target.startswith(("#", "thumbs/")), target
    assert not re.search(r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", page.replace("zoo.toml  #", ""))
    assert "@import" not in page and "url(" not in page


def test_a_name_with_html_stays_text_and_a_missing_number_is_marked(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    record_case(store, "<script>alert(1)</script>", "n", "2026-11-27T02:00:00+00:00", passed=False,
                shape_bias=float("nan"))  # fmt: skip
    status = tmp_path / "status.toml"
    status.write_text('[models."<script>alert(1)</script>"]\n"model/cuda/fp32" = "pass"\n')
    report = _report(tmp_path, store, status)
    page = (tmp_path / "page" / "index.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the page's own sorting script, nothing else
    (case,) = report.data["cases"]
    assert case["summary"]["shape_bias"] is None and '<td data-v="" class="num"><span class="muted"' in page
    json.loads((tmp_path / "page" / "report.json").read_text(), parse_constant=lambda c: pytest.fail(c))


def test_a_folder_keeps_only_the_current_reports_files_and_the_users_own(nightlies, tmp_path, modelval_data_root):
    store, status = nightlies
    _report(tmp_path, store, status, stimuli=modelval_data_root)
    (tmp_path / "page" / "notes.txt").write_text("mine")
    (tmp_path / "page" / "thumbs" / "mine.png").write_bytes(b"mine")
    record_case(store, "regressed", "night-3", "2026-11-28T02:00:00+00:00", passed=True)
    record_case(store, "broken", "night-3", "2026-11-28T02:01:00+00:00", passed=True)
    report = _report(tmp_path, store, status, stimuli=modelval_data_root)
    assert not any(name.startswith("thumbs/") and name != "thumbs/mine.png" for name in report.data["files"])
    assert sorted(p.name for p in (tmp_path / "page" / "thumbs").iterdir()) == ["mine.png"]
    assert (tmp_path / "page" / "notes.txt").read_text() == "mine"


def test_without_stimuli_the_flips_are_listed_without_thumbnails(nightlies, tmp_path):
    store, status = nightlies
    report = _report(tmp_path, store, status, stimuli=tmp_path / "nowhere")
    regressed = next(c for c in report.data["cases"] if c["model"] == "regressed")
    assert regressed["flipped"]["count"] == len(STIMULI) and report.data["made_thumbnails"] == []
    assert "<img" not in (tmp_path / "page" / "index.html").read_text()


@pytest.mark.parametrize("damage", ["empty", "not sqlite", "foreign table"])
def test_an_empty_or_damaged_run_store_is_one_line(tmp_path, damage):
    path = tmp_path / "runs.sqlite"
    if damage == "not sqlite":
        path.write_text("not a database\n" * 100)
    elif damage == "foreign table":
        with sqlite3.connect(path) as connection:
            connection.execute("CREATE TABLE runs (x)")
            connection.execute("INSERT INTO runs VALUES (1)")
    status = tmp_path / "status.toml"
    status.write_text('[models.a]\n"model/cuda/fp32" = "pass"\n')
    with pytest.raises(DataError) as raised:
        _report(tmp_path, RunStore(path), status)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "page").exists()


def test_a_benchmark_table_in_the_folder_joins_the_page(nightlies, tmp_path, model_vs_human_raw_data,
                                                        modelval_reference_dir, capsys):  # fmt: skip
    from modelval.cli import main

    store, status = nightlies
    sessions = model_vs_human_raw_data / "rotation"
    argv = ["benchmark", "--bootstrap", "200", "--json"]
    for subject, label in (("subject-01", "first"), ("subject-02", "<b>second</b>")):
        argv += ["--decisions", f"{label}={sessions / f'rotation_{subject}_session_1.csv'}"]
    assert main(argv) == 0
    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "benchmark.json").write_text(capsys.readouterr().out)
    report = _report(tmp_path, store, status)
    table = report.data["benchmark"]
    assert sorted(row["observer"] for row in table["rows"]) == ["<b>second</b>", "first"]
    ranks = [row["ranks"]["mean_rank"] for row in table["rows"]]
    assert ranks == sorted(ranks)  # best first
    page = (tmp_path / "page" / "index.html").read_text()
    first = next(row for row in table["rows"] if row["observer"] == "first")
    low, high = first["rank_intervals"]["mean_rank"]
    assert f"{first['ranks']['mean_rank']:.2f} [{low:g}, {high:g}]" in page
    assert f"{first['aggregate']['error_consistency']:.3f} [" in page
    assert "&lt;b&gt;second&lt;/b&gt;" in page and "<b>second" not in page
    assert (tmp_path / "page" / "benchmark.json").is_file()  # the user's file stays

    (tmp_path / "page" / "benchmark.json").write_text("{not json")
    report = _report(tmp_path, store, status)
    assert report.data["benchmark"]["error"].startswith("benchmark.json could not be read as a benchmark table")
    assert "could not be read as a benchmark table" in (tmp_path / "page" / "index.html").read_text()


def test_an_edited_report_json_cannot_make_the_next_report_delete_a_users_file(nightlies, tmp_path):
    store, status = nightlies
    (tmp_path / "page" / "thumbs").mkdir(parents=True)
    mine = tmp_path / "page" / "thumbs" / "holiday.png"
    mine.write_bytes(b"mine")
    (tmp_path / "page" / "report.json").write_text(json.dumps({"files": ["thumbs/holiday.png", "index.html"]}))
    _report(tmp_path, store, status, stimuli=tmp_path / "nowhere")
    assert mine.read_bytes() == b"mine"
