"""preprocess-diff of two pipelines over the 1,280 stimuli with the bundled model, both forwards included (issue 40:
at most 90 s on 2 CPU cores), against one plain evaluation of the same model; with ``--mutations``, every seeded
regression and benign rewrite of tests/mutations.py with its stage, flips and shape-bias change.

    python benchmarks/bench_preprocess_diff.py [--images 1280] [--copy jpeg] [--mutations]

The last line is ``diff_vs_two_forwards=<ratio>``: the diff's time over two plain forwards' (what it cannot avoid).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _common import DATA_ROOT, print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1280)
    parser.add_argument("--copy", default="jpeg", help="the stimulus copy of the timed diff")
    parser.add_argument("--mutations", action="store_true", help="also run every mutation of tests/mutations.py")
    args = parser.parse_args()

    import modelval
    from modelval.api.loading import load

    loaded = load("efficientnet_lite0")[0]
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation.forward import category_probabilities

    pixels = StimulusSet.load(DATA_ROOT, progress=False, cache=False).images
    start = time.perf_counter()
    category_probabilities(loaded.model, pixels, loaded.config.preprocess.for_stimuli(None), device="cpu",
                           progress=False)  # fmt: skip
    forward = time.perf_counter() - start
    start = time.perf_counter()
    diff = modelval.preprocess_diff("model", "model+interpolation=bilinear", model=loaded, stimuli=[args.copy],
                                    limit=args.images, data_root=DATA_ROOT, device="cpu")  # fmt: skip
    seconds = time.perf_counter() - start
    print(f"one plain forward of the 1280 decoded stimuli: {forward:.1f} s")
    print(f"preprocess-diff of {args.images} stimuli ({args.copy}), two pipelines, both forwards: {seconds:.1f} s")
    print(diff.reason or diff.status)
    if args.mutations:
        _mutations(modelval, loaded, args.images)
    print(f"diff_vs_two_forwards={seconds / (2 * forward):.2f}")


def _mutations(modelval, loaded, images: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from mutations import mutations

    rows = []
    for mutation in mutations():
        start = time.perf_counter()
        diff = modelval.preprocess_diff(mutation.a, mutation.b, model=loaded, stimuli=[mutation.copy], limit=images,
                                        data_root=DATA_ROOT, device="cpu")  # fmt: skip
        (v,) = diff.variants
        sb, acc = v.shape_bias, v.accuracy
        rows.append([
            mutation.name, mutation.copy, mutation.stage or "(benign)", v.first_stage or "same",
            f"{v.flips.count}/{v.images}", f"{v.logit_shift[0]:.2g}",
            f"{100 * sb.difference:+.2f} [{100 * sb.ci95[0]:+.2f}, {100 * sb.ci95[1]:+.2f}]" if sb else "-",
            f"{100 * acc.difference:+.2f} [{100 * acc.ci95[0]:+.2f}, {100 * acc.ci95[1]:+.2f}]" if acc else "-",
            f"{time.perf_counter() - start:.0f}",
        ])  # fmt: skip
        print(" | ".join(rows[-1]), flush=True)
    print_table(["mutation", "copy", "seeded at", "named", "flips", "max |dlogit|", "d shape bias pp [95%]",
                 "d cue acc. pp [95%]", "s"], rows)  # fmt: skip


if __name__ == "__main__":
    main()
