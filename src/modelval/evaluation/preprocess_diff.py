"""Two preprocessing pipelines run side by side on the same stimuli, compared after every stage, then forwarded.

For each image both pipelines decode their copy and run their steps (:mod:`modelval.evaluation.pipelines`). After
each stage, in the order of :data:`~modelval.evaluation.pipelines.STAGES`, the two states are compared in grey levels:
the largest and the mean |difference| and the share of pixels where any channel differs. A pipeline's state after a
stage is the state after its leading steps of that stage or an earlier one; a step that runs after a later stage
(a channel flip after the normalization) is compared where it runs and named by its own stage. The last stage,
``device and batch``, compares the model's inputs (after a batch transform) and the forward's outputs.

The first stage whose states differ by more than :data:`TOLERANCE` grey levels (or whose sizes differ) is where
the pipelines diverge; when every input agrees, a forward whose logits move by more than :data:`LOGIT_TOLERANCE`
diverges at ``device and batch``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from modelval.errors import InputValidationError, user_code
from modelval.evaluation.pipelines import (
    OTHER,
    RANK,
    STAGES,
    WHOLE,
    GreyMap,
    Pipeline,
    as_tensor,
    classify,
    next_map,
    raw_values,
)

if TYPE_CHECKING:
    import torch

#: Grey levels (0-255) by which two states may differ and still count as the same: float32 rounding is far below it,
#: the uint8 against the float resize path (one grey level) far above.
TOLERANCE = 1e-3
#: The same for the model's inputs as fed (normalized values).
INPUT_TOLERANCE = 1e-5
#: Logits that move less than this with equal inputs are float rounding (a batch of 7 against 32 moves Lite0's
#: logits by 2e-6 on a CPU, NHWC by 7e-6).
LOGIT_TOLERANCE = 1e-3
LAST = len(STAGES) - 1


@dataclass
class StageDiff:
    """The two pipelines' states after one stage, compared over every image."""

    stage: str
    #: Steps that first ran at this stage, in A and in B.
    steps_a: tuple[str, ...] = ()
    steps_b: tuple[str, ...] = ()
    max_abs: float = 0.0
    sum_abs: float = 0.0
    values: int = 0
    changed_pixels: int = 0
    pixels: int = 0
    #: Why the states could not be compared value by value (sizes differ, a scale that is not known).
    note: str = ""
    #: The two states hold the same grey levels on other scales (a [0, 255] range, another mean/std): how.
    rescaled: str = ""
    #: ``grey levels``, or ``input values`` (the model's inputs as fed, at ``device and batch``).
    unit: str = "grey levels"

    @property
    def mean_abs(self) -> float | None:
        return self.sum_abs / self.values if self.values else None

    @property
    def changed_share(self) -> float | None:
        return self.changed_pixels / self.pixels if self.pixels else None

    @property
    def tolerance(self) -> float:
        return TOLERANCE if self.unit == "grey levels" else INPUT_TOLERANCE

    @property
    def diverged(self) -> bool:
        return bool(self.rescaled) or self.note.startswith("sizes differ") or self.max_abs > self.tolerance

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        """Count one image's two states (sizes that differ are noted, not counted).

        Parameters
        ----------
        a, b
            A's and B's state, (C, H, W), on one scale.
        """
        self.count(delta_stats(a, b, self.tolerance))

    def count(self, stats: tuple[float, float, int, int, int] | str) -> None:
        """Count one image's :func:`delta_stats` (a string: why the states could not be compared).

        Parameters
        ----------
        stats
            The largest and summed |difference|, the values, the changed pixels and the pixels.
        """
        if isinstance(stats, str):
            self.note = stats
            return
        largest, total, values, changed, pixels = stats
        self.max_abs = max(self.max_abs, largest)
        self.sum_abs += total
        self.values += values
        self.changed_pixels += changed
        self.pixels += pixels

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage, "diverged": self.diverged, "steps_a": list(self.steps_a),
            "steps_b": list(self.steps_b), "unit": self.unit, "max_abs": self.max_abs if self.values else None,
            "mean_abs": self.mean_abs, "changed_pixel_share": self.changed_share, "note": self.note,
            "rescaled": self.rescaled,
        }  # fmt: skip


