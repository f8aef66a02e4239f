"""Target 2: N preprocessing configurations of one model decode the stimuli once; cost grows with forwards only.

Three ways to evaluate the bundled model under N configurations (its own 0.5/0.5 normalization, ImageNet
mean/std, and a third custom mean/std), all in one process with the same batch size:

* naive: ``StimulusSet.load(cache=False)`` + ``evaluate`` per configuration (decodes the PNGs N times);
* decode once: one ``StimulusSet.load`` (warm decode cache) shared by the N evaluations;
* bare: N x the bare forward passes on prepared tensors (the floor), alternating with the evaluations.

``decode_once_ratio`` = decode-once wall time / bare wall time for N = 3 (1.0 would be pure forward cost).
The PNG decodes are counted by wrapping ``modelval.datasets.stimulus_set.decode_stimuli``.

    python benchmarks/bench_decode_once.py [--n 3] [--batch-size 32] [--threads auto] [--repeats 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from _common import DATA_ROOT, load_average, load_bundled, median, print_table
from bench_overhead import bare_forward

import modelval.datasets.stimulus_set as evaluation_module

_DECODES = 0


def _counting(decode):
    def wrapper(*args, **kwargs):
        global _DECODES
        _DECODES += 1
        return decode(*args, **kwargs)

    return wrapper


def configurations(base, n: int):
    from modelval.preprocessing import IMAGENET_MEAN, IMAGENET_STD

    variants = [
        base,
        dataclasses.replace(base, mean=IMAGENET_MEAN, std=IMAGENET_STD),
        dataclasses.replace(base, mean=(0.48, 0.46, 0.41), std=(0.27, 0.26, 0.28)),
    ]
    return [variants[i % len(variants)] for i in range(n)]


def decode_once_interleaved(model, configs, images, batch_size: int, cache_dir: Path) -> tuple[float, float, int]:
    """(decode-once wall s, N x bare forward s, PNG decodes): one load, then bare/evaluate alternating per config.

    Alternating per configuration (~20 s each) keeps a burst of load from another user on one side only
    briefly; the decode-once wall time is the load plus the N evaluations, exactly as a user runs them.
    """
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate

    global _DECODES
    _DECODES = 0
    t0 = time.perf_counter()
    stimuli = StimulusSet.load(DATA_ROOT, progress=False, cache_dir=cache_dir)
    wall, bare = time.perf_counter() - t0, 0.0
    for config in configs:
        bare += bare_forward(model, images, config, batch_size)
        t0 = time.perf_counter()
        evaluate(model, config, stimuli, batch_size=batch_size, device="cpu", progress=False)
        wall += time.perf_counter() - t0
    return wall, bare, _DECODES


def naive(model, configs, batch_size: int) -> tuple[float, int]:
    """Decode the PNGs again for every configuration (what a loop over configurations did before)."""
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate

    global _DECODES
    _DECODES = 0
    t0 = time.perf_counter()
    for config in configs:
        stimuli = StimulusSet.load(DATA_ROOT, progress=False, cache=False)
        evaluate(model, config, stimuli, batch_size=batch_size, device="cpu", progress=False)
    return time.perf_counter() - t0, _DECODES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--threads", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--naive", action="store_true", help="also time the decode-per-configuration baseline")
    args = parser.parse_args()

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import DEFAULT_BATCH_SIZE
    from modelval.runtime import set_threads, tune_allocator

    evaluation_module.decode_stimuli = _counting(evaluation_module.decode_stimuli)
    batch_size = args.batch_size or DEFAULT_BATCH_SIZE
    threads = set_threads(args.threads)
    tune_allocator()
    model, base = load_bundled()
    configs = configurations(base, args.n)
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = Path(tmp)
        images = StimulusSet.load(DATA_ROOT, progress=False, cache_dir=cache_dir).images  # fills the cache
        print(f"N={args.n} threads={threads} batch_size={batch_size} load_avg={load_average()}")
        bare_forward(model, images[: 2 * batch_size], base, batch_size)
        rows, ratios = [], []
        for rep in range(args.repeats):
            once, bare, decodes = decode_once_interleaved(model, configs, images, batch_size, cache_dir)
            ratios.append(once / bare)
            rows.append([rep, "decode once (warm cache)", decodes, f"{bare:.2f}", f"{once:.2f}", f"{once / bare:.3f}"])
        if args.naive:
            bare = sum(bare_forward(model, images, c, batch_size) for c in configs)
            wall, decodes = naive(model, configs, batch_size)
            rows.append(
                ["-", "naive: PNG decode per config", decodes, f"{bare:.2f}", f"{wall:.2f}", f"{wall / bare:.3f}"]
            )
        print_table(["rep", "strategy", "PNG decodes", f"{args.n} x bare forward s", "wall s", "ratio"], rows)
    print(f"decode_once_ratio={median(ratios):.3f}")


if __name__ == "__main__":
    main()
