"""Tables, report files and plots from real results (published decisions and the bundled model)."""

import csv
import json

import pytest
from PIL import Image

from modelval import jsonio
from modelval.behaviour.decisions import read_decisions
from modelval.behaviour.shape_bias import compute_shape_bias
from modelval.judgement.expected import expected_for
from modelval.judgement.rows import ReportRow, format_markdown, format_report
from modelval.judgement.verdicts import Case, judge
from modelval.runner.reports import _write_reports, write_validation_reports


@pytest.fixture(scope="module")
def published_row(resnet50_reference_csv):
    decisions = read_decisions(resnet50_reference_csv)
    result = compute_shape_bias(decisions)
    expected = expected_for("resnet50_in")
    row = ReportRow("resnet50_in", "ResNet-50 (IN)", "decision file", "n/a", result, expected)
    row.verdict = judge(Case("resnet50_in", result, decisions, expected))
    return row


def test_row_compares_with_the_sourced_expected_value(published_row):
    assert published_row.difference == pytest.approx(162 / 734 - 0.2139)
    assert published_row.final_verdict.text == "PASS"
    record = published_row.to_dict()
    assert (record["passed"], record["status"], record["reason"], record["verdict"]) == (True, "pass", "", "PASS")
    assert record["expected"] == 0.2139 and record["tolerance"] == 0.015
    assert "texture-vs-shape README" in record["expected_source"]


def test_report_text_has_every_part(published_row):
    text = format_report([published_row])
    for part in ("SHAPE BIAS COMPARISON", "DETAILED BREAKDOWN", "Per shape category", "22.07%", "+0.68 pp", "clock"):
        assert part in text


def test_written_reports_round_trip(published_row, tmp_path):
    json_path, csv_path, md_path = _write_reports([published_row], tmp_path)
    (record,) = json.loads(json_path.read_text())
    assert (record["shape_hits"], record["texture_hits"], record["verdict"]) == (162, 572, "PASS")
    (row,) = list(csv.DictReader(csv_path.open()))
    assert row["model"] == "resnet50_in" and float(row["shape_bias"]) == pytest.approx(0.2207, abs=1e-4)
    assert "per_category" not in row
    assert md_path.read_text() == format_markdown([published_row])
    assert "| ResNet-50 (IN) | decision file | n/a | 22.07% | 21.39% | +0.68 pp | PASS |" in md_path.read_text()


@pytest.mark.slow
def test_validation_report_directory(bundled_evaluations, tmp_path):
    evaluations = {("efficientnet_lite0", n): bundled_evaluations(n) for n in ("model", "imagenet")}
    rows = [
        ReportRow("efficientnet_lite0", "EfficientNet-Lite0", "pypi", n, e.result) for (_, n), e in evaluations.items()
    ]
    written = write_validation_reports(rows, evaluations, tmp_path)
    names = sorted(str(p.relative_to(tmp_path)) for p in written)
    assert names == [
        "decisions/efficientnet_lite0__imagenet.csv",
        "decisions/efficientnet_lite0__model.csv",
        "plots/efficientnet_lite0.png",
        "shape_bias.csv",
        "shape_bias.json",
        "shape_bias.md",
        "written.json",
    ]
    decisions = read_decisions(tmp_path / "decisions" / "efficientnet_lite0__model.csv")
    assert [d.response for d in decisions] == [
        d.response for d in evaluations[("efficientnet_lite0", "model")].decisions
    ]
    with Image.open(tmp_path / "plots" / "efficientnet_lite0.png") as image:
        assert image.format == "PNG" and image.size[0] > 400