def delta_stats(a: np.ndarray, b: np.ndarray, tolerance: float) -> tuple[float, float, int, int, int] | str:
    """The largest and summed |a - b|, the values, the pixels where a channel differs by more than ``tolerance``
    and the pixels; or, when the sizes differ, the note that says so.

    Parameters
    ----------
    a, b
        Two states, (C, H, W).
    tolerance
        The difference that counts as a change.
    """
    if a.shape != b.shape:
        return f"sizes differ: {'x'.join(map(str, a.shape[1:]))} against {'x'.join(map(str, b.shape[1:]))}"
    delta = np.abs(a - b)
    changed = int((delta > tolerance).any(axis=0).sum())
    return float(delta.max(initial=0.0)), float(delta.sum()), delta.size, changed, delta.shape[1] * delta.shape[2]


@dataclass
class _Traced:
    """One pipeline's steps with what the first image showed of them: stage, grey map after each step."""

    pipeline: Pipeline
    steps: list[Any] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    maps: list[GreyMap | None] = field(default_factory=list)

    def prefix(self, rank: int) -> int:
        """How many leading steps belong to the stage of ``rank`` or an earlier one."""
        count = 0
        for stage in self.stages:
            if RANK[stage] > rank:
                break
            count += 1
        return count

    def run(self, image: Any) -> list[Any]:
        """Every state of ``image``: decoded, then after each step; the first image fixes stages and grey maps."""
        states = [image]
        for index, step in enumerate(self.steps):
            with user_code(f"the step {step.name} of the pipeline {self.pipeline.name}"):
                states.append(step.run(states[-1]))
            if len(self.stages) <= index:
                self._learn(step, states[-2], states[-1])
        return states

    def _learn(self, step: Any, before: Any, after: Any) -> None:
        import torch

        raw_before, raw_after = raw_values(before, np.float64), raw_values(after, np.float64)
        kind, fit, reversed_ = classify(raw_before, raw_after)
        stage = step.stage or kind
        float_after = isinstance(after, torch.Tensor) and after.is_floating_point()
        float_before = isinstance(before, torch.Tensor) and before.is_floating_point()
        if step.stage is None and raw_before.shape != raw_after.shape and float_after and not float_before:
            stage, fit = WHOLE, None  # it resized and converted at once: several stages in one step
        elif stage == OTHER:
            stage = WHOLE
        previous = self.maps[-1] if self.maps else GreyMap.identity(raw_before.shape[0])
        value_step = raw_before.shape == raw_after.shape
        grey = next_map(previous, fit if value_step else None, reversed_, after)
        if grey is not None and not value_step and float_after and not float_before:
            grey = None  # a new scale from a step that also moved pixels: not known
        self.stages.append(stage)
        self.maps.append(grey)


def _grey(traced: _Traced, states: list[Any], count: int) -> tuple[np.ndarray, GreyMap | None]:
    """The state after ``count`` steps in grey levels, and its grey map (``None``: not known, values as they are)."""
    values = raw_values(states[count])
    grey = GreyMap.identity(values.shape[0]) if count == 0 else traced.maps[count - 1]
    return (values, None) if grey is None else (grey.grey(values), grey)


@dataclass
class PixelRun:
    """Both pipelines over the stimuli: each stage's comparison and both forwards' logits."""

    stages: list[StageDiff]
    logits_a: np.ndarray
    logits_b: np.ndarray
    stages_a: tuple[str, ...]
    stages_b: tuple[str, ...]

    @property
    def logit_shift(self) -> tuple[float, float]:
        """The largest and the mean |difference| of the logits."""
        if not self.logits_a.size:
            return 0.0, 0.0
        delta = np.abs(self.logits_a - self.logits_b)
        return float(delta.max()), float(delta.mean())

    def first_divergence(self) -> str | None:
        """The stage where the pipelines first differ (``None``: they agree to the logits)."""
        for diff in self.stages:
            if diff.diverged:
                new = [*diff.steps_a, *diff.steps_b]
                ranks = [RANK.get(s.split(":", 1)[0], LAST) for s in new]
                stage = STAGES[min(ranks)] if ranks and min(ranks) < RANK[diff.stage] else diff.stage
                whole = [s for s in new if s.startswith(WHOLE)]
                return f"{WHOLE} ({whole[0].split(': ', 1)[1]})" if whole else stage
        return "device and batch" if self.logit_shift[0] > LOGIT_TOLERANCE else None


