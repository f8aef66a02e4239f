"""Regression baselines: the committed one passes, a preprocessing change is caught and explained."""

import json

import numpy as np
import pytest

from modelval.cli import main
from modelval.errors import DataError
from modelval.judgement.baseline import compare_to_baseline
from modelval.judgement.baseline_file import load_baseline, save_baseline
from modelval.paths import package_data
from modelval.runner.matrix import MAX_BASELINE_FLIPS
from recorded_outputs import NORMALIZATIONS, RECORDED, REGENERATE, recorded_meta

COMMITTED = package_data("baselines/efficientnet_lite0.json")


def test_committed_baseline_format():
    baseline = load_baseline(COMMITTED)
    assert baseline["model"] == "efficientnet_lite0" and baseline["normalization"] == "model"
    assert len(baseline["images"]) == 1280
    first = baseline["images"][0]
    assert set(first) == {"name", "shape", "texture", "decision", "top5"}
    probabilities = [p for _, p in first["top5"]]
    assert len(probabilities) == 5 and probabilities == sorted(probabilities, reverse=True)
    assert first["decision"] == first["top5"][0][0]


@pytest.mark.slow
def test_committed_baseline_still_holds(bundled_evaluations):
    comparison = compare_to_baseline(
        load_baseline(COMMITTED), bundled_evaluations("model"), max_flips=MAX_BASELINE_FLIPS
    )
    assert comparison.passed, comparison.format()
    assert comparison.max_shift < 1e-3


#: How far a recorded probability may be from a fresh forward's. Measured: 0 on the machine that made the file
#: with 1 and 2 torch threads; batch size moves them by up to 1e-7 (the bound of
#: tests/evaluation/test_evaluation.py's batch-size test is 1e-5). A change of the model, its preprocessing or
#: the forward path moves them by far more (the ImageNet normalization by up to 0.5) and flips decisions.
RECORDED_ATOL = 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_the_recorded_outputs_are_the_models(bundled_evaluations, recorded_evaluations, normalization):
    """The file the fast tier reads instead of running the model still equals the model's output: the same
    stimuli in the same order, preprocessing, weights, decisions and shape bias, each probability within
    RECORDED_ATOL of the forward's."""
    real, recorded = bundled_evaluations(normalization), recorded_evaluations(normalization)
    where = RECORDED.relative_to(RECORDED.parents[2])
    how = f"{where} is no longer the model's output; if that is meant, run: {REGENERATE}"
    assert [s.relpath for s in recorded.stimuli] == [s.relpath for s in real.stimuli], how
    assert (recorded.config, recorded.aggregation) == (real.config, real.aggregation), how
    assert recorded_meta()["weights_sha256"] == real.provenance["weights_sha256"], how
    np.testing.assert_allclose(
        recorded.category_probabilities, real.category_probabilities, rtol=0, atol=RECORDED_ATOL, err_msg=how
    )
    assert [d.response for d in recorded.decisions] == [d.response for d in real.decisions], how
    assert recorded.result.to_dict() == real.result.to_dict(), how


def test_preprocessing_change_is_reported_image_by_image(recorded_evaluations):
    # The model's real ImageNet-normalized outputs, recorded (tests/data): the comparison's report is the subject.
    baseline = load_baseline(COMMITTED)
    changed = recorded_evaluations("imagenet")
    comparison = compare_to_baseline(baseline, changed)
    assert not comparison.passed
    decisions_then = {r["name"]: r["decision"] for r in baseline["images"]}
    expected_flips = sum(decisions_then[d.stimulus_name] != d.response for d in changed.decisions)
    assert len(comparison.flips) == expected_flips > 100
    flip = comparison.flips[0]
    assert decisions_then[flip.name] == flip.before != flip.after
    assert comparison.shape_bias_delta == pytest.approx(changed.result.shape_bias - baseline["summary"]["shape_bias"])
    text = comparison.format()
    assert f"{len(comparison.flips)} of 1280 decisions flipped" in text and f"{flip.name}: {flip.before} -> " in text
    assert comparison.largest_shifts[0].delta != 0