def test_written_json_is_strict_when_the_shape_bias_is_undefined(tmp_path):
    # A model that never answers shape or texture: shape bias 0/0, so its difference from the expected
    # value is NaN as well; json.dumps wrote a bare NaN there. The report says null and why.
    from modelval.behaviour.decisions import Decision

    decisions = [Decision(f"cat{i}-bear{i}.png", "cat", "bear", "boat") for i in range(20)]
    result = compute_shape_bias(decisions, n_bootstrap=0)
    row = ReportRow("resnet50_in", "ResNet-50 (IN)", "test", "model", result, expected_for("resnet50_in"))
    json_path, _, _ = _write_reports([row], tmp_path)
    (record,) = json.loads(json_path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert record["shape_bias"] is None
    assert record["difference"] is None and record["null_reasons"]["difference"]


@pytest.mark.parametrize("model", ["../../escaped", "/tmp/absolute", "sub/dir", "../../../../../etc/escaped"])
def test_the_report_writer_refuses_a_model_id_that_is_a_path(model, tmp_path):
    """The models file refuses such ids; the writer refuses them too, before it writes anything."""
    from modelval.behaviour.decisions import Decision
    from modelval.errors import DataError
    from modelval.evaluation import Evaluation
    from modelval.preprocessing import PreprocessConfig

    decisions = [Decision(f"cat{i}-bear{i}.png", "cat", "bear", "cat") for i in range(4)]
    result = compute_shape_bias(decisions, n_bootstrap=0)
    evaluation = Evaluation(model, PreprocessConfig(), "mean", [], None, decisions, result)  # type: ignore[arg-type]
    row = ReportRow(model, model, "test", "model", result)
    reports = tmp_path / "reports" / "inner"
    with pytest.raises(DataError, match=r"refusing to write .*(plain name|outside the report folder)"):
        write_validation_reports([row], {(model, "model"): evaluation}, reports)
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").rglob("*.*"))
    assert not any(p.name.startswith("escaped") for p in tmp_path.rglob("*"))


def test_a_second_run_into_the_same_folder_leaves_only_its_own_files(tmp_path):
    """Was: the first run's decision files and plots stayed beside a summary that no longer listed them. Files
    modelval did not write are never touched."""
    from modelval.behaviour.decisions import Decision
    from modelval.evaluation import Evaluation
    from modelval.preprocessing import PreprocessConfig

    decisions = [Decision(f"cat{i}-bear{i}.png", "cat", "bear", "cat") for i in range(4)]
    result = compute_shape_bias(decisions, n_bootstrap=0)

    def run(models):
        rows = [ReportRow(m, m, "test", "model", result) for m in models]
        evaluations = {(m, "model"): Evaluation(m, PreprocessConfig(), "mean", [], None, decisions, result)
                       for m in models}  # type: ignore[arg-type]  # fmt: skip
        return write_validation_reports(rows, evaluations, tmp_path)

    run(["a", "b"])
    (tmp_path / "mine.txt").write_text("the user's\n")
    written = run(["a"])
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == sorted([*(str(p.relative_to(tmp_path)) for p in written), "mine.txt"])
    assert not (tmp_path / "decisions" / "b__model.csv").exists() and not (tmp_path / "plots" / "b.png").exists()
    assert json.loads((tmp_path / "written.json").read_text())["files"] == sorted(
        str(p.relative_to(tmp_path)) for p in written if p.name != "written.json"
    )


# --- issue 32, point 5: an n/a Expected value says why, and the committed baseline stands in where it applies ---


def _lite0_row(decisions, protocol):
    from modelval.judgement.committed import committed_baseline
    from modelval.judgement.verdicts import MAX_BASELINE_FLIPS

    expected = expected_for("efficientnet_lite0")
    assert expected is not None and expected.value is None and expected.baseline
    result = compute_shape_bias(decisions, n_bootstrap=0)
    row = ReportRow("efficientnet_lite0", expected.label, "pypi", "model (half)", result, expected)
    row.baseline = committed_baseline(expected.baseline, decisions, protocol, max_flips=MAX_BASELINE_FLIPS)
    row.verdict = judge(Case("efficientnet_lite0", result, decisions, expected, baseline=row.baseline))
    return row


def _committed_lite0():
    from modelval.paths import package_data

    return read_decisions(package_data("baselines/efficientnet_lite0.csv"))


def test_the_bundled_model_is_compared_with_its_committed_baseline():
    row = _lite0_row(_committed_lite0(), {"normalization": "model", "resize": "none", "aggregation": "mean"})
    text = format_report([row])
    (line,) = [line for line in text.splitlines() if line.startswith("EfficientNet-Lite0 (PyPI)  pypi")]
    assert "23.94%      23.94% (baseline)  0.00 pp     BASELINE (0 flips)" in line
    assert "no published value of its shape bias; compared with its committed baseline " in text
    assert "0 of 1280 decisions differ (allowed 3), baseline shape bias 23.94%" in text
    record = json.loads(jsonio.dumps(row.to_dict()))
    assert record["expected"] is None and "no published value" in record["null_reasons"]["expected"]
    assert record["baseline"]["flips"] == 0 and record["baseline"]["shape_bias"] == pytest.approx(197 / 823)
    assert record["verdict"] == "BASELINE (0 flips)"


def test_flips_against_the_baseline_fail_its_verdict():
    from modelval.behaviour.decisions import Decision

    decisions = _committed_lite0()
    changed = [i for i, d in enumerate(decisions) if d.response != d.shape][:5]
    for i in changed:  # five decisions that were not shape hits become shape hits
        d = decisions[i]
        decisions[i] = Decision(d.imagename, d.shape, d.texture, d.shape)
    row = _lite0_row(decisions, {"normalization": "model"})
    assert row.final_verdict.text == "BASELINE FAIL (5 flips > 3)"
    flips = row.final_verdict.flips
    assert flips is not None and (flips.count, flips.allowed) == (5, 3)
    assert sum(flips.by_transition.values()) == 5 and all(k.endswith("-> shape") for k in flips.by_transition)
    assert row.baseline_difference == pytest.approx(compute_shape_bias(decisions, n_bootstrap=0).shape_bias - 197 / 823)


def test_a_baseline_of_another_protocol_is_not_compared_and_the_table_says_why():
    row = _lite0_row(_committed_lite0(), {"normalization": "imagenet"})
    text = format_report([row])
    assert "no published value  n/a         n/a" in text
    assert "does not apply: it was made with normalization model, this run used imagenet" in text
    assert row.final_verdict.text == "n/a" and row.final_verdict.status == "n/a"


def test_a_row_with_a_published_value_gets_no_note(published_row):
    assert published_row.why_no_expected() is None
    assert "no published value" not in format_report([published_row])


def test_the_case_normalization_is_data_beside_the_shown_text():
    """The runner's rows carry the case they asked for; nothing splits ``model (half)`` to find it."""
    result = compute_shape_bias(_committed_lite0(), n_bootstrap=0)
    asked = ReportRow("m", "M", "test", "model (half)", result, normalization_case="model")
    plain = ReportRow("m", "M", "test", "imagenet", result)
    assert (asked.normalization_case, asked.to_dict()["normalization_case"]) == ("model", "model")
    assert asked.to_dict()["normalization"] == "model (half)"
    assert plain.normalization_case == "imagenet"


def test_a_models_files_own_baseline_is_named_by_its_own_path(resnet50_reference_csv, tmp_path):
    """Issue 42: the note printed src/modelval/data/<the absolute path of the user's baseline>."""
    import dataclasses

    decisions = read_decisions(resnet50_reference_csv)
    lite0 = expected_for("efficientnet_lite0")
    assert lite0 is not None
    mine = dataclasses.replace(lite0, baseline=str(tmp_path / "mine.csv"))
    row = ReportRow("mine", "mine", "models file", "model", compute_shape_bias(decisions, n_bootstrap=0), mine)
    note = row.why_no_expected()
    assert note is not None and note.endswith(f"its baseline is {tmp_path / 'mine.csv'}")
    assert "src/modelval/data" not in note
    row = ReportRow("lite0", "lite0", "pypi", "model", compute_shape_bias(decisions, n_bootstrap=0), lite0)
    committed = "its committed baseline is src/modelval/data/baselines/efficientnet_lite0.csv"
    assert (row.why_no_expected() or "").endswith(committed)