def run_pipelines(
    model: Any,
    a: Pipeline,
    b: Pipeline,
    items: Sequence[Callable[[], tuple[bytes | None, Any]]],
    *,
    device: torch.device,
    progress: Callable[[int], object] | None = None,
) -> PixelRun:
    """Run ``a`` and ``b`` on every item and compare them stage by stage (module docstring).

    Parameters
    ----------
    model
        The classifier both pipelines feed (copied when they run it on other devices or layouts).
    a, b
        The pipelines.
    items
        Each stimulus: a function returning ``(file bytes to decode, or None, an image already decoded)``.
    device
        The run's device, for a pipeline that names none.
    progress
        Called with the number of images done after each chunk.
    """

    from modelval.runtime import tune_allocator

    if device.type == "cpu":
        tune_allocator()  # as the one forward path does: without it a CPU batch spends half its time in the kernel
    traced = (_Traced(a, a.steps()), _Traced(b, b.steps()))
    models = _models(model, (a, b), device)
    stages = [StageDiff(stage) for stage in STAGES]
    stages[LAST].unit = "input values"
    logits: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    chunk = min(math.lcm(a.batch_size, b.batch_size), max(a.batch_size, b.batch_size, 256))
    for start in range(0, len(items), chunk):
        inputs: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
        for item in items[start : start + chunk]:
            data, image = item()
            runs = [t.run(_decoded(t.pipeline, data, image)) for t in traced]
            if start == 0 and not inputs[0]:  # different input sizes: said at the first image, not after a chunk
                _same_size(a, b, runs[0][-1], runs[1][-1])
            _compare_stages(traced, runs, stages)
            for side, states in enumerate(runs):
                inputs[side].append(as_tensor(states[-1]))
        sides = zip((a, b), models, inputs, strict=True)
        fed = [_batch_inputs(p, _stacked(p, x), target) for p, (_, target), x in sides]
        _same_size(a, b, fed[0][0], fed[1][0])
        for image_a, image_b in zip(fed[0].cpu().numpy(), fed[1].cpu().numpy(), strict=True):
            stages[LAST].add(image_a, image_b)
        for side, pipeline in enumerate((a, b)):
            logits[side].append(_forward(models[side], pipeline, fed[side]))
        if progress is not None:
            progress(min(start + chunk, len(items)))
    for diff, ta, tb in zip(stages, *(_new_steps(t) for t in traced), strict=True):
        diff.steps_a, diff.steps_b = ta, tb
    out_a, out_b = (np.concatenate(x) if x else np.zeros((0, 0)) for x in logits)
    return PixelRun(stages, out_a, out_b, tuple(traced[0].stages), tuple(traced[1].stages))


def _same_size(a: Pipeline, b: Pipeline, first_a: Any, first_b: Any) -> None:
    shape_a, shape_b = tuple(as_tensor(first_a).shape), tuple(as_tensor(first_b).shape)
    if shape_a != shape_b:
        raise InputValidationError(f"the pipelines feed inputs of different sizes: {a.name} {shape_a}, "
                                   f"{b.name} {shape_b}; a diff compares what one model is fed")  # fmt: skip


def _stacked(pipeline: Pipeline, inputs: list[torch.Tensor]) -> torch.Tensor:
    import torch

    sizes = sorted({tuple(x.shape) for x in inputs})
    if len(sizes) > 1:
        raise InputValidationError(f"the pipeline {pipeline.name} returns inputs of several sizes ({sizes[0]}, "
                                   f"{sizes[1]}): it must resize or crop every image to one size")  # fmt: skip
    return torch.stack(inputs)


def _decoded(pipeline: Pipeline, data: bytes | None, image: Any) -> Any:
    if data is None:
        return image.copy()
    with user_code(f"the decoder of the pipeline {pipeline.name}"):
        return pipeline.decoder()(data)