def test_cli_save_then_compare_with_a_changed_normalization(stimulus_subset, tmp_path, capsys, recorded_evaluations):
    # On 4 stimuli per category (64): the round trip is the same code as on 1280, and the recorded full-set
    # evaluations (tests/data) give each of these images' decisions (they do not depend on the batch).
    subset = stimulus_subset(4)
    out = tmp_path / "lite0.json"
    common = ["--data-root", str(subset), "--device", "cpu", "--allow-modified-stimuli"]
    assert main(["baseline", "save", "--model", "efficientnet_lite0", "--out", str(out), *common]) == 0
    saved = load_baseline(out)
    assert len(saved["images"]) == 64
    library = {d.imagename: d.response for d in recorded_evaluations("model").decisions}
    assert {r["name"]: r["decision"] for r in saved["images"]} == {
        r["name"]: library[r["name"]] for r in saved["images"]
    }
    capsys.readouterr()
    code = main(["baseline", "compare", str(out), "--normalization", "imagenet", "--json", *common])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["passed"] is False
    wrong = {d.imagename: d.response for d in recorded_evaluations("imagenet").decisions}
    assert report["flipped"] == sum(library[r["name"]] != wrong[r["name"]] for r in saved["images"]) > 0
    assert any("flipped decisions > --max-flips 0" in f for f in report["failures"])
    # the verdict as data: its status and reason, the flips counted by transition (shape -> texture, ...)
    assert report["status"] == "fail" and "flipped decisions > --max-flips 0" in report["reason"]
    flips = report["flips"]
    assert isinstance(flips, dict) and sum(flips["by_transition"].values()) == flips["count"] == report["flipped"]


