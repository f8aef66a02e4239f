"""Target 3: the 1000 -> 16 mean aggregation as one matrix product vs Python loops, same decisions.

Inputs: softmax of random logits (scaled like a confident classifier) for 1280 images (one evaluation) and
for 100 000 (a large validation set). Compared:

* ``CategoryMapper("mean")``: one (N, 1000) @ (1000, 16) product (what the evaluation uses);
* loop over the 16 categories: gather the category's columns and average (tests/test_categories.py);
* loop over images and categories in numpy (the reference toolbox's style; 1280 images only).

Ends with ``mapping_speedup=<per-category loop time / matmul time>`` at N = 1280 (median of the repeats).

    python benchmarks/bench_mapping.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from _common import median, print_table


def category_loop(probabilities: torch.Tensor) -> torch.Tensor:
    from modelval.behaviour.categories import CATEGORIES, IMAGENET_INDICES

    return torch.stack([probabilities[:, list(IMAGENET_INDICES[c])].mean(1) for c in CATEGORIES], dim=1)


def image_loop(probabilities: torch.Tensor) -> torch.Tensor:
    from modelval.behaviour.categories import CATEGORIES, IMAGENET_INDICES

    array = probabilities.numpy()
    rows = [[float(np.mean(p[list(IMAGENET_INDICES[c])])) for c in CATEGORIES] for p in array]
    return torch.tensor(rows, dtype=torch.float32)


def best_of(fn: Callable[[], torch.Tensor], repeats: int) -> tuple[float, torch.Tensor]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", default="auto", help="torch threads (auto: idle CPUs, as the other benchmarks)")
    args = parser.parse_args()
    from modelval.behaviour.categories import CategoryMapper
    from modelval.runtime import set_threads

    set_threads(args.threads)

    mapper = CategoryMapper("mean")
    rows, speedup = [], None
    for n in (1280, 100_000):
        generator = torch.Generator().manual_seed(n)
        probs = torch.softmax(torch.randn(n, 1000, generator=generator) * 4, dim=1)
        mapper(probs[:8])  # build the matrix once, as the evaluation loop does
        t_mat, mapped = best_of(lambda p=probs: mapper(p), args.repeats)
        t_loop, looped = best_of(lambda p=probs: category_loop(p), args.repeats)
        same = torch.equal(mapped.argmax(1), looped.argmax(1))
        diff = (mapped - looped).abs().max().item()
        rows.append([n, "matmul (CategoryMapper)", f"{t_mat * 1e3:.2f}", "1.0", "-", "-"])
        rows.append([n, "loop over 16 categories", f"{t_loop * 1e3:.2f}", f"{t_loop / t_mat:.1f}", same, f"{diff:.1e}"])
        if n == 1280:
            speedup = t_loop / t_mat
            t_img, by_image = best_of(lambda p=probs: image_loop(p), max(1, args.repeats // 3))
            same_img = torch.equal(mapped.argmax(1), by_image.argmax(1))
            diff_img = (mapped - by_image).abs().max().item()
            rows.append(
                [
                    n,
                    "loop over images x categories",
                    f"{t_img * 1e3:.1f}",
                    f"{t_img / t_mat:.0f}",
                    same_img,
                    f"{diff_img:.1e}",
                ]
            )
    print(f"threads={torch.get_num_threads()}, median of {args.repeats} runs")
    print_table(["N", "method", "ms", "x matmul time", "same decisions", "max |diff|"], rows)
    print(f"mapping_speedup={speedup:.1f}")


if __name__ == "__main__":
    main()
