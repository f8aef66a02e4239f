"""Temperature, vector and matrix scaling; the seed's fixed-T sweep."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from modelval.errors import DataError, InputValidationError
from modelval.metrics.calibration import expected_calibration_error
from modelval.metrics.scoring import negative_log_likelihood
from modelval.metrics.temperature import (
    ScalingFitWarning,
    fit_scaling,
    fit_temperature,
    load_logits_file,
    softmax,
    temperature_sweep,
)
from reference_packages import reference_names

# Reference packages (imported on first use: a missing one skips only the parity tests that use it)
minimize, minimize_scalar = reference_names("scipy.optimize", "minimize", "minimize_scalar")
(logsumexp,) = reference_names("scipy.special", "logsumexp")


def overconfident_logits(n: int, n_classes: int = 10, sharpen: float = 3.0, seed: int = 0):
    """Labels drawn from softmax(z); the model reports sharpen * z (overconfident by T = sharpen)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, n_classes)) * 1.5
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    labels = np.array([rng.choice(n_classes, p=row) for row in p])
    return z * sharpen, labels


def torch_nll(logits: np.ndarray, labels: np.ndarray, t: float) -> float:
    return float(torch.nn.functional.cross_entropy(torch.tensor(logits / t), torch.tensor(labels)))


def seed_compute_ece(logits: np.ndarray, labels: np.ndarray, t: float, n_bins: int = 15) -> float:
    """Seed 004's compute_reliability_and_ece (TemperatureScaler = logits / T), verbatim logic in torch."""
    bin_boundaries = torch.linspace(0, 1, n_bins + 1)
    bin_corrects = torch.zeros(n_bins)
    bin_confidences = torch.zeros(n_bins)
    bin_counts = torch.zeros(n_bins)
    scaled = torch.tensor(logits, dtype=torch.float32) / torch.tensor([t])
    probs = torch.nn.functional.softmax(scaled, dim=1)
    confs, preds = torch.max(probs, dim=1)
    corrects = preds.eq(torch.tensor(labels))
    total_samples = labels.shape[0]
    for i in range(n_bins):
        in_bin = (confs > bin_boundaries[i]) & (confs <= bin_boundaries[i + 1])
        bin_counts[i] += in_bin.sum()
        if in_bin.sum() > 0:
            bin_corrects[i] += corrects[in_bin].float().sum()
            bin_confidences[i] += confs[in_bin].sum()
    nonzero = bin_counts > 0
    accs = bin_corrects[nonzero] / bin_counts[nonzero]
    confs = bin_confidences[nonzero] / bin_counts[nonzero]
    return torch.sum((bin_counts[nonzero] / total_samples) * torch.abs(accs - confs)).item()


def nll(z: np.ndarray, y: np.ndarray, t: float = 1.0) -> float:
    """Mean NLL of softmax(z / t), from the exact log-softmax."""
    return negative_log_likelihood(z / t, y, logits=True)


@pytest.fixture(scope="module")
def val_test():
    return overconfident_logits(3000, seed=1), overconfident_logits(3000, seed=2)


def test_overconfident_logits_give_t_above_one_and_lower_ece(val_test):
    (val_z, val_y), (test_z, test_y) = val_test
    t = fit_temperature(val_z, val_y)
    assert 2.5 < t < 3.5  # the logits were sharpened by 3
    before = torch.tensor(test_z).softmax(1).numpy()
    after = softmax(test_z / t)
    assert (after.argmax(1) == before.argmax(1)).all()
    correct = before.argmax(1) == test_y
    ece_before = expected_calibration_error(before.max(1), correct, 15)
    ece_after = expected_calibration_error(after.max(1), correct, 15)
    assert ece_after < ece_before / 3
    assert nll(test_z, test_y, t) < nll(test_z, test_y)


