"""evaluate() over a bare forward, per model size: what the first call pays for hashing the weights, and what the
second call of the same model pays (nothing: the digest is remembered per model object).

Models: the bundled EfficientNet-Lite0 (real weights, 4.7 M parameters), a random-init ResNet-50 (25.6 M) and a
random-init ViT-L/16 (304 M) from timm (random weights cost what trained ones cost to hash and run). On N real
stimuli:

- bare forward: the model on the prepared float tensors (prepared before the clock starts, on the device), same
  batch size;
- first evaluate(): a model object evaluated for the first time, so its output-cache key hashes its weights;
- second evaluate(): the same model object again.

Each is timed once, in that order, after a warm-up forward (a batch on a GPU, two images on the CPU); the
ratios are of this one run, so on a shared machine read them with the load average printed. The digest's
share is the time spent hashing the weights inside the first call (``tensors_digest``), and ``key`` the whole
output-cache key (weights, architecture, stimuli) of each call.
No assertion on time: read the numbers. Ends with ``second_evaluate_ratio=<the largest over the models>``.

    python benchmarks/bench_evaluate_overhead.py                       # CPU: 32 images, batch 32
    python benchmarks/bench_evaluate_overhead.py --device cuda         # GPU: 384 images, batch 256
    python benchmarks/bench_evaluate_overhead.py --models lite0 resnet50 --images 64
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import time
from typing import Any

import torch
from _common import DATA_ROOT, Stopwatch, bare_forward, load_average, print_table, synchronize

MODELS = ("lite0", "resnet50", "vit_l16")
TIMM = {"resnet50": "resnet50", "vit_l16": "vit_large_patch16_224"}


def build(name: str, device: torch.device) -> tuple[torch.nn.Module, Any, str]:
    """``(module on device, its preprocessing for the stimuli, a label)``."""
    from modelval.models import load_model
    from modelval.preprocessing import PreprocessConfig

    if name == "lite0":
        loaded = load_model("efficientnet_lite0", device=device, progress=False)
        return loaded.model, loaded.entry.preprocess.for_stimuli(None), "EfficientNet-Lite0 (bundled weights)"
    import timm

    model = timm.create_model(TIMM[name], pretrained=False).eval().to(device)
    cfg = model.pretrained_cfg
    config = PreprocessConfig(mean=tuple(cfg["mean"]), std=tuple(cfg["std"]), interpolation="bicubic")
    return model, config, f"{TIMM[name]} (timm, random init)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--images", type=int, default=None, help="real stimuli (default: 32 on CPU, 384 on a GPU)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 32 on CPU, 256 on a GPU")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--threads", default="auto", help="torch CPU threads (auto: idle CPUs)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="evaluate()'s resamples (its default: 1000)")
    args = parser.parse_args()

    import modelval.evaluation as evaluation
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate
    from modelval.preprocessing import prepare_batch
    from modelval.records import provenance
    from modelval.runtime import DEFAULT_BATCH_SIZE, resolve_device, set_threads, tune_allocator

    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    images = args.images or (384 if gpu else 32)
    batch_size = args.batch_size or (256 if gpu else DEFAULT_BATCH_SIZE)
    threads = set_threads(args.threads)
    if device.type == "cpu":
        tune_allocator()
    everything = StimulusSet.load(DATA_ROOT, progress=False)
    step = max(1, len(everything) // images)
    index = list(range(0, len(everything), step))[:images]  # spread over the 16 categories
    stimuli = dataclasses.replace(
        everything, stimuli=[everything.stimuli[i] for i in index], images=everything.images[torch.tensor(index)]
    )
    print(
        f"device: {device} = {provenance.device_name(device)}; torch {torch.__version__}; threads={threads}; "
        f"{len(stimuli)} real stimuli, batch {batch_size}; bootstrap {args.bootstrap}; "
        f"{platform.python_implementation()} {platform.python_version()}; load avg {load_average()}"
    )
    rows, second_ratios = [], []
    for name in args.models:
        model, config, label = build(name, device)
        params = sum(p.numel() for p in model.parameters()) / 1e6
        weight_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        batches = [prepare_batch(stimuli.images[i : i + batch_size], config, device)
                   for i in range(0, len(stimuli), batch_size)]  # fmt: skip
        # Warm-up: CUDA's context and kernels with a whole batch; on the CPU a batch can be all N images of a ViT-L
        # (a minute), and two images load the same code.
        bare_forward(model, batches[:1] if gpu else [batches[0][:2]], device)
        bare = bare_forward(model, batches, device)
        timed: list[tuple[float, float, float]] = []  # (evaluate s, key s, weights digest s)
        for _ in range(2):
            with Stopwatch(evaluation, "output_key") as key, Stopwatch(provenance, "tensors_digest") as digest:
                synchronize(device)
                start = time.perf_counter()
                evaluate(model, config, stimuli, batch_size=batch_size, device=device, progress=False,
                         n_bootstrap=args.bootstrap)  # fmt: skip
                synchronize(device)
                timed.append((time.perf_counter() - start, key.seconds, digest.seconds))
        (first, first_key, first_digest), (second, second_key, second_digest) = timed
        second_ratios.append(second / bare)
        rows.append([
            label, f"{params:.1f}", f"{weight_bytes / 2**20:.0f}", f"{bare:.3f}",
            f"{first:.3f}", f"{first / bare:.2f}", f"{first_digest:.3f} ({100 * first_digest / first:.0f}%)",
            f"{first_key:.3f}", f"{second:.3f}", f"{second / bare:.2f}", f"{second_key:.4f}", f"{second_digest:.3f}",
        ])  # fmt: skip
        del model, batches
        if gpu:
            torch.cuda.empty_cache()
    print_table(
        ["model", "params M", "weights MiB", "bare forward s", "1st evaluate s", "1st/bare", "1st: digest s (%)",
         "1st: key s", "2nd evaluate s", "2nd/bare", "2nd: key s", "2nd: digest s"],
        rows,
    )  # fmt: skip
    print(f"second_evaluate_ratio={max(second_ratios):.3f}")


if __name__ == "__main__":
    main()
