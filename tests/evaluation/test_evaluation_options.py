"""Speed options keep results: channels_last and thread counts give the same decisions; bf16 reports its flips."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import modelval
from modelval.behaviour.decisions import Decision
from modelval.cli import build_parser
from modelval.evaluation import (
    AmpFlipWarning,
    category_probabilities,
    decision_flips,
    decisions_from_probabilities,
)
from modelval.runtime import auto_threads, set_threads, tune_allocator


@pytest.fixture(scope="module")
def subset(modelval_stimulus_set):
    """64 stimuli, 4 from every category."""
    return modelval_stimulus_set.images[::20], modelval_stimulus_set.stimuli[::20]


def run(bundled_model, images, **options) -> np.ndarray:
    config = bundled_model.entry.preprocess.for_stimuli(None)
    return category_probabilities(bundled_model.model, images, config, device="cpu", progress=False, **options)


@pytest.mark.slow
def test_channels_last_gives_the_same_decisions_and_restores_the_model(bundled_model, subset):
    images, _ = subset
    reference = run(bundled_model, images)
    nhwc = run(bundled_model, images, channels_last=True)
    assert np.array_equal(reference.argmax(1), nhwc.argmax(1))
    np.testing.assert_allclose(nhwc, reference, atol=1e-5)
    weight = next(p for p in bundled_model.model.parameters() if p.ndim == 4)
    assert weight.is_contiguous()
    # The model is as it was: its weights are not inference tensors (it can still be trained or exported).
    assert not any(p.is_inference() for p in bundled_model.model.parameters())
    assert not any(b.is_inference() for b in bundled_model.model.buffers())


@pytest.mark.slow
def test_thread_count_does_not_change_decisions(bundled_model, subset):
    images, _ = subset
    before = torch.get_num_threads()
    try:
        runs = []
        for threads in (1, 2):
            set_threads(threads)
            runs.append(run(bundled_model, images))
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(runs[0].argmax(1), runs[1].argmax(1))
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-5)


_UNTUNED = """
import sys, numpy as np, torch
from modelval.models import load_model
from modelval.evaluation import category_probabilities
from modelval.runtime import tune_allocator
assert not tune_allocator()
torch.set_num_threads(int(sys.argv[3]))
loaded = load_model("efficientnet_lite0", progress=False)
images = torch.from_numpy(np.load(sys.argv[1]))
config = loaded.entry.preprocess.for_stimuli(None)
np.save(sys.argv[2], category_probabilities(loaded.model, images, config, device="cpu", progress=False))
"""


@pytest.mark.slow
def test_allocator_tuning_does_not_change_results(bundled_model, subset, tmp_path):
    """Bit-identical probabilities with glibc's default allocator (a fresh process) and the tuned one.

    Same thread count on both sides: the thread count may change the last bits (not the decisions).
    """
    images = subset[0][:8]
    np.save(tmp_path / "images.npy", images.numpy())
    env = {**os.environ, "MODELVAL_NO_MALLOPT": "1", "PYTHONPATH": str(Path(modelval.__file__).parents[1])}
    subprocess.run(
        [
            sys.executable,
            "-c",
            _UNTUNED,
            str(tmp_path / "images.npy"),
            str(tmp_path / "probs.npy"),
            str(torch.get_num_threads()),
        ],
        check=True,
        env=env,
        timeout=300,
    )
    tune_allocator()  # idempotent and process-wide: already on here once any CPU evaluation ran
    assert np.array_equal(run(bundled_model, images), np.load(tmp_path / "probs.npy"))


@pytest.mark.slow
def test_bf16_flip_report_on_the_real_model(bundled_model, subset):
    images, stimuli = subset
    fp32 = decisions_from_probabilities(stimuli, run(bundled_model, images))
    bf16_probs = run(bundled_model, images, amp="bf16")
    assert bf16_probs.dtype == np.float32 and np.isfinite(bf16_probs).all()
    bf16 = decisions_from_probabilities(stimuli, bf16_probs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpFlipWarning)
        report = decision_flips(fp32, bf16)
    assert report.total == 64
    assert report.count == sum(a.response != b.response for a, b in zip(fp32, bf16, strict=True))
    # bf16 keeps ~3 significant digits: near-ties may flip, but most decisions must survive.
    assert report.count <= 8, report.flipped


def test_unknown_amp_is_an_error(bundled_model, subset):
    with pytest.raises(ValueError, match="amp must be"):
        run(bundled_model, subset[0][:2], amp="fp8")


def _decisions(responses: list[str]) -> list[Decision]:
    return [Decision(f"img{i}.png", "cat", "dog", r) for i, r in enumerate(responses)]


def test_flip_report_counts_and_warns_above_the_threshold():
    reference = _decisions(["cat"] * 200)
    few = _decisions(["cat"] * 199 + ["dog"])
    many = _decisions(["cat"] * 190 + ["dog"] * 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = decision_flips(reference, few)  # 0.5% <= 1%: no warning
    assert report.count == 1 and report.flipped == ["img199.png: cat -> dog"]
    with pytest.warns(AmpFlipWarning, match="10/200 decisions flipped"):
        assert decision_flips(reference, many).rate == pytest.approx(0.05)
    with pytest.raises(ValueError, match="same stimuli"):
        decision_flips(reference, _decisions(["cat"] * 199))


def test_thread_settings(monkeypatch):
    before = torch.get_num_threads()
    try:
        assert 1 <= auto_threads() <= before
        monkeypatch.setenv("MODELVAL_THREADS", "1")
        assert set_threads() == 1
        with pytest.raises(ValueError, match="threads"):
            set_threads(0)
    finally:
        torch.set_num_threads(before)


def test_cli_speed_settings_parse(tmp_path, monkeypatch):
    """--amp and --no-cache are flags; the thread count and channels-last are a machine's settings (a variable, the
    config file's [settings]), resolved by the one precedence when the command runs."""
    from modelval.cli._options import evaluation_options, resolve_settings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "modelval.toml").write_text("[settings]\nchannels_last = true\n")
    monkeypatch.setenv("MODELVAL_THREADS", "1")
    args = build_parser().parse_args(["shape-bias", "--model", "efficientnet_lite0", "--amp", "bf16", "--no-cache"])
    resolve_settings(args)
    assert (args.amp, args.channels_last, args.cache, args.threads) == ("bf16", True, False, "1")
    options = evaluation_options(args)
    assert (options.amp, options.channels_last, options.cache) == ("bf16", True, False)
    monkeypatch.delenv("MODELVAL_THREADS")
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)  # the test session turns the caches off
    (tmp_path / "modelval.toml").unlink()
    defaults = build_parser().parse_args(["shape-bias", "--model", "efficientnet_lite0"])
    resolve_settings(defaults)
    assert (defaults.amp, defaults.channels_last, defaults.cache, defaults.threads) == (None, False, True, "auto")
