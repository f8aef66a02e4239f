"""The preprocessing self-check (issue 40): the declared preprocessing against its near alternatives, no reference.

The real ports of the issue (the bundled Lite0 declared with ImageNet's mean/std, and fed BGR) run in the slow tier;
here the test's arithmetic is checked by hand, and the sequential logic with scripted answers.
"""

from __future__ import annotations

from math import comb
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelval.behaviour.decisions import Decision
from modelval.judgement import preprocessing_check as check_module
from modelval.judgement.preprocessing_check import (
    ALPHA,
    Alternative,
    PreprocessingCheck,
    alternatives_of,
    mcnemar_better,
    preprocessing_check,
)
from modelval.judgement.verdicts import Case, judge
from modelval.models.efficientnet import LITE0_PREPROCESS
from modelval.preprocessing import IMAGENET_MEAN, IMAGENET_STD

PORTS = '''
import torch
from modelval.api.loading import load
from modelval.models.efficientnet import LITE0_PREPROCESS
from modelval.preprocessing import IMAGENET_MEAN, IMAGENET_STD, PreprocessConfig


class BGR(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x.flip(1))


def imagenet_port():  # the weights want 0.5/0.5
    return load("efficientnet_lite0")[0].model, PreprocessConfig(IMAGENET_MEAN, IMAGENET_STD, "bicubic")


def bgr_port():  # the right config, but the wrapper reverses the channels
    return BGR(load("efficientnet_lite0")[0].model), LITE0_PREPROCESS
'''


def test_the_one_sided_mcnemar_p_is_the_binomial_tail():
    # P(X >= k), X ~ Bin(k + worse, 1/2), by hand
    assert mcnemar_better(3, 0) == pytest.approx(1 / 8)
    assert mcnemar_better(5, 1) == pytest.approx((comb(6, 5) + comb(6, 6)) / 64)
    assert mcnemar_better(0, 4) == pytest.approx(1.0)
    assert mcnemar_better(0, 0) == 1.0  # nothing discordant: no evidence either way


def test_the_alternatives_are_the_near_ones_of_the_declared_preprocessing():
    found = {(factor, name): (config, reverse) for factor, name, config, reverse in alternatives_of(LITE0_PREPROCESS)}
    assert set(found) == {("channel order", "BGR"), ("normalization", "imagenet"), ("value range", "[0, 255]")}
    assert found["channel order", "BGR"] == (LITE0_PREPROCESS, True)  # the same config, channels reversed
    imagenet, _ = found["normalization", "imagenet"]
    assert (imagenet.mean, imagenet.std, imagenet.interpolation) == (IMAGENET_MEAN, IMAGENET_STD, "bicubic")
    wide, _ = found["value range", "[0, 255]"]
    # (255 x - m) / s == (x - m / 255) / (s / 255): pixels in [0, 255], the same arithmetic
    assert wide.mean == pytest.approx(tuple(m / 255 for m in LITE0_PREPROCESS.mean))
    assert wide.std == pytest.approx(tuple(s / 255 for s in LITE0_PREPROCESS.std))


def _scripted(monkeypatch, stimulus_subset, declared_hits_every: int, hits_of: dict[str, bool]):
    """A check whose answers are scripted: the declared hits every n-th conflict stimulus; alternative ``name``
    always hits (``True``) or never does."""
    from modelval.datasets.stimulus_set import StimulusSet

    stimuli = StimulusSet.load(stimulus_subset(4), allow_modified=True, progress=False, decode=False)
    def miss(s):
        return next(c for c in ("airplane", "bear", "bicycle") if c not in (s.shape, s.texture))

    responses = [s.shape if i % declared_hits_every == 0 else miss(s) for i, s in enumerate(stimuli.stimuli)]
    decisions = [Decision(s.name, s.shape, s.texture, r) for s, r in zip(stimuli.stimuli, responses, strict=True)]
    calls: list[tuple[str, int]] = []

    def answers(model, pixels, config, forward):
        name = "imagenet" if config.mean == IMAGENET_MEAN else "[0, 255]" if config.mean[0] < 0.01 else "BGR"
        calls.append((name, len(pixels)))
        asked = [stimuli.stimuli[i] for i in positions.pop(0)]
        return [s.shape if hits_of[name] else miss(s) for s in asked]

    positions: list[list[int]] = []
    real_pixels = stimuli.pixels_of

    def pixels_of(indices):
        positions.append(list(indices))
        return real_pixels(indices)

    monkeypatch.setattr(stimuli, "pixels_of", pixels_of)
    monkeypatch.setattr(check_module, "_answers", answers)
    return stimuli, SimpleNamespace(decisions=decisions, provenance={}, output_cache="off"), calls


def test_an_alternative_that_answers_better_is_suspect_and_the_others_stop_at_the_first_look(
    monkeypatch, stimulus_subset
):
    stimuli, evaluation, calls = _scripted(monkeypatch, stimulus_subset, 2, {"BGR": True, "imagenet": False,
                                                                             "[0, 255]": False})  # fmt: skip
    result = preprocessing_check("model", LITE0_PREPROCESS, stimuli, evaluation)  # type: ignore[arg-type]
    assert result is not None
    bgr, imagenet, wide = result.alternatives
    conflicts = sum(s.shape != s.texture for s in stimuli.stimuli)  # 59 of the 64
    assert (bgr.stimuli, bgr.hits, bgr.worse) == (conflicts, conflicts, 0) and bgr.suspect
    assert bgr.better == conflicts - bgr.declared_hits and bgr.p_value == pytest.approx(0.5**bgr.better)
    assert not imagenet.suspect and not wide.suspect and imagenet.hits == wide.hits == 0
    assert result.suspect is bgr and result.threshold == pytest.approx(ALPHA / (1 * 3))  # one look: all 59
    assert result.images_forwarded == 3 * conflicts and [n for _, n in calls] == [conflicts] * 3
    assert result.headline().startswith("SUSPECT PREPROCESSING: channel order: BGR answers 100.0% [")
    record = result.to_dict()
    assert record["passed"] is False and record["status"] == "suspect" and record["alternatives"][0]["suspect"]


