"""Target 1: evaluation overhead = full cue-conflict evaluation / bare forward passes, same process and batch size.

Full evaluation = ``StimulusSet.load`` (decode cache when warm, PNG decode when cold) + ``evaluate`` (preprocess,
forward, softmax, 1000->16 mapping, decisions, shape bias with its 1000-resample bootstrap). Bare forward = the
model on the same 1280 images already prepared as float tensors (prepared outside the timed region), same batch
size. The two alternate ``--repeats`` times so machine load hits both alike; the ratio is per pair, reported
as the median. Ends with ``overhead_ratio=<median warm ratio>``.

    python benchmarks/bench_overhead.py [--batch-size 32] [--threads auto] [--repeats 3] [--cold]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _common import DATA_ROOT, load_average, load_bundled, median, print_table

_RSS_CHILD = """
import resource, sys, torch
from modelval.datasets.stimulus_set import StimulusSet
from modelval.evaluation import evaluate
from modelval.models import load_model
from modelval.runtime import set_threads
set_threads(sys.argv[3])
loaded = load_model("efficientnet_lite0", progress=False)
stimuli = StimulusSet.load(sys.argv[1], progress=False, cache_dir=sys.argv[2])
evaluate(loaded.model, loaded.entry.preprocess.for_stimuli(None), stimuli, batch_size=int(sys.argv[4]),
         device="cpu", progress=False)
# VmHWM: this process's own peak (ru_maxrss can carry the parent's peak over fork/exec on Linux)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")]
peak = int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(stimuli.cache_status, peak)
"""


def bare_forward(model: torch.nn.Module, images: torch.Tensor, config, batch_size: int) -> float:
    """Seconds spent in model(x) alone over all batches (inputs prepared before each timed call)."""
    from modelval.preprocessing import prepare_batch

    total = 0.0
    with torch.inference_mode():
        for start in range(0, len(images), batch_size):
            x = prepare_batch(images[start : start + batch_size], config, "cpu")
            t0 = time.perf_counter()
            model(x)
            total += time.perf_counter() - t0
    return total


def full_evaluation(model: torch.nn.Module, config, batch_size: int, cache_dir: Path, cache: bool) -> tuple[float, str]:
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate

    t0 = time.perf_counter()
    stimuli = StimulusSet.load(DATA_ROOT, progress=False, cache=cache, cache_dir=cache_dir)
    evaluate(model, config, stimuli, batch_size=batch_size, device="cpu", progress=False)
    return time.perf_counter() - t0, stimuli.cache_status


def peak_rss_mb(cache_dir: Path, threads: int, batch_size: int) -> tuple[str, float]:
    """Peak RSS of a fresh process that only loads the stimuli (from the cache) and evaluates."""
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(DATA_ROOT), str(cache_dir), str(threads), str(batch_size)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    return out[0], float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=None, help="default: modelval's DEFAULT_BATCH_SIZE")
    parser.add_argument("--threads", default="auto", help="torch threads for the whole run (auto: idle CPUs)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="also time one evaluation with PNG decoding (no cache)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="decode cache (default: a temporary folder)")
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS subprocess")
    args = parser.parse_args()

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import DEFAULT_BATCH_SIZE
    from modelval.runtime import set_threads, tune_allocator

    batch_size = args.batch_size or DEFAULT_BATCH_SIZE
    threads = set_threads(args.threads)
    tuned = tune_allocator()
    model, config = load_bundled()
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = args.cache_dir or Path(tmp)
        first = StimulusSet.load(DATA_ROOT, progress=False, cache_dir=cache_dir)  # fills the cache
        images = first.images
        print(f"threads={threads} batch_size={batch_size} allocator_tuned={tuned} load_avg={load_average()}")
        print(f"first load: cache {first.cache_status}")
        bare_forward(model, images[: 2 * batch_size], config, batch_size)  # warm-up: first-call allocations
        rows, ratios, fulls = [], [], []
        for rep in range(args.repeats):
            bare = bare_forward(model, images, config, batch_size)
            full, status = full_evaluation(model, config, batch_size, cache_dir, cache=True)
            ratios.append(full / bare)
            fulls.append(full)
            rows.append([rep, f"warm ({status})", f"{bare:.2f}", f"{full:.2f}", f"{full / bare:.3f}", load_average()])
        if args.cold:
            bare = bare_forward(model, images, config, batch_size)
            full, status = full_evaluation(model, config, batch_size, cache_dir, cache=False)
            rows.append(
                [
                    "-",
                    f"cold ({status}: PNG decode)",
                    f"{bare:.2f}",
                    f"{full:.2f}",
                    f"{full / bare:.3f}",
                    load_average(),
                ]
            )
        print_table(["rep", "decode", "bare forward s", "full evaluation s", "ratio", "load avg"], rows)
        print(f"full evaluation, median: {median(fulls):.2f} s = {len(images) / median(fulls):.1f} images/s")
        if not args.no_rss:
            status, rss = peak_rss_mb(cache_dir, threads, batch_size)
            print(f"peak RSS of a fresh evaluation process (cache {status}): {rss:.0f} MB")
        print(f"this process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(f"overhead_ratio={median(ratios):.3f}")


if __name__ == "__main__":
    main()
