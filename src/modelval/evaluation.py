"""Evaluate a classifier on the cue-conflict stimuli: decode once, forward, map to 16 categories.

The hot loop does only what must be done per batch: move the uint8 images to the device,
resize/crop/normalize (:func:`modelval.preprocessing.prepare_batch`), forward, softmax and one
matrix product to the 16 categories. Decisions do not depend on the batch size or the number of
decoding workers (tests check it on the real model).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from modelval.categories import CATEGORIES, Aggregation, CategoryMapper
from modelval.data import EXPECTED_IMAGES, Stimulus, decode_stimuli, discover_stimuli
from modelval.decisions import Decision
from modelval.models.registry import resolve_device
from modelval.preprocessing import PreprocessConfig, prepare_batch
from modelval.shape_bias import ShapeBiasResult, compute_shape_bias

Model = Callable[[torch.Tensor], object]


@dataclass
class StimulusSet:
    """The stimuli's names and categories plus their pixels, decoded once as uint8 (N, 3, 224, 224)."""

    root: Path
    stimuli: list[Stimulus]
    images: torch.Tensor

    @classmethod
    def load(
        cls,
        root: str | os.PathLike[str],
        *,
        workers: int = 0,
        progress: bool = True,
        expected_count: int | None = EXPECTED_IMAGES,
    ) -> StimulusSet:
        root = Path(root)
        stimuli = discover_stimuli(root, expected_count=expected_count)
        return cls(root, stimuli, decode_stimuli(root, stimuli, workers=workers, progress=progress))

    def __len__(self) -> int:
        return len(self.stimuli)


@dataclass
class Evaluation:
    """Everything one evaluation produced: per-image scores and decisions, and the shape bias."""

    model_name: str
    config: PreprocessConfig
    aggregation: str
    stimuli: list[Stimulus]
    category_probabilities: np.ndarray  # (N, 16), aggregated probabilities
    decisions: list[Decision]
    result: ShapeBiasResult
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model_name,
            "preprocessing": self.config.to_dict(),
            "aggregation": self.aggregation,
            "images": len(self.stimuli),
            **self.result.to_dict(),
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
        }


def logits_of(output: object) -> torch.Tensor:
    """Accept plain tensors and HuggingFace-style outputs with a ``.logits`` attribute."""
    logits = getattr(output, "logits", output)
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"the model returned {type(output).__name__}, expected a logits tensor (N, 1000)")
    return logits


def category_probabilities(
    model: Model,
    images: torch.Tensor,
    config: PreprocessConfig,
    *,
    batch_size: int = 64,
    device: str | torch.device = "auto",
    aggregation: Aggregation = "mean",
    progress: bool = True,
) -> np.ndarray:
    """(N, 16) aggregated probabilities of uint8 ``images`` under ``config``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    target = resolve_device(device)
    if isinstance(model, torch.nn.Module):
        model.eval()
    mapper = CategoryMapper(aggregation)
    pin = target.type == "cuda"
    out = torch.empty((len(images), len(CATEGORIES)), dtype=torch.float32)
    with (
        torch.inference_mode(),
        tqdm(total=len(images), desc="evaluating", unit="img", disable=not progress, leave=False) as bar,
    ):
        for start in range(0, len(images), batch_size):
            batch = images[start : start + batch_size]
            if pin:
                batch = batch.pin_memory()
            inputs = prepare_batch(batch, config, target, non_blocking=pin)
            logits = logits_of(model(inputs)).float()
            out[start : start + len(batch)] = mapper(torch.softmax(logits, dim=1)).cpu()
            bar.update(len(batch))
    return out.numpy()


def decisions_from_probabilities(stimuli: Sequence[Stimulus], probabilities: np.ndarray) -> list[Decision]:
    """Argmax over the 16 categories (ties go to the first category in alphabetical order)."""
    choice = probabilities.argmax(axis=1)
    return [Decision(s.name, s.shape, s.texture, CATEGORIES[int(c)]) for s, c in zip(stimuli, choice, strict=True)]


def evaluate(
    model: Model,
    config: PreprocessConfig,
    stimuli: StimulusSet,
    *,
    model_name: str = "model",
    batch_size: int = 64,
    device: str | torch.device = "auto",
    aggregation: Aggregation = "mean",
    progress: bool = True,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> Evaluation:
    """Shape-bias evaluation of ``model`` (ImageNet logits) on decoded stimuli under ``config``."""
    start = time.perf_counter()
    probabilities = category_probabilities(
        model, stimuli.images, config, batch_size=batch_size, device=device, aggregation=aggregation, progress=progress
    )
    forward = time.perf_counter() - start
    decisions = decisions_from_probabilities(stimuli.stimuli, probabilities)
    result = compute_shape_bias(decisions, n_bootstrap=n_bootstrap, seed=seed)
    return Evaluation(
        model_name=model_name,
        config=config,
        aggregation=aggregation,
        stimuli=stimuli.stimuli,
        category_probabilities=probabilities,
        decisions=decisions,
        result=result,
        timings={"model_and_mapping": forward, "total": time.perf_counter() - start},
    )