def test_a_declared_preprocessing_that_answers_best_passes(monkeypatch, stimulus_subset):
    stimuli, evaluation, _ = _scripted(monkeypatch, stimulus_subset, 1, {"BGR": False, "imagenet": False,
                                                                         "[0, 255]": False})  # fmt: skip
    result = preprocessing_check("model", LITE0_PREPROCESS, stimuli, evaluation)  # type: ignore[arg-type]
    assert result is not None and result.suspect is None and not any(a.suspect for a in result.alternatives)
    assert result.to_dict()["passed"] is True and "answers at least as well as BGR" in result.headline()


def _decisions(hits: int, total: int) -> list[Decision]:
    return [Decision(f"airplane{i}-bear{i}.png", "airplane", "bear", "airplane" if i < hits else "knife")
            for i in range(total)]  # fmt: skip


def test_the_judge_fails_a_suspect_case_with_both_accuracies_and_their_intervals():
    from modelval.behaviour.shape_bias import compute_shape_bias

    decisions = _decisions(60, 100)
    suspect = Alternative("channel order", "BGR", 100, 60, 75, 20, 5, mcnemar_better(20, 5), True)
    check = PreprocessingCheck("RGB, [0, 1], half", (suspect,), ALPHA / 3, 100)
    verdict = judge(Case("port", compute_shape_bias(decisions, n_bootstrap=0), decisions, preprocessing=check))
    assert (verdict.status, verdict.passed, verdict.text) == ("suspect", False, "SUSPECT PREPROCESSING (channel order)")
    assert verdict.reason.startswith("channel order: BGR answers 75.0% [") and "the declared preprocessing 60.0% [" in (
        verdict.reason
    )


def test_a_wrong_normalization_that_answers_better_fails_instead_of_passing():
    from modelval.behaviour.shape_bias import compute_shape_bias

    own, other = _decisions(500, 1000), _decisions(600, 1000)

    def case(decisions):
        return Case("port", compute_shape_bias(decisions, n_bootstrap=0), decisions, role="wrong",
                    normalization="half", correct=(compute_shape_bias(own, n_bootstrap=0), own))  # fmt: skip

    better = judge(case(other))
    assert (better.status, better.passed) == ("suspect", False) and better.text.startswith("SUSPECT PREPROCESSING (")
    assert "the half normalization answers better than the model's own (cue-conflict accuracy 60.0% against 50.0%" in (
        better.reason
    )
    worse = judge(case(_decisions(400, 1000)))
    assert (worse.status, worse.passed) == ("detected", True)


@pytest.mark.slow  # two full runs of the bundled model and their checks
@pytest.mark.parametrize(("port", "factor", "name"), [("imagenet_port", "normalization", "half"),
                                                       ("bgr_port", "channel order", "BGR")])  # fmt: skip
def test_the_two_ports_fail_without_any_baseline(
    port, factor, name, tmp_path: Path, modelval_data_root, capsys, bundled_forward
):
    import contextlib
    import json

    from modelval.cli import main

    (tmp_path / "ports.py").write_text(PORTS)
    argv = ["shape-bias", "--model", f"{tmp_path / 'ports.py'}:{port}", "--data-root", str(modelval_data_root)]
    # The ImageNet port's forward is the bundled model's under ImageNet's normalization: the session's one forward
    # (its output cache) serves it; the self-check's forwards are its own.
    shared = bundled_forward("imagenet") if port == "imagenet_port" else contextlib.nullcontext()
    with shared:
        assert main([*argv, "--device", "cpu", "--json"]) == 1

    out, err = capsys.readouterr()
    report = json.loads(out)
    assert (report["passed"], report["status"]) == (False, "suspect")
    assert report["verdict"] == f"SUSPECT PREPROCESSING ({factor})"
    reason = report["reason"]
    assert reason.startswith(f"{factor}: {name} answers ") and "the declared preprocessing" in reason
    assert err.startswith("modelval: SUSPECT PREPROCESSING: ") and len(err.strip().splitlines()) == 1
    flagged = [a for a in report["preprocessing_check"]["alternatives"] if a["suspect"]]
    assert [a["name"] for a in flagged] == [name] and flagged[0]["accuracy"] > flagged[0]["declared_accuracy"]


def test_a_run_served_from_the_output_cache_reads_its_check_from_beside_the_outputs(
    tmp_path, monkeypatch, stimulus_subset
):
    import modelval

    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)
    subset = stimulus_subset(1)

    def run(aggregation="mean"):
        report = modelval.shape_bias("efficientnet_lite0", data_root=subset, allow_modified_stimuli=True, bootstrap=0,
                                     aggregation=aggregation)  # fmt: skip
        return report.details["output_cache"], report.run.preprocessing_check

    status, first = run()
    assert status == "miss" and first is not None and not first.stored and first.images_forwarded == 3 * 16
    assert len(list((tmp_path / "cache" / "outputs").rglob(check_module.STORED))) == 1
    status, again = run()
    assert status == "hit" and again.stored and again.images_forwarded == 0 and again.alternatives == first.alternatives
    # another aggregation reads the same outputs, but its decisions (and hits) are its own: checked again
    status, other = run("max")
    assert status == "hit" and not other.stored and other.images_forwarded == 3 * 16
