"""The output cache: the cost of a second analysis of a cached model, as a ratio of one evaluation.

In one process, on the real stimuli and the bundled EfficientNet-Lite0: evaluation 1 fills an empty cache
(a forward pass over the 1280 stimuli); analysis 2 is the same model under another aggregation (what
`modelval humans`, `accuracy`, `compare` or the sensitivity card's aggregation variants do after a
`shape-bias` run): key (state-dict digest) + cache read + scoring. Then the same as whole commands
(`modelval shape-bias` then `modelval humans --model`), where importing torch and loading the model are
part of both. Prints the medians, the cache's size per model, and last ``second_analysis_ratio`` (goal <= 0.05).

The cache's proof of identity costs something on every cached evaluation: the digest of the module state
outside the state dict and the probe (a forward of the model on a few fixed stimuli, compared with the stored
rows). ``fingerprint_ratio`` is their time over one evaluation without the cache (of the same model, in the
same process).

    python benchmarks/bench_output_cache.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import DATA_ROOT, ROOT, load_average, load_bundled, median, print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-commands", action="store_true", help="skip the whole-command comparison")
    args = parser.parse_args()

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate, model_outputs
    from modelval.evaluation.forward import probe_indices
    from modelval.records.digests import module_state_digest
    from modelval.records.output_cache import OutputCache

    model, config = load_bundled()
    stimuli = StimulusSet.load(DATA_ROOT, progress=False, cache=False)
    first, second, size = [], [], 0
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder:
            cache = OutputCache(folder)
            start = time.perf_counter()
            miss = evaluate(model, config, stimuli, progress=False, n_bootstrap=0, output_cache=cache)
            first.append(time.perf_counter() - start)
            start = time.perf_counter()
            hit = evaluate(model, config, stimuli, progress=False, n_bootstrap=0, output_cache=cache, aggregation="sum")
            second.append(time.perf_counter() - start)
            assert (miss.output_cache, hit.output_cache) == ("miss", "hit")
            size = sum(entry.bytes for entry in cache.entries())
    uncached, state, probe = [], [], []
    probe_images = stimuli.images[probe_indices(len(stimuli))]
    for _ in range(args.repeats):
        start = time.perf_counter()
        evaluate(model, config, stimuli, progress=False, n_bootstrap=0)
        uncached.append(time.perf_counter() - start)
        start = time.perf_counter()
        module_state_digest(model)
        state.append(time.perf_counter() - start)
        start = time.perf_counter()
        model_outputs(model, probe_images, config, progress=False)
        probe.append(time.perf_counter() - start)
    rows = [
        ("evaluation without the cache", f"{median(uncached):.3f}"),
        ("evaluation (forward, cache miss)", f"{median(first):.3f}"),
        ("second analysis (cache hit, other aggregation)", f"{median(second):.3f}"),
        ("  of which: module-state digest", f"{median(state):.4f}"),
        (f"  of which: probe forward ({len(probe_images)} stimuli)", f"{median(probe):.4f}"),
    ]
    print(f"load average {load_average()}; {len(stimuli)} stimuli; median of {args.repeats}")
    print_table(("in one process", "seconds"), rows)
    print(f"cache size per model and protocol: {size / 2**20:.2f} MiB")

    if not args.no_commands:
        with tempfile.TemporaryDirectory() as folder:
            reference = os.environ.get("MODELVAL_REFERENCE_DIR") or str(ROOT.parent / "shared/reference/raw-data")
            env = {**os.environ, "MODELVAL_CACHE_DIR": folder, "MODELVAL_NO_RUN_STORE": "1",
                   "MODELVAL_DATA_ROOT": str(DATA_ROOT), "MODELVAL_REFERENCE_DIR": reference}  # fmt: skip
            env.pop("MODELVAL_NO_CACHE", None)
            commands = {
                "modelval shape-bias --model efficientnet_lite0 (miss)": [
                    "shape-bias",
                    "--model",
                    "efficientnet_lite0",
                ],
                "modelval humans --model efficientnet_lite0 (hit)": ["humans", "--model", "efficientnet_lite0"],
            }
            timings = {}
            for name, command in commands.items():
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "modelval", *command, "--json"], env=env, check=True,
                               capture_output=True, cwd=Path(__file__).parent)  # fmt: skip
                timings[name] = time.perf_counter() - start
            print_table(("whole command", "seconds"), [(k, f"{v:.2f}") for k, v in timings.items()])
            values = list(timings.values())
            print(f"command_ratio={values[1] / values[0]:.3f} (includes importing torch and loading the model)")
    print(f"fingerprint_ratio={(median(state) + median(probe)) / median(uncached):.4f}")
    print(f"second_analysis_ratio={median(second) / median(first):.3f}")


if __name__ == "__main__":
    main()
