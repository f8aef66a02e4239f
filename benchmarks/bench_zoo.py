"""A model zoo through the validation matrix in one session, against the sum of its weight loads and bare forwards.

N random-init timm architectures (seeded; random weights cost what trained ones cost to load, hash and run) are
saved to local files and listed in a models file, each under both normalizations (its own and the "wrong"
one), as a nightly lists its zoo. Then, in this one process:

- **the whole run**: what ``modelval validate --report-dir`` does: a :class:`~modelval.runner.matrix.ValidationRunner`
  evaluates every (model, normalization) through the front door, judges every case and writes the reports
  (tables, decision CSVs, plots). The early sanity gate is off: random-init models would fail it on a sample
  and skip their full run, which a zoo of trained models never does. The output cache is off (a nightly
  over new weights never hits it).
- **the floor**: per model, the weight load (``timm.create_model`` + ``load_state_dict`` from the file + ``.to``)
  and one bare forward (``model(x)`` over prepared batches, on the device) per normalization.

A warm-up forward runs before both, so neither pays CUDA's start-up, and all of it runs twice: the first round is
each architecture's first use (CUDA loads kernels lazily, cuDNN picks algorithms), which only the whole run would
pay, so it is printed apart and the ratio is the second round's. Printed: the ratio of the whole run to the
floor, and where the rest goes (time spent inside the named functions during the whole run). No assertion on
time: read the numbers with the load average. Ends with ``zoo_ratio=<whole / floor>``; the goal is <= 1.2 on a GPU
(measured on an H200, 10 models, 1280 stimuli: 1.092; round 1 1.844).

    python benchmarks/bench_zoo.py                                  # CPU: 4 models, 2 stimuli per category
    python benchmarks/bench_zoo.py --device cuda --models 10 --per-category 80
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import DATA_ROOT, Stopwatch, bare_forward, load_average, print_table, synchronize

#: Small to large, convolutional and transformer: what a zoo holds.
ARCHITECTURES = (
    "resnet18", "mobilenetv3_small_100", "efficientnet_b0", "convnext_atto", "vit_tiny_patch16_224",
    "regnety_002", "resnet50", "convnext_tiny", "deit_small_patch16_224", "vit_base_patch16_224",
)  # fmt: skip


def make_zoo(folder: Path, architectures: list[str]) -> Path:
    """Random-init weights saved to ``folder/weights`` and a models file listing them (both normalizations)."""
    import timm

    (folder / "weights").mkdir()
    lines = []
    for index, name in enumerate(architectures):
        torch.manual_seed(index)
        model = timm.create_model(name, pretrained=False)
        torch.save(model.state_dict(), folder / "weights" / f"{name}.pt")
        lines += [f"[models.{name}]", f'spec = "timm:{name}"', f'checkpoint = "weights/{name}.pt"',
                  'normalizations = ["model", "wrong"]', ""]  # fmt: skip
    (folder / "modelval.toml").write_text("\n".join(lines))
    return folder / "modelval.toml"


def subset(folder: Path, per_category: int) -> Path:
    """A folder of the first ``per_category`` real stimuli of each category (symlinks)."""
    for category in sorted(p for p in DATA_ROOT.iterdir() if p.is_dir()):
        (folder / category.name).mkdir(parents=True)
        for image in sorted(category.glob("*.png"))[:per_category]:
            (folder / category.name / image.name).symlink_to(image)
    return folder


def floor(name: str, weights: Path, stimuli: Any, device: torch.device, batch_size: int) -> tuple[float, float]:
    """``(seconds to load the weights, seconds of bare forwards under both normalizations)``."""
    import timm

    from modelval.preprocessing import PreprocessConfig, prepare_batch

    synchronize(device)
    start = time.perf_counter()
    model = timm.create_model(name, pretrained=False)
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    model = model.to(device).eval()
    synchronize(device)
    load = time.perf_counter() - start
    cfg = model.pretrained_cfg
    own = PreprocessConfig(mean=tuple(cfg["mean"]), std=tuple(cfg["std"]), interpolation="bicubic")
    imagenet = own.mean != (0.5, 0.5, 0.5)
    half, mean, std = (0.5,) * 3, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    wrong = PreprocessConfig(mean=half if imagenet else mean, std=half if imagenet else std, interpolation="bicubic")
    forward = 0.0
    for config in (own, wrong):
        batches = [prepare_batch(stimuli.images[i : i + batch_size], config, device)
                   for i in range(0, len(stimuli.images), batch_size)]  # fmt: skip
        forward += bare_forward(model, batches, device)
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return load, forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--models", type=int, default=None, help="zoo size (default: 4 on CPU, 10 on a GPU)")
    parser.add_argument("--per-category", type=int, default=None, help="stimuli per category (2 CPU, 80 GPU)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 32 on CPU, 256 on a GPU")
    parser.add_argument("--threads", default="auto", help="torch CPU threads (auto: idle CPUs)")
    args = parser.parse_args()

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.runner.models_file import read_models_file
    from modelval.runtime import resolve_device, set_threads, tune_allocator

    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    count = args.models or (10 if gpu else 4)
    per_category = args.per_category or (80 if gpu else 2)
    batch_size = args.batch_size or (256 if gpu else 32)
    threads = set_threads(args.threads)
    if device.type == "cpu":
        tune_allocator()
    os.environ["MODELVAL_NO_RUN_STORE"] = "1"
    architectures = list(ARCHITECTURES[:count])

    with tempfile.TemporaryDirectory(prefix="modelval-zoo-") as scratch:
        folder = Path(scratch)
        models_file = make_zoo(folder, architectures)
        stimuli = StimulusSet.load(subset(folder / "stimuli", per_category), allow_modified=True, progress=False)
        models = read_models_file(models_file)
        print(f"{len(models)} models x 2 normalizations on {len(stimuli.stimuli)} stimuli, device {device}, "
              f"batch {batch_size}, {threads} CPU threads; torch {torch.__version__}, {platform.processor() or '?'}; "
              f"load average {load_average()}")  # fmt: skip

        warm = torch.nn.Conv2d(3, 8, 3).to(device)  # CUDA's start-up is paid by neither side
        with torch.inference_mode():
            warm(torch.zeros(1, 3, 32, 32, device=device))
        synchronize(device)

        # Two rounds, each the whole run then the floor. The first round's whole run is the first use of each
        # architecture's kernels (CUDA loads them lazily, cuDNN picks its algorithms), which the floor after it no
        # longer pays: it is printed, and the ratio is the second round's, both sides warm.
        rounds = [one_round(models, architectures, stimuli, device, batch_size, folder, r) for r in (1, 2)]
        (cold_whole, cold_load, cold_forward, _), (whole, total_load, total_forward, watches) = rounds
        base = total_load + total_forward
        print(f"\nround 1 (first use of each architecture): whole run {cold_whole:.2f} s, "
              f"ratio {cold_whole / (cold_load + cold_forward):.3f}")  # fmt: skip
        print(f"round 2: whole run {whole:.2f} s; floor {base:.2f} s (loads {total_load:.2f} + forwards "
              f"{total_forward:.2f})")  # fmt: skip
        shares = [(what, f"{w.seconds:.2f}", f"{w.seconds / whole:.0%}") for what, w in watches.items()]
        print_table(("inside the round-2 whole run", "seconds", "share of the run"), shares)
        print(f"zoo_ratio={whole / base:.3f}")


def one_round(
    models: Any,
    architectures: list[str],
    stimuli: Any,
    device: torch.device,
    batch_size: int,
    folder: Path,
    number: int,
) -> tuple[float, float, float, dict[str, Stopwatch]]:
    """The whole run, then each model's floor: ``(whole s, loads s, bare forwards s, the whole run's stopwatches)``."""
    import modelval.evaluation as evaluation
    import modelval.models as models_package
    import modelval.records.provenance as provenance
    import modelval.runner.reports as reports
    from modelval.runner.cases import build_user_cases
    from modelval.runner.matrix import ValidationRunner

    # Each function where its caller looks it up (evaluate() calls the names it imported).
    watches = {
        "model load (build, weights, .to)": Stopwatch(models_package, "load_model"),
        "forward incl. preprocessing": Stopwatch(evaluation, "model_outputs"),
        "weights digest (output-cache key)": Stopwatch(provenance, "tensors_digest"),
        "shape bias + bootstrap": Stopwatch(evaluation, "compute_shape_bias"),
        "reports (tables, CSVs, plots)": Stopwatch(reports, "write_validation_reports"),
    }
    for watch in watches.values():
        watch.__enter__()
    try:
        start = time.perf_counter()
        runner = ValidationRunner(stimuli=stimuli, device=device, batch_size=batch_size, output_cache=False,
                                  early_gate=False)  # fmt: skip
        runner.add_user_models(models)
        for case in build_user_cases(models):
            runner.run(case)
        reports.write_validation_reports(runner.rows, runner.evaluations, folder / f"reports-{number}")
        synchronize(device)
        whole = time.perf_counter() - start
    finally:
        for watch in watches.values():
            watch.__exit__()

    rows = []
    total_load = total_forward = 0.0
    for name in architectures:
        load, bare = floor(name, folder / "weights" / f"{name}.pt", stimuli, device, batch_size)
        total_load, total_forward = total_load + load, total_forward + bare
        rows.append((name, f"{load:.2f}", f"{bare:.2f}"))
    print(f"\nround {number}")
    print_table(("model", "weight load s", "bare forwards s (2 normalizations)"), rows)
    return whole, total_load, total_forward, watches


if __name__ == "__main__":
    main()
