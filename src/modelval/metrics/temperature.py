"""Post-hoc scaling of logits (Guo et al. 2017): temperature, vector and matrix scaling.

Each is fitted on held-out ``(N, C)`` logits by minimising the mean negative log-likelihood. Temperature
scaling divides the logits by one ``T > 0``, found by a deterministic golden-section search on ``log T`` (the
NLL is convex in ``1 / T``) polished by Newton steps on ``1 / T``; ``argmax`` never changes. Vector
(``softmax(w * z + b)``) and matrix (``softmax(z W^T + b)``) scaling use ``torch.optim.LBFGS`` in float64 from
the identity. A fit that found no interior optimum (a temperature on a bound of ``[1e-3, 1e3]``, LBFGS stopped
on a cap or with a gradient above ``GRAD_TOL``) issues a :class:`ScalingFitWarning` and reports
``converged=False``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from modelval.errors import DataError, InputValidationError
from modelval.metrics.calibration import expected_calibration_error
from modelval.metrics.validation import as_array, check_choice, check_number, validate_logits

LOG_T_BOUNDS: tuple[float, float] = (math.log(1e-3), math.log(1e3))
#: Largest absolute gradient entry of the mean NLL at which an LBFGS fit counts as converged.
GRAD_TOL = 1e-5


class ScalingFitWarning(UserWarning):
    """A calibration fit did not reach an interior optimum (temperature on a bound, LBFGS not converged)."""


def _at_bound(temperature: float) -> bool:
    log_t = math.log(temperature)
    return any(abs(log_t - bound) < 1e-4 for bound in LOG_T_BOUNDS)


def _warn_temperature_bound(temperature: float) -> None:
    side = "lower" if temperature < 1 else "upper"
    hint = (
        "the validation set is (nearly) perfectly separated, so the NLL keeps falling as T -> 0"
        if side == "lower"
        else "the logits carry (almost) no information about the labels, so the NLL keeps falling as T grows"
    )
    warnings.warn(
        f"temperature scaling ended at the {side} search bound T = {temperature:.4g} (bounds 1e-3, 1e3): {hint}; "
        "the fitted temperature is not an optimum. Check the labels and logits, or use a larger validation set",
        ScalingFitWarning,
        stacklevel=3,
    )


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(N, C)`` logits.

    Parameters
    ----------
    logits
        The logits.
    """
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Exact row-wise log-softmax, ``z - logsumexp(z)`` (as ``torch.log_softmax``).

    No flooring of tiny probabilities, so the NLL of a confidently wrong prediction is its full ``-log p``.

    Parameters
    ----------
    logits
        ``(N, C)`` logits.
    """
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _nll(z: np.ndarray, y: np.ndarray) -> float:
    return float(-log_softmax(z)[np.arange(len(y)), y].mean())


def fit_temperature(logits: Any, labels: Any, *, tol: float = 1e-10) -> float:
    """The temperature ``T > 0`` minimising the NLL of ``softmax(logits / T)`` on held-out data.

    Temperature scaling (Guo et al. 2017): the mean negative log-likelihood of the labels under
    ``softmax(logits / T)`` is minimised over ``T`` by a deterministic golden-section search on ``log T``
    followed by Newton steps on ``1 / T`` (see the module docstring). Dividing by ``T > 0`` never changes the
    predicted class. Bounded to ``[1e-3, 1e3]``; a result on a bound means the data ask for a more extreme
    value (e.g. a perfectly separated validation set pushes ``T`` towards 0): this issues a
    :class:`ScalingFitWarning`.

    Parameters
    ----------
    logits
        Held-out ``(N, C)`` logits, finite, ``C >= 2`` (numpy array, torch tensor or list).
    labels
        The true class of each row, integers in ``[0, C)``.
    tol
        Relative step size at which the Newton polish stops.

    Returns
    -------
    float
        The fitted temperature: the calibrated probabilities are ``softmax(logits / T)``.

    Examples
    --------
    Three predictions right and one wrong, all with a logit margin of 3: the NLL is smallest where the
    model says 3/4, the accuracy, i.e. ``sigmoid(3 / T) = 3/4`` and ``T = 3 / ln 3``:

    >>> import math
    >>> from modelval.metrics import fit_temperature
    >>> logits = [[3.0, 0.0], [0.0, 3.0], [3.0, 0.0], [0.0, 3.0]]
    >>> temperature = fit_temperature(logits, [0, 1, 1, 1])
    >>> round(temperature, 6), round(3 / math.log(3), 6)
    (2.730718, 2.730718)
    """
    z, y = validate_logits(logits, labels)
    zy = z[np.arange(len(y)), y]

    def nll_beta(beta: float) -> float:
        s = beta * z
        m = s.max(axis=1)
        return float(np.mean(m + np.log(np.exp(s - m[:, None]).sum(axis=1)) - beta * zy))

    lo, hi = LOG_T_BOUNDS
    golden = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - golden * (b - a), a + golden * (b - a)
    fc, fd = nll_beta(math.exp(-c)), nll_beta(math.exp(-d))
    while b - a > 1e-6:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - golden * (b - a)
            fc = nll_beta(math.exp(-c))
        else:
            a, c, fc = c, d, fd
            d = a + golden * (b - a)
            fd = nll_beta(math.exp(-d))
    log_t = (a + b) / 2
    # Newton on beta = 1/T polishes the bracketed optimum to machine precision (convex in beta).
    beta = math.exp(-log_t)
    for _ in range(20):
        p = softmax(beta * z)
        mean_z = (p * z).sum(axis=1)
        grad = float(np.mean(mean_z - zy))
        hess = float(np.mean((p * z * z).sum(axis=1) - mean_z**2))
        if hess <= 0 or not math.isfinite(grad):
            break
        step = grad / hess
        new_beta = beta - step
        if not (math.exp(-hi) <= new_beta <= math.exp(-lo)) or nll_beta(new_beta) > nll_beta(beta):
            break
        beta = new_beta
        if abs(step) < tol * max(1.0, beta):
            break
    temperature = float(1.0 / beta)
    if _at_bound(temperature):
        _warn_temperature_bound(temperature)
    return temperature


def _fit_temperature_for_caller(logits: Any, labels: Any) -> float:
    """:func:`fit_temperature`, its :class:`ScalingFitWarning` re-issued to point at the caller's caller."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScalingFitWarning)
        temperature = fit_temperature(logits, labels)
    for record in caught:
        warnings.warn(record.message, record.category, stacklevel=3)
    return temperature


