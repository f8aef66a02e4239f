"""Prediction JSONL artifacts (seed 001): reading rules, artifact-folder dedupe, summary."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from modelval.errors import DataError
from modelval.metrics.artifacts import (
    discover_prediction_files,
    evaluate_file,
    evaluate_paths,
    parse_artifact_dir,
    summarize,
    write_summary_csv,
)
from modelval.metrics.calibration import expected_calibration_error
from modelval.metrics.io import read_predictions


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def rows_for(conf: list[float], correct: list[int]) -> list[dict]:
    return [
        {"label": 1, "pred": 1 if c else 0, "conf": x, "guid": i}
        for i, (x, c) in enumerate(zip(conf, correct, strict=True))
    ]


CONF = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 0.6, 0.9, 0.3]
CORRECT = [0, 1, 0, 1, 1, 1, 0, 1, 1, 0]  # ECE 0.26 with 4 (lo, hi] bins, 0.22 under torchmetrics


class TestParse:
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("preds-kerala_floods_2018-lb25-set1-seed42-v003", ("kerala_floods_2018", 25, 1, 42, 3)),
            ("preds-hurricane-harvey-2017-lb5-set3-seed1-v12", ("hurricane-harvey-2017", 5, 3, 1, 12)),
            ("preds-x-lb100-set2-seed0:v7", ("x", 100, 2, 0, 7)),
        ],
    )
    def test_names(self, name, expected):
        key = parse_artifact_dir(name)
        assert key is not None
        assert (key.event, key.label_budget, key.set, key.seed, key.version) == expected

    @pytest.mark.parametrize("name", ["preds-x-lb-set1-seed1-v1", "model-x-lb5-set1-seed1-v1", "preds-x-lb5-set1-v1"])
    def test_non_matching(self, name):
        assert parse_artifact_dir(name) is None


class TestReadRows:
    def test_extra_keys_ignored_and_ece_matches_core(self, tmp_path):
        path = write_jsonl(tmp_path / "p.jsonl", rows_for(CONF, CORRECT))
        record = evaluate_file(path, n_bins=4)
        assert record.rows_used == 10 and record.rows_dropped == 0 and not record.skipped
        assert record.ece == pytest.approx(0.26)
        assert record.ece == pytest.approx(expected_calibration_error(CONF, CORRECT, 4))
        assert evaluate_file(path, n_bins=4, convention="torchmetrics").ece == pytest.approx(0.22, abs=1e-6)

    def test_no_conf_in_first_row_skips_the_file(self, tmp_path):
        path = write_jsonl(tmp_path / "p.jsonl", ["", {"label": 1, "pred": 1}, {"label": 1, "pred": 1, "conf": 0.9}])
        data = read_predictions(path)
        assert data.skipped and "no 'conf' key in the first row" in data.reason
        assert data.rows_used == 0  # never repaired from later rows

    def test_malformed_rows_dropped_and_counted(self, tmp_path):
        rows = [
            *rows_for([0.9, 0.8], [1, 1]),
            "{not json",
            "[1, 2, 3]",
            {"label": 1, "pred": 1},
            {"label": 1, "pred": 1, "conf": 1.5},
            {"label": 1, "pred": 1, "conf": -0.1},
            '{"label": 1, "pred": 1, "conf": NaN}',
            {"label": "1", "pred": 1, "conf": 0.5},
            {"label": 1, "pred": True, "conf": 0.5},
            {"label": 1, "pred": 1, "conf": "0.5"},
            "",
        ]
        data = read_predictions(write_jsonl(tmp_path / "p.jsonl", rows))
        assert data.rows_used == 2 and data.rows_dropped == 9
        assert data.drop_reasons == {
            "invalid JSON": 1,
            "not a JSON object": 1,
            "missing conf": 1,
            "conf outside [0, 1]": 2,
            "conf is NaN": 1,
            "label not a non-negative integer": 1,
            "pred not a non-negative integer": 1,
            "conf not a number": 1,
        }

    def test_strict_raises_with_line_number(self, tmp_path):
        path = write_jsonl(tmp_path / "p.jsonl", [*rows_for([0.9], [1]), {"label": 1, "pred": 1, "conf": 2}])
        with pytest.raises(DataError, match=r"p\.jsonl:2: conf outside \[0, 1\]"):
            read_predictions(path, strict=True)

    def test_empty_and_all_bad_files_are_skipped(self, tmp_path):
        assert read_predictions(write_jsonl(tmp_path / "e.jsonl", [""])).reason == "empty file (no rows)"
        bad = read_predictions(write_jsonl(tmp_path / "b.jsonl", [{"label": 1, "pred": 1, "conf": 3}]))
        assert bad.skipped and bad.reason == "no valid rows (1 dropped)"

    def test_missing_file(self, tmp_path):
        with pytest.raises(DataError, match="not found"):
            read_predictions(tmp_path / "nope.jsonl")

    def test_without_conf_for_accuracy_metrics(self, tmp_path):
        path = write_jsonl(tmp_path / "p.jsonl", [{"label": 1, "pred": 0}, {"label": 2, "pred": 2}])
        data = read_predictions(path, require_conf=False)
        assert data.rows_used == 2 and data.labels.tolist() == [1, 2] and np.isnan(data.conf).all()


def build_tree(root: Path) -> Path:
    """Artifact tree with the cases seed 001 describes."""
    good = rows_for(CONF, CORRECT)
    all_right = rows_for([0.9] * 4, [1] * 4)  # ECE 0.1
    # two versions of the same set: the newer one (v010, numeric not lexical) must win
    write_jsonl(root / "preds-flood-lb25-set1-seed42-v002" / "preds.jsonl", good)
    write_jsonl(root / "preds-flood-lb25-set1-seed42-v010" / "preds.jsonl", all_right)
    write_jsonl(root / "preds-flood-lb25-set2-seed42-v001" / "preds.jsonl", good)
    # budgets 5 < 25 < 100 numerically
    write_jsonl(root / "preds-flood-lb100-set1-seed42-v001" / "preds.jsonl", all_right)
    write_jsonl(root / "preds-flood-lb5-set1-seed42-v001" / "preds.jsonl", good)
    # newest version has no conf: the older usable version is taken, the newer one reported as skipped
    write_jsonl(root / "preds-ablaze-lb5-set1-seed1-v001" / "preds.jsonl", good)
    write_jsonl(root / "preds-ablaze-lb5-set1-seed1-v002" / "preds.jsonl", [{"label": 0, "pred": 0}])
    return root


class TestTree:
    def test_dedupe_sort_and_skips(self, tmp_path):
        records = evaluate_paths([build_tree(tmp_path)], n_bins=4)
        summary = [
            (r.key.event, r.key.label_budget, r.key.set, r.key.version, r.skipped, r.ece and round(r.ece, 6))
            for r in records
        ]
        assert summary == [
            ("ablaze", 5, 1, 2, True, None),
            ("ablaze", 5, 1, 1, False, 0.26),
            ("flood", 5, 1, 1, False, 0.26),
            ("flood", 25, 1, 10, False, 0.1),
            ("flood", 25, 1, 2, True, None),
            ("flood", 25, 2, 1, False, 0.26),
            ("flood", 100, 1, 1, False, 0.1),
        ]
        by_version = {(r.key.event, r.key.version): r for r in records}
        assert "no 'conf'" in by_version[("ablaze", 2)].reason
        assert by_version[("flood", 2)].reason == "superseded by version 10 (seed 42) of this set"

    def test_deterministic_under_input_order(self, tmp_path):
        root = build_tree(tmp_path)
        a = [r.to_json() for r in evaluate_paths([root])]
        b = [r.to_json() for r in evaluate_paths(sorted(root.iterdir(), reverse=True))]
        assert a == b

    def test_ambiguous_folder(self, tmp_path):
        folder = tmp_path / "preds-x-lb5-set1-seed1-v001"
        write_jsonl(folder / "a.jsonl", rows_for(CONF, CORRECT))
        write_jsonl(folder / "b.jsonl", rows_for(CONF, CORRECT))
        records = evaluate_paths([tmp_path])
        assert all(r.skipped and r.reason.startswith("ambiguous: 2 eligible") for r in records)

    def test_summary_and_csv(self, tmp_path):
        records = evaluate_paths([build_tree(tmp_path / "tree")], n_bins=4)
        summary = summarize(records)
        assert summary.sets == [1, 2]
        assert [(r["event"], r["label_budget"]) for r in summary.rows] == [
            ("ablaze", 5),
            ("flood", 5),
            ("flood", 25),
            ("flood", 100),
        ]
        assert summary.set_means[1] == pytest.approx((0.26 + 0.26 + 0.1 + 0.1) / 4)
        assert summary.set_means[2] == pytest.approx(0.26)
        assert summary.mean_of_sets == pytest.approx((summary.set_means[1] + 0.26) / 2)
        flood25 = summary.rows[2]
        assert flood25["ece_mean"] == pytest.approx((0.1 + 0.26) / 2)
        out = write_summary_csv(summary, tmp_path / "out" / "ece.csv")
        rows = list(csv.DictReader(out.open()))
        assert list(rows[0]) == ["event", "label_budget", "ece_set1", "ece_set2", "ece_mean"]
        assert rows[0]["ece_set2"] == ""  # ablaze has no set 2
        assert float(rows[2]["ece_set1"]) == pytest.approx(0.1)
        assert rows[-1]["event"] == "mean" and float(rows[-1]["ece_mean"]) == pytest.approx(summary.mean_of_sets)

    def test_discovery_errors_and_overlap(self, tmp_path):
        with pytest.raises(DataError, match="no such file or directory"):
            discover_prediction_files([tmp_path / "missing"])
        f = write_jsonl(tmp_path / "d" / "a.jsonl", rows_for([0.5], [1]))
        assert discover_prediction_files([tmp_path, f]) == [f]
