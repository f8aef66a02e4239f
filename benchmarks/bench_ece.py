"""Target 4: ECE on 10 million predictions, modelval vs torchmetrics on the same confidences, same process.

Confidences are float32 in [0, 1] (as a model's softmax gives them; 1% are exactly 0 or 1 and 1% sit exactly
on bin edges, to exercise the edge conventions), correctness flags are bool. Compared, alternating, each
timed from the arrays as a user holds them (numpy for modelval, torch tensors for torchmetrics):

* torchmetrics ``binary_calibration_error(conf, correct, n_bins=15)`` (its bins: [lo, hi) + hidden [1, 1]);
* ``modelval.metrics.calibration.expected_calibration_error(..., convention="torchmetrics")`` (must agree);
* ``convention="default"`` ((lo, hi] bins) for information.

Ends with ``ece_vs_torchmetrics=<median modelval time / median torchmetrics time>`` (target <= 0.5).

    python benchmarks/bench_ece.py [--n 10000000] [--repeats 5] [--bins 15]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _common import median, print_table


def make_inputs(n: int, n_bins: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    conf = rng.beta(5, 1.5, size=n).astype(np.float32)
    special = rng.choice(n, size=n // 50, replace=False)
    half = len(special) // 2
    conf[special[:half]] = rng.choice(np.array([0.0, 1.0], dtype=np.float32), size=half)
    conf[special[half:]] = torch.linspace(0, 1, n_bins + 1)[rng.integers(0, n_bins + 1, len(special) - half)].numpy()
    correct = rng.random(n) < conf
    return conf, correct


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bins", type=int, default=15)
    parser.add_argument("--threads", default="auto", help="torch threads for torchmetrics (auto: idle CPUs)")
    args = parser.parse_args()
    from modelval.runtime import set_threads

    set_threads(args.threads)
    from torchmetrics.functional.classification import binary_calibration_error

    from modelval.metrics.calibration import expected_calibration_error

    conf, correct = make_inputs(args.n, args.bins)
    conf_t, correct_t = torch.from_numpy(conf), torch.from_numpy(correct).long()
    runs = {
        "torchmetrics binary_calibration_error": lambda: float(
            binary_calibration_error(conf_t, correct_t, n_bins=args.bins)
        ),
        "modelval ECE, convention=torchmetrics": lambda: expected_calibration_error(
            conf, correct, args.bins, convention="torchmetrics"
        ),
        "modelval ECE, convention=default": lambda: expected_calibration_error(conf, correct, args.bins),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    values: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            values[name] = fn()
            times[name].append(time.perf_counter() - t0)
    tm = median(times["torchmetrics binary_calibration_error"])
    print(f"N={args.n:,} bins={args.bins} threads={torch.get_num_threads()}, median of {args.repeats} alternating runs")
    print_table(
        ["method", "median s", "min s", "x torchmetrics", "ECE"],
        [
            [n, f"{median(t):.3f}", f"{min(t):.3f}", f"{median(t) / tm:.2f}", f"{values[n]:.7f}"]
            for n, t in times.items()
        ],
    )
    ours = values["modelval ECE, convention=torchmetrics"]
    ref = values["torchmetrics binary_calibration_error"]
    exact = float(binary_calibration_error(conf_t.double(), correct_t, n_bins=args.bins))
    print(f"|modelval - torchmetrics| = {abs(ours - ref):.1e}; torchmetrics on float64 copies: {exact:.7f}")
    print("(torchmetrics sums 10M float32 confidences per bin in float32; modelval accumulates in float64)")
    print(f"ece_vs_torchmetrics={median(times['modelval ECE, convention=torchmetrics']) / tm:.3f}")


if __name__ == "__main__":
    main()
