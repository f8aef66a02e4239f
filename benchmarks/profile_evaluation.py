"""Where the time of one full cue-conflict evaluation goes: a per-stage wall/user/sys table, then torch.profiler.

Uses only the API that existed before the performance work, so the same script profiles the old and the
new code (``PYTHONPATH=<old checkout>/src python benchmarks/profile_evaluation.py``). Stages run in the
order of the evaluation loop but are timed separately: decode, preprocess (prepare_batch), forward,
softmax + 16-category mapping, decisions + bootstrap.

    python benchmarks/profile_evaluation.py [--batch-size 64] [--threads N] [--no-tune] [--ops]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Callable
from contextlib import contextmanager

import torch
from _common import DATA_ROOT, load_bundled, print_table


@contextmanager
def stage(rows: list[list[object]], name: str) -> None:
    t0, c0 = time.perf_counter(), os.times()
    yield
    t1, c1 = time.perf_counter(), os.times()
    rows.append([name, t1 - t0, c1.user - c0.user, c1.system - c0.system])


def timed_loop(images: torch.Tensor, batch_size: int, step: Callable[[torch.Tensor], object]) -> list[object]:
    return [step(images[s : s + batch_size]) for s in range(0, len(images), batch_size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-tune", action="store_true", help="do not call modelval.runtime.tune_allocator")
    parser.add_argument("--ops", action="store_true", help="also print torch.profiler's top operators (2 batches)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.no_tune:
        try:
            from modelval.runtime import tune_allocator

            print("allocator tuned:", tune_allocator())
        except ImportError:
            print("allocator tuned: n/a (old code)")
    from modelval.behaviour.categories import CategoryMapper
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import decisions_from_probabilities
    from modelval.preprocessing import prepare_batch

    model, config = load_bundled()
    mapper = CategoryMapper("mean")
    rows: list[list[object]] = []
    print(f"threads={torch.get_num_threads()} batch_size={args.batch_size} load={os.getloadavg()[0]:.2f}")
    with stage(rows, "decode (PNG, no cache)"):
        try:
            stimuli = StimulusSet.load(DATA_ROOT, progress=False, cache=False)
        except TypeError:  # the old StimulusSet.load has no cache option
            stimuli = StimulusSet.load(DATA_ROOT, progress=False)
    bs = args.batch_size
    with torch.inference_mode():
        with stage(rows, "preprocess (prepare_batch)"):
            inputs = timed_loop(stimuli.images, bs, lambda b: prepare_batch(b, config, "cpu"))
        with stage(rows, "forward"):
            logits = [model(x) for x in inputs]
        with stage(rows, "softmax + 1000->16 matmul"):
            probs = torch.cat([mapper(torch.softmax(x, dim=1)) for x in logits]).numpy()
    with stage(rows, "decisions + bootstrap (1000 x 1200)"):
        compute_shape_bias(decisions_from_probabilities(stimuli.stimuli, probs), n_bootstrap=1000)
    total = sum(r[1] for r in rows)
    print_table(
        ["stage", "wall s", "user s", "sys s", "share"],
        [[n, f"{w:.2f}", f"{u:.2f}", f"{s:.2f}", f"{100 * w / total:.1f}%"] for n, w, u, s in rows],
    )
    print(f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
    if args.ops:
        from torch.profiler import ProfilerActivity, profile

        with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
            for x in inputs[:2]:
                model(x)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