def _compare_stages(traced: tuple[_Traced, _Traced], runs: list[list[Any]], stages: list[StageDiff]) -> None:
    done: dict[tuple[int, int], tuple[Any, ...]] = {}  # stages with the same two states share one comparison
    for rank, diff in enumerate(stages[:LAST]):
        counts = (traced[0].prefix(rank), traced[1].prefix(rank))
        if counts not in done:
            (va, map_a), (vb, map_b) = (_grey(t, s, n) for t, s, n in zip(traced, runs, counts, strict=True))
            rescaled = ""
            if _float(runs[0][counts[0]]) and _float(runs[1][counts[1]]) and (
                map_a is not None and map_b is not None and not map_a.same(map_b)
            ):  # a PIL image or uint8 tensor is in grey levels by nature; two float states must agree on the scale too
                rescaled = f"grey level = {map_a.describe()} in A, {map_b.describe()} in B"
            unknown = (map_a is None or map_b is None) and va.shape == vb.shape
            done[counts] = (delta_stats(va, vb, diff.tolerance), rescaled, unknown)
        stats, rescaled, unknown = done[counts]
        later = [t.steps[i].name for t, n in zip(traced, counts, strict=True)
                 for i in range(n, len(t.stages)) if t.stages[i] == WHOLE]  # fmt: skip
        if isinstance(stats, str) and later:  # one side does this stage inside a step that does everything at once
            diff.note = f"compared after {later[0]}, which does several stages at once"
            continue
        diff.rescaled = diff.rescaled or rescaled
        if unknown:
            diff.note = diff.note or "values of an unknown scale: compared as they are"
        diff.count(stats)


def _float(state: Any) -> bool:
    return bool(getattr(state, "is_floating_point", lambda: False)())


def _new_steps(traced: _Traced) -> list[tuple[str, ...]]:
    """For each stage, the names of the steps that first ran there (``stage: name``)."""
    found, done = [], 0
    for rank in range(len(STAGES)):
        upto = len(traced.stages) if rank == LAST else traced.prefix(rank)
        found.append(tuple(f"{traced.stages[i]}: {traced.steps[i].name}" for i in range(done, upto)))
        done = max(done, upto)
    return found


def _models(model: Any, pipelines: Sequence[Pipeline], device: torch.device) -> list[tuple[Any, torch.device]]:
    """Each pipeline's model and device: one copy per (device, layout) the pipelines run it on."""
    import torch

    from modelval.evaluation.forward import place_model

    made: dict[tuple[str, bool, bool], Any] = {}
    out = []
    for pipeline in pipelines:
        target = torch.device(pipeline.device) if pipeline.device else device
        key = (str(target), pipeline.channels_last, pipeline.compile)
        if key not in made:
            # the caller's model is never changed: another device, layout or compilation runs on a copy
            plain = not made and not pipeline.channels_last and not pipeline.compile
            copy_ = model if plain else copy.deepcopy(model)
            place_model(copy_, target)
            if isinstance(copy_, torch.nn.Module):
                copy_.eval()
                if pipeline.channels_last:
                    copy_ = copy_.to(memory_format=torch.channels_last)
            if pipeline.compile:
                copy_ = torch.compile(copy_)
            made[key] = copy_
        out.append((made[key], target))
    return out


def _batch_inputs(pipeline: Pipeline, inputs: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The stacked inputs on the device, through the pipeline's batch transform, one batch at a time."""
    import torch

    parts = []
    for start in range(0, len(inputs), pipeline.batch_size):
        batch = inputs[start : start + pipeline.batch_size].to(device)
        if pipeline.batch_transform is not None:
            with user_code(f"the batch transform of the pipeline {pipeline.name}"):
                batch = pipeline.batch_transform(batch)
        parts.append(batch)
    return torch.cat(parts)


def _forward(model_and_device: tuple[Any, torch.device], pipeline: Pipeline, inputs: torch.Tensor) -> np.ndarray:
    import torch

    from modelval.evaluation.forward import checked_logits, describe_model

    model, target = model_and_device
    layout = torch.channels_last if pipeline.channels_last else torch.contiguous_format
    out = []
    with torch.inference_mode():
        for start in range(0, len(inputs), pipeline.batch_size):
            batch = inputs[start : start + pipeline.batch_size].to(target).contiguous(memory_format=layout)
            with user_code(f"the forward of {describe_model(model)}", inputs_on=str(target)):
                output = model(batch)
            out.append(checked_logits(output, len(batch), model).float().cpu().numpy())
    return np.concatenate(out)