def test_fit_matches_scipy_bounded_search_on_log_t(val_test):
    (val_z, val_y), _ = val_test
    ref = minimize_scalar(
        lambda log_t: torch_nll(val_z, val_y, math.exp(log_t)),
        bounds=(math.log(0.05), math.log(20)),
        method="bounded",
        options={"xatol": 1e-10},
    )
    t = fit_temperature(val_z, val_y)
    assert t == pytest.approx(math.exp(ref.x), rel=1e-4)
    assert torch_nll(val_z, val_y, t) <= ref.fun + 1e-10
    assert fit_temperature(val_z, val_y) == t  # deterministic, bit for bit


def test_underconfident_logits_give_t_below_one():
    z, y = overconfident_logits(2000, sharpen=0.4, seed=3)
    assert fit_temperature(z, y) == pytest.approx(0.4, rel=0.15)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), t=st.floats(0.1, 10), n_classes=st.integers(2, 6))
def test_nll_matches_torch_cross_entropy(seed, t, n_classes):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(20, n_classes)) * 4
    y = rng.integers(0, n_classes, 20)
    assert nll(z, y, t) == pytest.approx(torch_nll(z, y, t), rel=1e-10, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), sharpen=st.floats(0.3, 5))
def test_property_fitted_t_is_a_minimum(seed, sharpen):
    z, y = overconfident_logits(200, n_classes=4, sharpen=sharpen, seed=seed)
    t = fit_temperature(z, y)
    at_t = nll(z, y, t)
    for factor in (0.98, 1.02):
        assert at_t <= nll(z, y, t * factor) + 1e-12


def test_seed_fixed_temperature_sweep_reproduced(val_test):
    _, (test_z, test_y) = val_test
    points = temperature_sweep(test_z, test_y, (0.5, 1.0, 1.5, 2.0), n_bins=15)
    assert [p.temperature for p in points] == [0.5, 1.0, 1.5, 2.0]
    for p in points:
        # the seed computes in float32; agreement to float32 precision
        assert p.ece == pytest.approx(seed_compute_ece(test_z, test_y, p.temperature), abs=1e-5)
        assert p.nll == pytest.approx(torch_nll(test_z, test_y, p.temperature), rel=1e-10)
    # sharpened by 3: every T in the sweep is below the optimum, so ECE falls as T grows
    eces = [p.ece for p in points]
    assert eces == sorted(eces, reverse=True)
    assert len({p.accuracy for p in points}) == 1  # T never changes the argmax


@pytest.mark.slow
def test_vector_and_matrix_scaling_fit_at_least_as_well(val_test):
    (val_z, val_y), _ = val_test
    nll = {}
    for method in ("temperature", "vector", "matrix"):
        scaler = fit_scaling(val_z, val_y, method=method)
        probs = scaler.predict_proba(val_z)
        np.testing.assert_allclose(probs.sum(1), 1.0)
        nll[method] = float(-np.log(probs[np.arange(len(val_y)), val_y]).mean())
    assert nll["vector"] <= nll["temperature"] + 1e-6
    assert nll["matrix"] <= nll["vector"] + 1e-6
    temp = fit_scaling(val_z, val_y)
    assert temp.temperature == pytest.approx(fit_temperature(val_z, val_y))
    with pytest.raises(AttributeError, match="no single temperature"):
        _ = fit_scaling(val_z[:200], val_y[:200], method="vector").temperature


def test_vector_scaling_recovers_per_class_scale():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(4000, 3)) * 2
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(3, p=row) for row in p])
    w_true = np.array([2.0, 0.5, 1.0])
    scaler = fit_scaling(z / w_true, y, method="vector")
    # softmax is shift-invariant, so only the scale is identifiable; compare w up to noise
    np.testing.assert_allclose(scaler.weight, w_true, rtol=0.15)