def test_bad_baseline_files_are_clear_errors(tmp_path, capsys):
    with pytest.raises(DataError, match="not found"):
        load_baseline(tmp_path / "absent.json")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(DataError, match="not a JSON baseline"):
        load_baseline(tmp_path / "broken.json")
    (tmp_path / "other.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(DataError, match="not a modelval baseline"):
        load_baseline(tmp_path / "other.json")
    assert main(["baseline", "compare", str(tmp_path / "other.json")]) == 2
    assert "not a modelval baseline" in capsys.readouterr().err


def test_baseline_of_other_stimuli_is_refused(recorded_evaluations, tmp_path):
    baseline = load_baseline(COMMITTED)
    baseline["images"] = [*baseline["images"][:-1], {**baseline["images"][-1], "name": "cat9-dog9.png"}]
    path = save_baseline(tmp_path / "b.json", baseline)
    with pytest.raises(DataError, match="different stimuli"):
        compare_to_baseline(load_baseline(path), recorded_evaluations("model"))


def test_baseline_of_a_spec_with_a_label_map(stimulus_subset, ten_way_head, tmp_path, capsys):
    from modelval.behaviour.categories import CATEGORIES

    spec = ["--label-map", str(ten_way_head.label_map), "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5"]
    common = ["--data-root", str(stimulus_subset(2)), "--device", "cpu", "--allow-modified-stimuli"]
    out = tmp_path / "ten.json"
    argv = ["baseline", "save", "--model", ten_way_head.spec, "--out", str(out), *spec, *common]
    assert main(argv) == 0
    assert {r["decision"] for r in load_baseline(out)["images"]} <= set(CATEGORIES[:10])
    capsys.readouterr()
    # The baseline names a factory file: it runs only when the model is given again (or with --trust-repo).
    again = ["--model", ten_way_head.spec]
    assert main(["baseline", "compare", str(out), "--json", *again, *spec, *common]) == 0
    assert json.loads(capsys.readouterr().out)["flipped"] == 0
    # The map, mean and std are stored in the baseline (issue 40) and re-applied when not given again.
    assert load_baseline(out)["settings"] == {
        "label_map": str(ten_way_head.label_map), "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]
    }  # fmt: skip
    assert main(["baseline", "compare", str(out), "--trust-repo", "--json", *common]) == 0
    assert json.loads(capsys.readouterr().out)["flipped"] == 0
    # A recorded map that is gone: one line, exit 2, as the flag's would be.
    ten_way_head.label_map.unlink()
    assert main(["baseline", "compare", str(out), "--trust-repo", *common]) == 2
    err = capsys.readouterr().err
    assert str(ten_way_head.label_map) in err and len(err.strip().splitlines()) == 1


# --- a baseline is data: the code its "model" names runs only with consent (issue 23) -------------------

FACTORY_WITH_A_SIDE_EFFECT = """
import pathlib
pathlib.Path(__file__).with_name("ran.txt").write_text("the baseline's code ran")
import torch
def make():
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 1000))
"""


@pytest.mark.parametrize("model", ["{folder}/nets.py:make", "nets_module_of_a_baseline:make", "this:s"])
def test_a_baseline_naming_code_runs_nothing_without_consent(model, tmp_path, capsys):
    (tmp_path / "nets.py").write_text(FACTORY_WITH_A_SIDE_EFFECT)
    (tmp_path / "nets_module_of_a_baseline.py").write_text(FACTORY_WITH_A_SIDE_EFFECT)
    spec = model.format(folder=tmp_path)
    baseline = {**load_baseline(COMMITTED), "model": spec}
    path = save_baseline(tmp_path / "shared-baseline.json", baseline)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(tmp_path))
        assert main(["baseline", "compare", str(path), "--data-root", str(tmp_path / "no-stimuli")]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and f"baseline {path}: its model {spec!r} runs" in err
    assert f"pass --model {spec} to run it" in err and "--trust-repo" in err
    assert not (tmp_path / "ran.txt").exists()  # nothing was imported, let alone called
    assert "Beautiful is better than ugly" not in captured.out  # `import this` never ran either


def test_a_baseline_hub_model_needs_the_same_consent(tmp_path):
    from modelval.errors import ModelvalError
    from modelval.judgement.baseline_file import baseline_model

    baseline = {**load_baseline(COMMITTED), "model": "hub:someone/repo/entry"}
    with pytest.raises(ModelvalError, match=r"runs the Python code of github.com/someone/repo in this process"):
        baseline_model(baseline, "b.json")
    # consent: the model given again on the command line, or --trust-repo
    assert baseline_model(baseline, "b.json", model="efficientnet_lite0") == "efficientnet_lite0"
    assert baseline_model(baseline, "b.json", trust_code=True) == "hub:someone/repo/entry"
    # names that run no code of the file's choosing need none
    for spec in ("efficientnet_lite0", "timm:resnet18.a1_in1k", "hf:facebook/deit-tiny-patch16-224"):
        assert baseline_model({**baseline, "model": spec}, "b.json") == spec


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"images": "oops"}, r'"images" must be a non-empty list of per-image records, got str'),
        ({"images": [1, 2]}, r'"images"\[0\] must be an object'),
        ({"model": ["a", "b"]}, r'"model" must be a non-empty string, got list'),
        ({"summary": []}, r'"summary" must be an object'),
        ({"summary": {"shape_bias": "high"}}, r'"summary.shape_bias" must be a number or null'),
        ({"images": [{"name": "a.png", "decision": "cat", "top5": "cat"}]}, r'"images"\[0\].top5 must be a list'),
        ({"images": [{"name": "a.png", "decision": "kitten", "top5": []}]}, r"'kitten' is not one of the 16"),
        ({"images": [{"name": "a.png", "decision": "cat", "top5": [["cat", "high"]]}]}, r"top5 must be a list"),
    ],
)
def test_baseline_fields_of_the_wrong_type_are_one_line_naming_the_field(change, message, tmp_path, capsys):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({**load_baseline(COMMITTED), **change}))
    with pytest.raises(DataError, match=message):
        load_baseline(path)
    assert main(["baseline", "compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"modelval: error: {path}: ") and err.count("\n") == 1


# --- issue 40: a baseline re-applies what it recorded, and says what differs ---------------------------------------


def test_a_baseline_re_applies_its_input_size_and_an_old_one_names_it(stimulus_subset, tmp_path, capsys):
    subset = stimulus_subset(2)
    out = tmp_path / "lite0-240.json"
    common = ["--data-root", str(subset), "--device", "cpu", "--allow-modified-stimuli"]
    assert main(["baseline", "save", "--model", "efficientnet_lite0", "--input-size", "240", "--out", str(out),
                 *common]) == 0  # fmt: skip
    saved = load_baseline(out)
    assert saved["settings"] == {"input_size": 240} and saved["preprocessing"]["input_size"] == 240
    capsys.readouterr()
    # compared plainly: run at 240 again (it ran at 224 before: 252 of 1280 decisions flipped, FAIL)
    assert main(["baseline", "compare", str(out), *common]) == 0
    text = capsys.readouterr().out
    assert "0 of 32 decisions flipped" in text and "preprocessing against the baseline: the same" in text
    # given again with another value: an override, said so, and the difference named
    code = main(["baseline", "compare", str(out), "--input-size", "224", "--json", *common])
    report = json.loads(capsys.readouterr().out)
    assert report["overrides"] == {"input_size": [240, 224]}
    assert report["preprocessing_changes"] == {"input_size": [240, 224]}
    assert code == 1 and "the preprocessing differs from the baseline's: input_size 240 -> 224" in report["reason"]
    # a baseline made before settings were recorded: the difference is the reason of its failure, in one line
    old = {key: value for key, value in saved.items() if key != "settings"}
    save_baseline(tmp_path / "old.json", old)
    assert main(["baseline", "compare", str(tmp_path / "old.json"), *common]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "preprocessing against the baseline: input_size 240 -> none"  # none: the 224 px as they are
    assert lines[-1].startswith("FAIL: ") and lines[-1].endswith("differs from the baseline's: input_size 240 -> none")


def test_the_recorded_settings_are_checked_like_flags(tmp_path, capsys):
    baseline = load_baseline(COMMITTED)
    for settings, message in [
        ({"device": "cuda"}, '"settings" must be an object of checkpoint'),
        ({"input_size": True}, '"settings".input_size must be a string, a number or a list'),
    ]:
        save_baseline(tmp_path / "bad.json", {**baseline, "settings": settings})
        with pytest.raises(DataError, match=message):
            load_baseline(tmp_path / "bad.json")
    save_baseline(tmp_path / "bad.json", {**baseline, "settings": {"input_size": 5}})
    assert main(["baseline", "compare", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert '"settings".input_size \'5\': ' in err and "16 to 4096" in err and len(err.strip().splitlines()) == 1


def test_preprocessing_changes_name_each_field():
    from modelval.judgement.baseline import preprocessing_changes

    before = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bicubic", "input_size": 224}
    assert preprocessing_changes(before, {**before, "mean": [0.5000000001, 0.5, 0.5]}) == {}
    changed = {**before, "mean": [0.485, 0.456, 0.406], "interpolation": "bilinear"}
    assert preprocessing_changes(before, changed) == {
        "mean": ([0.5, 0.5, 0.5], [0.485, 0.456, 0.406]), "interpolation": ("bicubic", "bilinear")
    }  # fmt: skip
    assert preprocessing_changes(None, changed) == {}


def test_the_committed_baseline_names_a_preprocessing_it_was_not_made_with():
    from modelval.behaviour.decisions import read_decisions
    from modelval.judgement.committed import committed_baseline

    same = read_decisions(package_data("baselines/efficientnet_lite0.csv"))
    made = load_baseline(COMMITTED)["preprocessing"]
    relpath, protocol = "baselines/efficientnet_lite0.csv", {"normalization": "model"}
    assert committed_baseline(relpath, same, protocol, preprocessing=made).applies
    other = committed_baseline(relpath, same, protocol, preprocessing={**made, "input_size": 240})
    assert not other.applies and other.why_not == "its preprocessing differs from this run's: input_size none -> 240"