@dataclass(frozen=True)
class TemperatureSweepPoint:
    temperature: float
    nll: float
    ece: float
    accuracy: float


def temperature_sweep(
    logits: Any, labels: Any, temperatures: Sequence[float] = (0.5, 1.0, 1.5, 2.0), *, n_bins: int = 15
) -> list[TemperatureSweepPoint]:
    """NLL, ECE and accuracy at fixed temperatures (the seed's sweep ``T in {0.5, 1, 1.5, 2}``, 15 bins).

    Parameters
    ----------
    logits, labels
        ``(N, C)`` logits and the true class of each row.
    temperatures
        The temperatures.
    n_bins
        Bins of the ECE.
    """
    z, y = validate_logits(logits, labels)
    points = []
    for t in temperatures:
        check_number(t, "temperature", above=0, expected="must be a finite number > 0")
        probs = softmax(z / t)
        pred = probs.argmax(axis=1)
        correct = (pred == y).astype(np.float64)
        points.append(
            TemperatureSweepPoint(
                temperature=float(t),
                nll=_nll(z / t, y),
                ece=expected_calibration_error(probs.max(axis=1), correct, n_bins),
                accuracy=float(correct.mean()),
            )
        )
    return points


@dataclass(frozen=True)
class LogitScaler:
    """A fitted scaling: ``transform(logits)`` returns calibrated logits, ``predict_proba`` probabilities."""

    method: str
    weight: np.ndarray  # scalar 1/T, vector (C,) or matrix (C, C)
    bias: np.ndarray
    converged: bool = True  # False: temperature on a search bound, or LBFGS stopped before convergence
    odir: tuple[float, float] = (0.0, 0.0)  # ODIR (lambda, mu) of Kull et al. 2019; (0, 0): unregularised

    @property
    def temperature(self) -> float:
        if self.method != "temperature":
            raise AttributeError(f"{self.method} scaling has no single temperature")
        return float(1.0 / self.weight)

    def transform(self, logits: Any) -> np.ndarray:
        """The calibrated logits.

        Parameters
        ----------
        logits
            ``(N, C)`` logits with the ``C`` of the fit.
        """
        z = as_array(logits, "logits").astype(np.float64)
        if z.ndim != 2:
            raise InputValidationError(f"logits must have shape (N, C), got {z.shape}")
        if self.method == "matrix":
            if z.shape[1] != self.weight.shape[1]:
                raise InputValidationError(f"scaler was fitted on {self.weight.shape[1]} classes, got {z.shape[1]}")
            return z @ self.weight.T + self.bias
        if self.method == "vector" and z.shape[1] != self.weight.shape[0]:
            raise InputValidationError(f"scaler was fitted on {self.weight.shape[0]} classes, got {z.shape[1]}")
        return z * self.weight + self.bias

    def predict_proba(self, logits: Any) -> np.ndarray:
        """The calibrated probabilities, ``softmax(transform(logits))``.

        Parameters
        ----------
        logits
            ``(N, C)`` logits with the ``C`` of the fit.
        """
        return softmax(self.transform(logits))