class TestBadInputs:
    def test_nan_logits(self):
        with pytest.raises(InputValidationError, match="NaN or infinite"):
            fit_temperature(np.array([[np.nan, 1.0]]), np.array([0]))

    def test_labels_out_of_range(self):
        with pytest.raises(InputValidationError, match=r"labels must lie in \[0, 1\]"):
            fit_temperature(np.zeros((2, 2)), np.array([0, 2]))

    def test_shapes(self):
        with pytest.raises(InputValidationError, match=r"shape \(N, C\) with C >= 2"):
            fit_temperature(np.zeros(5), np.zeros(5, dtype=int))
        with pytest.raises(InputValidationError, match="to match the logits"):
            fit_temperature(np.zeros((3, 2)), np.zeros(2, dtype=int))

    @pytest.mark.parametrize("t", [0, -1.0, float("nan"), float("inf")])
    def test_bad_temperature(self, t):
        with pytest.raises(InputValidationError, match="temperature must be a finite number > 0"):
            temperature_sweep(np.zeros((1, 2)), [0], [t])

    def test_unknown_method(self):
        with pytest.raises(InputValidationError, match="method must be"):
            fit_scaling(np.zeros((2, 2)), np.array([0, 1]), method="platt")  # type: ignore[arg-type]


class TestLogitsFiles:
    def test_npz_and_pt(self, tmp_path):
        z = np.arange(6, dtype=np.float32).reshape(3, 2)
        y = np.array([1, 0, 1])
        np.savez(tmp_path / "a.npz", logits=z, labels=y)
        torch.save({"logits": torch.tensor(z), "labels": torch.tensor(y)}, tmp_path / "a.pt")
        for name in ("a.npz", "a.pt"):
            lz, ly = load_logits_file(tmp_path / name)
            np.testing.assert_array_equal(lz, z)
            np.testing.assert_array_equal(ly, y)

    def test_errors(self, tmp_path):
        with pytest.raises(DataError, match="not found"):
            load_logits_file(tmp_path / "missing.npz")
        np.save(tmp_path / "a.npy", np.zeros((2, 2)))
        with pytest.raises(DataError, match="unsupported logits file type"):
            load_logits_file(tmp_path / "a.npy")
        np.savez(tmp_path / "b.npz", scores=np.zeros((2, 2)))
        with pytest.raises(DataError, match="expected entries 'logits' and 'labels'"):
            load_logits_file(tmp_path / "b.npz")
        (tmp_path / "c.pt").write_bytes(b"garbage")
        with pytest.raises(DataError, match="could not read logits"):
            load_logits_file(tmp_path / "c.pt")
        np.savez(tmp_path / "d.npz", logits=np.zeros((2, 2)), labels=np.array([0, 5]))
        with pytest.raises(DataError, match="labels must lie in"):
            load_logits_file(tmp_path / "d.npz")


class TestFitWarnings:
    """Defect 7: a temperature on its search bound or an unconverged LBFGS fit warns and says converged=False."""

    def test_separable_validation_set_hits_the_lower_bound(self):
        y = np.arange(30) % 3
        z = np.eye(3)[y] * 5.0  # every example right with a margin: the NLL falls as T -> 0
        with pytest.warns(ScalingFitWarning, match="lower search bound"):
            t = fit_temperature(z, y)
        assert t == pytest.approx(1e-3, rel=1e-4)
        with pytest.warns(ScalingFitWarning, match="perfectly separated"):
            scaler = fit_scaling(z, y, "temperature")
        assert scaler.converged is False

    def test_uninformative_logits_hit_the_upper_bound(self):
        y = np.arange(60) % 3
        z = np.eye(3)[(y + 1) % 3] * 2.0  # always confidently wrong: the best is the uniform distribution
        with pytest.warns(ScalingFitWarning, match="upper search bound"):
            assert fit_temperature(z, y) == pytest.approx(1e3, rel=1e-4)

    @pytest.mark.slow
    def test_interior_optimum_is_silent_and_converged(self, val_test, recwarn):
        (z, y), _ = val_test
        scaler = fit_scaling(z, y, "temperature")
        assert scaler.converged is True
        for method in ("vector", "matrix"):
            assert fit_scaling(z, y, method).converged is True  # type: ignore[arg-type]
        assert not [w for w in recwarn if issubclass(w.category, ScalingFitWarning)]

    @pytest.mark.parametrize("method", ["vector", "matrix"])
    def test_lbfgs_stopped_on_its_iteration_cap(self, val_test, method):
        (z, y), _ = val_test
        with pytest.warns(ScalingFitWarning, match=r"LBFGS did not converge.*max_iter=2"):
            scaler = fit_scaling(z, y, method, max_iter=2)
        assert scaler.converged is False
        assert issubclass(ScalingFitWarning, UserWarning)


