"""Issue 12: a 1000-resample bootstrap interval of ECE on 10 million predictions vs one ECE, same process.

The inputs are those of ``bench_ece.py`` (float32 confidences, bool correctness). Timed alternately:

* ``expected_calibration_error(conf, correct, 15)``: one ECE;
* ``calibration_intervals(conf, correct, 15, n_resamples=1000)``: ECE/MCE/RMS/accuracy with their
  percentile bootstrap intervals, by multinomial cell counts (see ``modelval.metrics.bootstrap``).

A naive example-level bootstrap would be 1000 ECE passes (plus 10^10 random indices); one naive
resample is timed once and multiplied, for scale.

Then, on 100k predictions, the fast interval's endpoints against a naive 1000-resample bootstrap, as a
fraction of the naive interval's width (the acceptance bound is 0.10).

Ends with ``bootstrap_vs_ece=<median interval time / median ECE time>`` (goal <= 20).

    python benchmarks/bench_bootstrap.py [--n 10000000] [--repeats 3] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import median, print_table
from bench_ece import make_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--check-n", type=int, default=100_000, help="size of the naive-bootstrap agreement check")
    args = parser.parse_args()
    from modelval.metrics.bootstrap import calibration_intervals
    from modelval.metrics.calibration import expected_calibration_error, reliability_bins

    conf, correct = make_inputs(args.n, 15)
    runs = {
        "one ECE": lambda: expected_calibration_error(conf, correct, 15),
        f"bootstrap, {args.resamples} resamples": lambda: calibration_intervals(
            conf, correct, 15, n_resamples=args.resamples
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    pick = rng.integers(0, args.n, args.n)
    expected_calibration_error(conf[pick], correct[pick], 15)
    naive_one = time.perf_counter() - t0
    ece = median(times["one ECE"])
    fast = median(times[f"bootstrap, {args.resamples} resamples"])
    print(f"N={args.n:,}, 15 bins, median of {args.repeats} alternating runs")
    print_table(
        ["method", "median s", "x one ECE"],
        [
            ["one ECE", f"{ece:.3f}", "1.00"],
            [f"bootstrap, {args.resamples} resamples (cell counts)", f"{fast:.3f}", f"{fast / ece:.2f}"],
            [
                f"naive bootstrap, {args.resamples} resamples (1 timed x {args.resamples})",
                f"{naive_one * args.resamples:.1f}",
                f"{naive_one * args.resamples / ece:.0f}",
            ],
        ],
    )

    small_conf, small_correct = conf[: args.check_n].astype(np.float64), correct[: args.check_n]
    fast_iv = calibration_intervals(small_conf, small_correct, 15, n_resamples=args.resamples, seed=1)
    values = np.empty((args.resamples, 3))
    for r in range(args.resamples):
        pick = rng.integers(0, args.check_n, args.check_n)
        bins = reliability_bins(small_conf[pick], small_correct[pick], 15)
        values[r] = bins.ece, bins.mce, bins.rms
    rows = []
    for i, name in enumerate(("ece", "mce", "rms")):
        low, high = np.percentile(values[:, i], [2.5, 97.5])
        width = high - low
        iv = fast_iv[name]
        rows.append(
            [
                name,
                f"[{iv.low:.5f}, {iv.high:.5f}]",
                f"[{low:.5f}, {high:.5f}]",
                f"{abs(iv.low - low) / width:.3f}",
                f"{abs(iv.high - high) / width:.3f}",
            ]
        )
    print(f"\nagreement on {args.check_n:,} predictions ({args.resamples} resamples each; bound 0.10 of the width)")
    print_table(["statistic", "cell-count interval", "naive interval", "low diff / width", "high diff / width"], rows)
    print(f"bootstrap_vs_ece={fast / ece:.2f}")


if __name__ == "__main__":
    main()
