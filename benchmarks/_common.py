"""Shared helpers of the benchmark scripts (not a test module; run the scripts directly or via run_all.py)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The real stimuli: $MODELVAL_DATA_ROOT, else ../shared/cue-conflict beside the checkout (never copied here).
DATA_ROOT = Path(os.environ.get("MODELVAL_DATA_ROOT") or ROOT.parent / "shared" / "cue-conflict")


def load_bundled():
    """The real EfficientNet-Lite0 and its cue-conflict preprocessing (no resize, 0.5/0.5 normalization)."""
    from modelval.models import load_model

    loaded = load_model("efficientnet_lite0", progress=False)
    return loaded.model, loaded.entry.preprocess.for_stimuli(None)


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def load_average() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())


class Stopwatch:
    """Adds up the seconds spent in one function of a module while installed (the function is looked up at
    call time there, so replacing the module attribute times every call)."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name, self.seconds = module, name, 0.0
        self.real: Callable[..., Any] = getattr(module, name)

    def __enter__(self) -> Stopwatch:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return self.real(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(self.module, self.name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.module, self.name, self.real)


def synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bare_forward(model: Any, batches: list[Any], device: Any) -> float:
    """Seconds of model(x) over the prepared batches, the device drained before and after."""
    import torch

    with torch.inference_mode():
        synchronize(device)
        start = time.perf_counter()
        for x in batches:
            model(x)
        synchronize(device)
    return time.perf_counter() - start