class TestOdir:
    """ODIR-regularised vector and matrix scaling (Kull et al. 2019), against scipy on the same objective."""

    @staticmethod
    def objective(params: np.ndarray, z: np.ndarray, y: np.ndarray, method: str, lam: float, mu: float) -> float:
        c = z.shape[1]
        if method == "matrix":
            w, b = params[: c * c].reshape(c, c), params[c * c :]
            out = z @ w.T + b
            off = w - np.diag(np.diag(w))
            penalty = lam / (c * (c - 1)) * np.sum(off**2)
        else:
            w, b = params[:c], params[c:]
            out = z * w + b
            penalty = 0.0
        nll = np.mean(logsumexp(out, axis=1) - out[np.arange(len(y)), y])
        return float(nll + penalty + mu / c * np.sum(b**2))

    @pytest.mark.parametrize(("method", "lam", "mu"), [("matrix", 0.5, 0.1), ("matrix", 5.0, 0.0), ("vector", 0, 2.0)])
    def test_matches_scipy_minimum(self, method, lam, mu):
        z, y = overconfident_logits(300, n_classes=4, seed=3)
        scaler = fit_scaling(z, y, method, odir=(lam, mu))
        assert scaler.converged and scaler.odir == (lam, mu)
        c = z.shape[1]
        start = np.concatenate([np.eye(c).ravel() if method == "matrix" else np.ones(c), np.zeros(c)])
        ref = minimize(self.objective, start, args=(z, y, method, lam, mu), method="BFGS", options={"gtol": 1e-9})
        ours = np.concatenate([scaler.weight.ravel(), scaler.bias])
        assert self.objective(ours, z, y, method, lam, mu) <= ref.fun + 1e-9
        np.testing.assert_allclose(ours, ref.x, atol=1e-4)

    @pytest.mark.slow
    def test_strong_off_diagonal_penalty_gives_a_diagonal_matrix(self):
        z, y = overconfident_logits(500, n_classes=5, seed=4)
        plain = fit_scaling(z, y, "matrix")
        strong = fit_scaling(z, y, "matrix", odir=(1e3, 0.0))
        assert strong.converged
        off = ~np.eye(5, dtype=bool)
        assert np.abs(strong.weight[off]).max() < 5e-3 < 0.1 < np.abs(plain.weight[off]).max()
        vector = fit_scaling(z, y, "vector")
        np.testing.assert_allclose(np.diag(strong.weight), vector.weight, atol=2e-3)

    @pytest.mark.slow
    def test_separable_data_converges_with_odir(self):
        y = np.arange(40) % 4
        z = np.eye(4)[y] * 3.0 + np.random.default_rng(0).normal(size=(40, 4)) * 0.1
        plain = fit_scaling(z, y, "matrix")  # no finite optimum: the weights grow until the loss is ~0
        regularised = fit_scaling(z, y, "matrix", odir=(1.0, 1.0))
        assert regularised.converged is True and np.isfinite(regularised.weight).all()
        off = ~np.eye(4, dtype=bool)
        assert np.abs(regularised.weight[off]).max() < np.abs(plain.weight[off]).max()

    @pytest.mark.parametrize(
        ("method", "odir", "match"),
        [
            ("temperature", (1.0, 1.0), "not to temperature"),
            ("matrix", (-1.0, 0.0), ">= 0"),
            ("vector", (1, np.nan), ">= 0"),
        ],
    )
    def test_bad_odir(self, method, odir, match):
        z, y = overconfident_logits(50, n_classes=3)
        with pytest.raises(InputValidationError, match=match):
            fit_scaling(z, y, method, odir=odir)
