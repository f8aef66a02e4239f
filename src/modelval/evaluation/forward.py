"""The one forward path: uint8 images -> the model's raw outputs -> the 16 categories' probabilities.

The hot loop does only what must be done per batch: move the uint8 images to the device,
resize/crop/normalize (:func:`modelval.preprocessing.prepare_batch`), forward, and keep the raw outputs;
softmax and the 1000 -> 16 mapping run on the whole output in fixed chunks, so a fresh run and a run from
stored outputs (the output cache, saved outputs) give bit-identical probabilities. Decisions do not
depend on the batch size or the number of decoding workers (tests check it on the real model).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from modelval.behaviour.categories import CATEGORIES, Aggregation, CategoryMapper
from modelval.behaviour.label_map import LabelMap
from modelval.errors import ModelOutputError, ModelvalError, OutOfMemory, placing, user_code
from modelval.evaluation.stored import probe_indices, resumed_rows, stored_outputs
from modelval.preprocessing import PreprocessConfig, prepare_batch
from modelval.records.digests import values_kept
from modelval.records.output_cache import OutputCache
from modelval.runtime import DEFAULT_BATCH_SIZE, canonical_device, resolve_device, tune_allocator

Model = Callable[[torch.Tensor], object]
Amp = Literal["bf16", "fp16"]
AMP_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}


def logits_of(output: object) -> torch.Tensor:
    """Accept plain tensors and HuggingFace-style outputs with a ``.logits`` attribute.

    Parameters
    ----------
    output
        What the model returned.
    """
    logits = getattr(output, "logits", output)
    if not isinstance(logits, torch.Tensor):
        raise ModelOutputError(f"the model returned {type(output).__name__}, expected a logits tensor (N, 1000)")
    return logits


def describe_model(model: object) -> str:
    """``"Tiny (nets.py)"``: the model's class (or function) and the file its code is in, for error messages.

    Parameters
    ----------
    model
        The model.
    """
    plain = inspect.isfunction(model) or inspect.ismethod(model)
    name = getattr(model, "__qualname__", repr(model)) if plain else type(model).__qualname__
    code = getattr(model if plain else getattr(type(model), "forward", None), "__code__", None)
    where = code.co_filename if code is not None else None
    if where is None or where.startswith("<"):
        try:
            where = inspect.getsourcefile(model if plain else type(model))  # type: ignore[arg-type]
        except (TypeError, OSError):  # builtins and C extensions; a class of `python -c` or a notebook
            where = None
    return name + (f" ({where})" if where else "")


def checked_logits(
    output: object, batch: int, model: object, first: int = 0, names: Sequence[str] | None = None
) -> torch.Tensor:
    """The ``(batch, classes)`` logits of one forward, refused by name when they cannot be a classifier's answer.

    A 1-D or 3-D output, another batch size, or a NaN/infinite value raises :class:`ModelOutputError`: the
    softmax of a NaN row is NaN and its argmax is class 0 ("airplane"), a decision the model never made.
    ``first`` is the index of the batch's first image in ``names`` (the images' names, when known), so the
    message can name the images.

    Parameters
    ----------
    output
        What the model returned for one batch.
    batch
        The batch's size.
    model
        The model (named in the error).
    first
        The batch's first image's index in ``names``.
    names
        The images' names.
    """
    logits = getattr(output, "logits", output)
    if not isinstance(logits, torch.Tensor):
        raise ModelOutputError(
            f"{describe_model(model)} returned {type(output).__name__}, expected a logits tensor ({batch}, classes)"
        )
    if logits.ndim != 2 or logits.shape[0] != batch:
        raise ModelOutputError(
            f"{describe_model(model)} returned a tensor of shape {tuple(logits.shape)} for a batch of {batch} "
            f"images; a classifier returns logits of shape ({batch}, classes)"
        )
    finite = torch.isfinite(logits).all(dim=1)
    if not bool(finite.all()):
        bad = (~finite).nonzero().flatten().tolist()
        kinds = "NaN" if bool(torch.isnan(logits).any()) else "infinite"
        if kinds == "NaN" and bool(torch.isinf(logits).any()):
            kinds = "NaN and infinite"
        images = [first + i for i in bad]
        shown = ", ".join(names[i] if names is not None else f"#{i}" for i in images[:3])
        raise NonFiniteOutputError(
            f"{describe_model(model)} returned {kinds} logits for {len(bad)} of the {batch} images of a batch "
            f"({shown}{', ...' if len(bad) > 3 else ''}); a NaN or infinite output is no decision (check the "
            "weights, the input scaling and --amp)",
            images,
        )
    return logits


class NonFiniteOutputError(ModelOutputError):
    """The model returned NaN or infinite logits; ``images`` are the indices of the affected images."""

    def __init__(self, message: str, images: list[int]) -> None:
        super().__init__(message)
        self.images = images


def _target(device: str | torch.device) -> torch.device:
    """The evaluation device: a ``torch.device`` (resolved once, above) as it is; a string resolved here."""
    return device if isinstance(device, torch.device) else resolve_device(device)


def place_model(model: Model, device: torch.device) -> str | None:
    """Put an ``nn.Module`` on ``device`` (in place, as ``module.to`` does); the device it came from, or ``None``.

    The inputs are fed on ``device``, so the module must sit there: a model loaded on the CPU and evaluated on
    CUDA is moved, not reported as a failing forward. ``cuda`` and ``cuda:0`` are the same device when 0 is the
    current one, so a model already in place is never moved. A module whose tensors sit on several devices (a
    model split by hand) is refused: modelval feeds one device. A plain callable is left alone (``None``): its
    own code decides where its tensors are, and a mismatch inside it is reported by the forward.

    Parameters
    ----------
    model
        The model.
    device
        The resolved device.
    """
    if not isinstance(model, torch.nn.Module):
        return None
    target = canonical_device(device)
    found = {canonical_device(d) for d in {t.device for t in (*model.parameters(), *model.buffers())}}
    if not found or found == {target}:
        return None
    if len(found) > 1:
        shown = ", ".join(sorted(str(d) for d in found))
        raise ModelvalError(
            f"{describe_model(model)} has its parameters and buffers on several devices ({shown}); modelval feeds "
            f"the inputs on one: put the whole model on one device (model.to({str(device)!r})) and pass device= "
            "naming it"
        )
    (origin,) = found
    if origin.type == "meta":
        raise ModelvalError(
            f"{describe_model(model)} is on the meta device (its weights hold no values): load its weights "
            "(load_state_dict(..., assign=True) or to_empty()) before evaluating it"
        )
    with values_kept(model), placing(f"the weights of {describe_model(model)}", device):
        model.to(device)  # a copy of the same values: the weights digest stays valid
    return str(origin)


def _forward_context(device: torch.device, amp: Amp | None) -> contextlib.AbstractContextManager[object]:
    if amp is None:
        return contextlib.nullcontext()
    if amp not in AMP_DTYPES:
        raise ValueError(f"amp must be None or one of {sorted(AMP_DTYPES)}, got {amp!r}")
    # bf16 autocast runs on CPU too, so the flip report can be tested without a GPU (fp16 is a GPU's precision:
    # torch's CPU autocast takes it, slowly).
    return torch.autocast(device_type=device.type, dtype=AMP_DTYPES[amp])


@contextlib.contextmanager
def _memory_format(model: Model, channels_last: bool) -> Iterator[None]:
    """Run ``model`` with channels_last weights and restore the default layout afterwards."""
    module = model if channels_last and isinstance(model, torch.nn.Module) else None
    if module is not None:
        with values_kept(module):  # the same values in another layout: no second weights digest
            module.to(memory_format=torch.channels_last)
    try:
        yield
    finally:
        if module is not None:
            with values_kept(module):
                module.to(memory_format=torch.contiguous_format)


def category_probabilities(
    model: Model,
    images: torch.Tensor,
    config: PreprocessConfig,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str | torch.device = "auto",
    aggregation: Aggregation = "mean",
    progress: bool = True,
    amp: Amp | None = None,
    channels_last: bool = False,
    label_map: LabelMap | None = None,
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """(N, 16) aggregated probabilities of uint8 ``images`` under ``config``.

    ``amp="bf16"`` runs the forward under bfloat16 autocast (decisions may flip, see
    :func:`decision_flips`); ``channels_last`` runs model and inputs in NHWC layout. Softmax and the
    category mapping always run in float32.

    Parameters
    ----------
    model
        The classifier (an ``nn.Module`` or a callable returning logits).
    images
        uint8 stimuli, ``(N, 3, H, W)``.
    config
        The preprocessing.
    batch_size
        Images per forward.
    device
        Where it runs (``"auto"``: CUDA when available).
    aggregation
        How the 1000 ImageNet probabilities become 16 (``mean`` or ``sum`` of each category's classes).
    progress
        A progress bar on stderr.
    amp
        ``bf16`` or ``fp16`` autocast (``None``: float32).
    channels_last
        NHWC layout.
    label_map
        A head other than ImageNet-1k's, read through this map.
    names
        The images' names, for the errors.
    """
    return category_probabilities_by_aggregation(
        model,
        images,
        config,
        aggregations=(aggregation,),
        batch_size=batch_size,
        device=device,
        progress=progress,
        amp=amp,
        channels_last=channels_last,
        label_map=label_map,
        names=names,
    )[aggregation]


def category_probabilities_by_aggregation(
    model: Model,
    images: torch.Tensor,
    config: PreprocessConfig,
    *,
    aggregations: Sequence[Aggregation] = ("mean",),
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str | torch.device = "auto",
    progress: bool = True,
    amp: Amp | None = None,
    channels_last: bool = False,
    label_map: LabelMap | None = None,
    cache: OutputCache | None = None,
    cache_key: str | None = None,
    names: Sequence[str] | None = None,
) -> dict[Aggregation, np.ndarray]:
    """One forward pass, several 1000 -> 16 aggregations of the same softmax: ``{aggregation: (N, 16)}``.

    A forward that raises, or returns no ``(batch, classes)`` logits, or NaN/infinite ones, stops with one
    :class:`~modelval.errors.ModelvalError` line naming the model (and, with ``names``, the images).

    Parameters
    ----------
    model, images, config
        As :func:`category_probabilities`.
    aggregations
        Each aggregation to compute.
    batch_size, device, progress, amp, channels_last, label_map, names
        As :func:`category_probabilities`.
    cache, cache_key
        The output cache and this forward's key (:func:`output_key`).
    """
    mappers = {aggregation: CategoryMapper(aggregation, label_map) for aggregation in aggregations}
    check = next(iter(mappers.values())).label_map.check_outputs
    outputs, _ = model_outputs(
        model, images, config, batch_size=batch_size, device=device, progress=progress, amp=amp,
        channels_last=channels_last, check_width=check, cache=cache, cache_key=cache_key, names=names,
    )  # fmt: skip
    return probabilities_from_outputs(outputs, mappers)


def model_outputs(
    model: Model,
    images: torch.Tensor,
    config: PreprocessConfig,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device: str | torch.device = "auto",
    progress: bool = True,
    amp: Amp | None = None,
    channels_last: bool = False,
    check_width: Callable[[int], object] | None = None,
    cache: OutputCache | None = None,
    cache_key: str | None = None,
    cache_meta: dict[str, object] | None = None,
    names: Sequence[str] | None = None,
    memory_notes: list[str] | None = None,
) -> tuple[np.ndarray, str]:
    """The model's raw outputs on uint8 ``images`` under ``config``: ``((N, K) float32, cache status)``.

    The one forward path of modelval. ``amp="bf16"`` runs the forward under bfloat16 autocast (decisions
    may flip, see :func:`decision_flips`); ``channels_last`` runs model and inputs in NHWC layout. With a
    ``cache`` and its ``cache_key`` (:func:`~modelval.evaluation.stored.output_key`), stored outputs are returned
    without a forward pass, each finished batch is kept so that an interrupted run resumes, and the whole is
    stored at the end.
    Stored outputs (and an interrupted run's rows) are used only after the model, run on the probe stimuli,
    answers as it did when they were written (:mod:`modelval.evaluation.stored`): an entry another model left
    under the same key is replaced, never served.
    ``device``: a ``torch.device`` is used as it is (resolve ``"auto"`` once, above); an ``nn.Module`` elsewhere is
    moved there before the first forward (:func:`place_model`), and a forward that still meets tensors on two
    devices stops with one :class:`~modelval.errors.DeviceMismatchError` line.
    ``check_width`` sees the number of outputs after the first batch (a label map's check), so a wrong head
    fails before the whole set is run. A forward that raises, or returns no ``(batch, classes)`` logits, or
    NaN/infinite ones, stops with one :class:`~modelval.errors.ModelvalError` line naming the model (and, with
    ``names``, the images): a NaN row's argmax would be "airplane", a decision the model never made.
    A batch that runs out of device memory is run again at half the size (as timm's bulk runner does), and each
    halving is appended to ``memory_notes``; one image at a time that still does not fit stops with one
    :class:`~modelval.errors.OutOfMemory` line. Any other device error (an illegal memory access) is never retried.

    Parameters
    ----------
    model, images, config
        As :func:`category_probabilities`.
    batch_size, device, progress, amp, channels_last, names
        As :func:`category_probabilities`.
    check_width
        Sees the number of outputs after the first batch.
    cache, cache_key
        The output cache and this forward's key (:func:`output_key`).
    cache_meta
        Stored beside the outputs (the model's name).
    memory_notes
        Receives a line for each halving of the batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    target = _target(device)
    if target.type == "cpu":
        tune_allocator()  # see modelval.runtime: without it, large batches spend half their time in the kernel
    place_model(model, target)
    if isinstance(model, torch.nn.Module):
        model.eval()
    caching = cache is not None and cache_key is not None
    pin = target.type == "cuda"
    layout = torch.channels_last if channels_last else torch.contiguous_format

    def forward_rows(index: np.ndarray) -> np.ndarray:
        contiguous = index[-1] - index[0] + 1 == len(index)
        batch = images[int(index[0]) : int(index[-1]) + 1] if contiguous else images[torch.from_numpy(index)]
        if pin:
            batch = batch.pin_memory()
        inputs = prepare_batch(batch, config, target, non_blocking=pin).contiguous(memory_format=layout)
        forward = user_code(f"the forward of {describe_model(model)}", inputs_on=str(target))
        with _forward_context(target, amp), forward:
            output = model(inputs)
        shown = [names[int(i)] for i in index] if names is not None else None
        return checked_logits(output, len(index), model, names=shown).float().cpu().numpy()

    # The layout changes happen outside inference mode: weights re-made inside it would be inference tensors,
    # and the caller's model could no longer be trained or exported afterwards.
    with _memory_format(model, channels_last), torch.inference_mode():
        probe: np.ndarray | None = None
        replaced = ""
        done = np.zeros(len(images), dtype=bool)
        out: np.ndarray | None = None
        if caching and len(images):
            assert cache is not None and cache_key is not None
            # The probe: the model's answers on a few fixed stimuli. A stored entry (or an interrupted run's rows)
            # is used only when it was written by a model that answers the same: no digest sees everything.
            probe = forward_rows(probe_indices(len(images)))
            if check_width is not None:
                check_width(probe.shape[1])
            stored, replaced = stored_outputs(cache, cache_key, probe, amp, len(images), forward_rows)
            if stored is not None:
                return stored, "hit"
            out = resumed_rows(cache, cache_key, probe, done)
        reused = int(done.sum())
        pending = np.flatnonzero(~done)
        bar = tqdm(
            total=len(images), initial=reused, desc="evaluating", unit="img", disable=not progress, leave=False
        )
        save_rows: Callable[[int, np.ndarray], object] | None = None
        if cache is not None and cache_key is not None:  # each finished batch kept: an interrupted run resumes
            save_rows = functools.partial(cache.save_rows, cache_key)
        with bar:
            out = _forward_pending(
                forward_rows, pending, len(images), out, batch_size, target, check_width, save_rows, memory_notes, bar
            )
    if out is None:  # no images
        out = np.empty((0, 0), dtype=np.float32)
    if caching and probe is not None:
        assert cache is not None and cache_key is not None
        cache.save(cache_key, out, {**(cache_meta or {}), "rows": len(images)}, probe=probe)
    status = "miss" if reused == 0 else f"resumed: {reused} of {len(images)} rows reused"
    return out, status + replaced


def _forward_pending(
    forward_rows: Callable[[np.ndarray], np.ndarray],
    pending: np.ndarray,
    n_images: int,
    out: np.ndarray | None,
    batch_size: int,
    target: torch.device,
    check_width: Callable[[int], object] | None,
    save_rows: Callable[[int, np.ndarray], object] | None,
    memory_notes: list[str] | None,
    bar: Any,
) -> np.ndarray | None:
    """The rows ``pending`` run batch by batch into ``out`` (made at the first batch), each contiguous batch
    kept by ``save_rows``; a batch out of device memory runs again at half the size."""
    first, size = 0, batch_size
    while first < len(pending):
        index = pending[first : first + size]
        try:
            logits = forward_rows(index)
        except OutOfMemory as error:
            if size == 1:
                raise OutOfMemory(
                    f"{error}; not even one image at a time fits: run it on a device with more memory"
                ) from error.__cause__
            size = _after_out_of_memory(target, size, memory_notes)
            continue
        first += len(index)
        if out is None:
            if check_width is not None:
                check_width(logits.shape[1])
            out = np.empty((n_images, logits.shape[1]), dtype=np.float32)
        out[index] = logits
        if save_rows is not None and index[-1] - index[0] + 1 == len(index):
            save_rows(int(index[0]), logits)
        bar.update(len(index))
    return out


def _after_out_of_memory(target: torch.device, size: int, notes: list[str] | None) -> int:
    """The next batch size after a batch of ``size`` ran out of memory on ``target`` (half), noted; memory freed."""
    import gc

    smaller = max(1, size // 2)
    gc.collect()
    if target.type == "cuda":
        torch.cuda.empty_cache()
    elif target.type == "mps" and hasattr(torch, "mps"):
        torch.mps.empty_cache()
    if notes is not None:
        notes.append(f"batch size {size} -> {smaller}: out of memory on {target}")
    return smaller


#: Rows mapped to categories at a time: fixed, so a fresh run and a run from stored outputs compute
#: bit-identical probabilities whatever batch size produced the outputs.
MAPPING_ROWS = 256


def probabilities_from_outputs(
    outputs: np.ndarray, mappers: dict[Aggregation, CategoryMapper]
) -> dict[Aggregation, np.ndarray]:
    """Softmax of raw ``outputs`` in float32, mapped to the 16 categories by each mapper: ``{aggregation: (N, 16)}``.

    Parameters
    ----------
    outputs
        Raw outputs, ``(N, K)``.
    mappers
        Each aggregation's mapper to the 16 categories.
    """
    result = {aggregation: np.empty((len(outputs), len(CATEGORIES)), dtype=np.float32) for aggregation in mappers}
    with torch.inference_mode():
        for start in range(0, len(outputs), MAPPING_ROWS):
            chunk = torch.from_numpy(np.ascontiguousarray(outputs[start : start + MAPPING_ROWS]))
            probabilities = torch.softmax(chunk, dim=1)
            for aggregation, mapper in mappers.items():
                result[aggregation][start : start + len(chunk)] = mapper(probabilities).numpy()
    return result
