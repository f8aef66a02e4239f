"""Issue 10: does evaluating through a spec cost more than through the registry?

For each way of naming the bundled EfficientNet-Lite0 (registry name, ``file.py:factory`` with
``--checkpoint``, ``torchscript:``, ``export:``), the ratio evaluate() / bare forward on the same
stimuli, batches and process; the registry's ratio is the reference. Goal: every spec's ratio
within 5% of the registry's. The bare forward of each spec is its own module (a TorchScript or
exported module may be faster or slower than eager; that is not the spec path's overhead).

    python benchmarks/bench_specs.py [--images 320] [--batch-size 32] [--repeats 3]

Ends with ``spec_overhead_spread=<largest |spec ratio / registry ratio - 1|>``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import torch
from _common import DATA_ROOT, load_bundled, median, print_table


def bare_forward(model: torch.nn.Module, images: torch.Tensor, config, batch_size: int) -> float:
    from modelval.preprocessing import prepare_batch

    batches = [prepare_batch(images[s : s + batch_size], config, "cpu") for s in range(0, len(images), batch_size)]
    with torch.inference_mode():
        t0 = time.perf_counter()
        for x in batches:
            model(x)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=320)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate
    from modelval.models import load_model
    from modelval.preprocessing import PreprocessOverrides

    stimuli = StimulusSet.load(DATA_ROOT, progress=False)
    stimuli = StimulusSet(stimuli.root, stimuli.stimuli[: args.images], stimuli.images[: args.images])
    bundled_model, _ = load_bundled()
    folder = Path(tempfile.mkdtemp(prefix="bench-specs-"))
    torch.save(bundled_model.state_dict(), folder / "lite0.pt")
    (folder / "nets.py").write_text(
        "from efficientnet_lite_pytorch import EfficientNet\n"
        "def lite0():\n    return EfficientNet.from_name('efficientnet-lite0')\n"
    )
    example = torch.zeros(2, 3, 224, 224)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.jit.trace(bundled_model, example).save(str(folder / "lite0.ts"))
    batch = torch.export.Dim("batch", min=1, max=4096)
    torch.export.save(
        torch.export.export(bundled_model, (example,), dynamic_shapes={"inputs": {0: batch}}), folder / "lite0.pt2"
    )
    own = PreprocessOverrides(mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic")
    specs = {
        "registry efficientnet_lite0": ("efficientnet_lite0", {}),
        "file.py:factory + --checkpoint": (f"{folder / 'nets.py'}:lite0", {"checkpoint": folder / "lite0.pt"}),
        "torchscript:": (f"torchscript:{folder / 'lite0.ts'}", {"overrides": own}),
        "export:": (f"export:{folder / 'lite0.pt2'}", {"overrides": own}),
    }
    rows, ratios = [], {}
    for label, (spec, options) in specs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            loaded = load_model(spec, progress=False, **options)
        config = loaded.config.preprocess.for_stimuli(None)
        pairs = []
        for _ in range(args.repeats):
            bare = bare_forward(loaded.model, stimuli.images, config, args.batch_size)
            t0 = time.perf_counter()
            evaluate(loaded.model, config, stimuli, batch_size=args.batch_size, progress=False, n_bootstrap=1000)
            pairs.append(((time.perf_counter() - t0), bare))
        ratio = median([full / bare for full, bare in pairs])
        ratios[label] = ratio
        rows.append(
            [label, f"{median([p[1] for p in pairs]):.2f}", f"{median([p[0] for p in pairs]):.2f}", f"{ratio:.3f}"]
        )
    reference = ratios["registry efficientnet_lite0"]
    for row, label in zip(rows, ratios, strict=True):
        row.append(f"{ratios[label] / reference:.3f}")
    print_table(["spec", "bare forward s", "evaluate s", "evaluate / bare", "vs registry"], rows)
    spread = max(abs(r / reference - 1) for r in ratios.values())
    print(f"spec_overhead_spread={spread:.4f}")


if __name__ == "__main__":
    main()