def fit_scaling(
    logits: Any,
    labels: Any,
    method: Literal["temperature", "vector", "matrix"] = "temperature",
    *,
    max_iter: int = 200,
    odir: tuple[float, float] | None = None,
) -> LogitScaler:
    """Fit temperature, vector or matrix scaling on held-out logits by minimising the NLL.

    ``odir=(lam, mu)`` adds the ODIR penalty of Kull et al. 2019 (Dirichlet calibration, eq. 8) to the
    mean NLL of vector or matrix scaling::

        lam / (C (C - 1)) * sum_{i != j} W_ij^2  +  mu / C * sum_j b_j^2

    (Off-Diagonal and Intercept Regularisation). Vector scaling has no off-diagonal weights, so only
    ``mu`` acts there. ``lam`` and ``mu`` are chosen by the user (Kull et al. pick them by
    cross-validation); ``None`` or ``(0, 0)`` is the unregularised fit.

    Parameters
    ----------
    logits, labels
        Held-out ``(N, C)`` logits and the true class of each row.
    method
        ``"temperature"``, ``"vector"`` or ``"matrix"``.
    max_iter
        LBFGS iterations (vector and matrix scaling).
    odir
        The ODIR weights ``(lam, mu)``; ``None``: none.
    """
    z, y = validate_logits(logits, labels)
    check_choice(method, "method", ("temperature", "vector", "matrix"))
    lam, mu = (0.0, 0.0) if odir is None else (float(odir[0]), float(odir[1]))
    for weight in (lam, mu):
        check_number(weight, "odir", minimum=0, expected="must be two finite numbers >= 0 (lambda, mu)")
    if odir is not None and method == "temperature":
        raise InputValidationError("odir regularisation applies to vector and matrix scaling, not to temperature")
    if method == "temperature":
        t = _fit_temperature_for_caller(z, y)
        return LogitScaler("temperature", np.asarray(1.0 / t), np.asarray(0.0), converged=not _at_bound(t))
    import torch

    n_classes = z.shape[1]
    zt = torch.as_tensor(z, dtype=torch.float64)
    yt = torch.as_tensor(y)
    if method == "vector":
        w = torch.ones(n_classes, dtype=torch.float64, requires_grad=True)
    else:
        w = torch.eye(n_classes, dtype=torch.float64).requires_grad_(True)
    b = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [w, b],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-10,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        out = zt * w + b if method == "vector" else zt @ w.T + b
        loss = torch.nn.functional.cross_entropy(out, yt)
        if lam > 0 and method == "matrix":
            off_diagonal = w - torch.diag(torch.diagonal(w))
            loss = loss + lam / (n_classes * (n_classes - 1)) * (off_diagonal**2).sum()
        if mu > 0:
            loss = loss + mu / n_classes * (b**2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    state = optimizer.state[optimizer.param_groups[0]["params"][0]]
    n_iter, func_evals = int(state.get("n_iter", 0)), int(state.get("func_evals", 0))
    max_eval = optimizer.param_groups[0]["max_eval"]
    loss = closure()
    grads = [p.grad for p in (w, b) if p.grad is not None]
    grad_max = max(float(g.abs().max()) for g in grads) if grads else math.inf
    finite = math.isfinite(float(loss.detach())) and math.isfinite(grad_max)
    converged = finite and n_iter < max_iter and func_evals < max_eval and grad_max <= GRAD_TOL
    if not converged:
        reason = (
            "the loss or gradient is not finite"
            if not finite
            else f"it stopped after {n_iter} iterations and {func_evals} evaluations (max_iter={max_iter}) "
            f"with the largest gradient entry {grad_max:.3g} > {GRAD_TOL:g}"
        )
        warnings.warn(
            f"{method} scaling: LBFGS did not converge: {reason}. The result may not minimise the NLL; raise "
            "max_iter, or use temperature scaling (a perfectly separable validation set has no finite optimum)",
            ScalingFitWarning,
            stacklevel=2,
        )
    return LogitScaler(
        method, w.detach().numpy().copy(), b.detach().numpy().copy(), converged=converged, odir=(lam, mu)
    )


def read_array_file(path: str | Path, what: str = "logits") -> dict[str, Any]:
    """The named arrays of a ``.npz`` file, or the dict of tensors of a ``.pt``/``.pth`` file.

    ``.pt`` files are loaded with ``weights_only=True``: no code in the file is executed. ``what`` names
    the content in messages ("logits", "predictions").

    Parameters
    ----------
    path
        The file.
    what
        What it holds, for the messages.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        if suffix in (".pt", ".pth"):
            import torch

            content = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(content, dict):
                raise DataError(f"{path}: expected a dict of tensors, found {type(content).__name__}")
            return content
        raise DataError(
            f"{path}: unsupported {what} file type {suffix!r}; use .npz (named arrays) or .pt (a dict of tensors)"
        )
    except DataError:
        raise
    except Exception as error:  # numpy/torch raise many types for corrupt files
        if suffix in (".pt", ".pth") and "weights_only" in str(error):
            # torch's message advises weights_only=False, i.e. running the file's code: never do that.
            raise DataError(
                f"{path}: could not read {what}: not a plain tensor file (loading it would run code, which "
                "modelval never does); save a dict of tensors: torch.save({'logits': ..., 'labels': ...}, path)"
            ) from None
        raise DataError(f"{path}: could not read {what} ({type(error).__name__}: {error})") from None


def load_logits_file(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read held-out logits and labels for ``modelval calibration temperature``.

    Accepted formats:

    * ``.npz`` with arrays ``logits`` (N, C) and ``labels`` (N,) (``numpy.savez(f, logits=..., labels=...)``);
    * ``.pt`` / ``.pth``: a dict ``{"logits": Tensor, "labels": Tensor}`` saved with ``torch.save``
      (loaded with ``weights_only=True``, so no code in the file is executed).

    Parameters
    ----------
    path
        The file.
    """
    content = read_array_file(path)
    if not {"logits", "labels"} <= set(content):
        raise DataError(f"{path}: expected entries 'logits' and 'labels', found {sorted(content)}")
    try:
        return validate_logits(content["logits"], content["labels"])
    except InputValidationError as error:
        raise DataError(f"{path}: {error}") from error
