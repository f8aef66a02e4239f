"""Stored outputs: the key that names one forward pass, and the probe that proves stored outputs are the model's.

The output cache (:mod:`modelval.records.output_cache`) keeps a model's raw outputs under :func:`output_key`;
:func:`~modelval.evaluation.forward.model_outputs` serves them only after the model, run on a few probe stimuli,
answers as it did when they were written (:func:`same_outputs`): an entry another model left under the same key
is replaced, never served.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from modelval.preprocessing import PreprocessConfig
from modelval.records.digests import architecture_digest, module_state_digest, state_dict_digest
from modelval.records.output_cache import OutputCache, recheck_indices, rows_agree
from modelval.records.provenance import decoder_record, json_digest, package_version
from modelval.runtime import resolve_device

if TYPE_CHECKING:
    from modelval.datasets.stimulus_set import StimulusSet


def stored_outputs(
    cache: OutputCache,
    key: str,
    probe: np.ndarray,
    amp: str | None,
    rows: int,
    forward_rows: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray | None, str]:
    """The stored outputs when the model answers the probe as their writer did and a few stored rows drawn anew
    each run (what a fixed probe cannot see, :mod:`modelval.records.output_cache`) as they are stored; else what
    was discarded (an entry, or an interrupted run's rows, another model left under the same key).

    Parameters
    ----------
    cache
        The output cache.
    key
        This forward's key.
    probe
        The model's outputs on the probe stimuli, now.
    amp
        The precision (the probe's tolerance).
    rows
        How many stimuli the run covers.
    forward_rows
        The model's outputs on the stimuli at the given indices, now.
    """
    replaced = ""
    stored = cache.load(key, rows=rows)
    if stored is not None:
        picked = recheck_indices(rows, probe_indices(rows))
        if not same_outputs(stored.probe, probe, amp):
            replaced = " (a stored entry under this key answered otherwise on the probe stimuli: replaced)"
        elif not len(picked) or rows_agree(stored.outputs[picked], forward_rows(picked), amp):
            return stored.outputs, ""
        else:
            replaced = f" (re-ran {len(picked)} stored rows drawn at random: they differed; the entry was replaced)"
        cache.discard(key)
    partial_probe = cache.partial_probe(key)
    if partial_probe is not None and not same_outputs(partial_probe, probe, amp):
        cache.discard(key)
        replaced = " (an interrupted run's rows under this key answered otherwise on the probe stimuli: discarded)"
    cache.start_rows(key, probe)
    return None, replaced


def resumed_rows(cache: OutputCache, key: str, probe: np.ndarray, done: np.ndarray) -> np.ndarray | None:
    """The rows an interrupted run of the same model stored (marked in ``done``), in a fresh output array.

    Parameters
    ----------
    cache
        The output cache.
    key
        This forward's key.
    probe
        The model's outputs on the probe stimuli (their width is the outputs').
    done
        One flag per stimulus, set here for each row found.
    """
    out: np.ndarray | None = None
    for start, rows in cache.saved_rows(key, len(done), probe.shape[1]):
        if out is None:
            out = np.empty((len(done), probe.shape[1]), dtype=np.float32)
        out[start : start + len(rows)] = rows
        done[start : start + len(rows)] = True
    return out


#: Stimuli of the probe: the output cache's proof that stored outputs are this model's (see :func:`model_outputs`).
PROBE_IMAGES = 4
#: (rtol, atol relative to the largest stored value) of a probe's agreement, per precision. The probe is run
#: alone both times, so the same model on the same kind of device gives the same bits or nearly (a GPU may pick
#: another kernel); another model's answers differ by far more.
PROBE_TOLERANCE: dict[str | None, tuple[float, float]] = {
    None: (1e-3, 1e-4), "bf16": (2e-2, 1e-2), "fp16": (5e-3, 2e-3),
}  # fmt: skip


def probe_indices(count: int) -> np.ndarray:
    """The probe's stimuli among ``count``: :data:`PROBE_IMAGES` evenly spaced indices, fixed for the set.

    Parameters
    ----------
    count
        How many stimuli the set holds.
    """
    return np.unique(np.linspace(0, count - 1, min(PROBE_IMAGES, count)).round().astype(np.int64))


def same_outputs(stored: np.ndarray, fresh: np.ndarray, amp: str | None = None) -> bool:
    """Whether two runs' outputs on the same stimuli agree within the precision's tolerance (:data:`PROBE_TOLERANCE`).

    Parameters
    ----------
    stored
        The outputs stored.
    fresh
        The outputs now, on the same stimuli.
    amp
        The precision both ran under.
    """
    if stored.shape != fresh.shape:
        return False
    rtol, atol = PROBE_TOLERANCE.get(amp, PROBE_TOLERANCE["bf16"])
    scale = max(1.0, float(np.abs(stored).max(initial=0.0)))
    return bool(np.allclose(fresh, stored, rtol=rtol, atol=atol * scale))


#: Bumped whenever the forward path (decoding, prepare_batch, the forward, the stored outputs) changes
#: meaning: it is part of every output-cache key, so no stored output of an older path is ever reused.
FORWARD_PATH_VERSION = 2


def output_key(
    model: Callable[[torch.Tensor], object],
    config: PreprocessConfig,
    stimuli: StimulusSet,
    *,
    amp: str | None = None,
    device: str | torch.device = "auto",
    channels_last: bool = False,
) -> tuple[str | None, dict[str, object]]:
    """``(key, fields)`` of the output cache for this forward pass; ``key`` is ``None`` when the model has no
    state dict to identify it (then nothing is cached).

    Every input that can change an output is a field: the weights (state-dict digest), the architecture (the
    module tree and the source file of its class), the module state outside the state dict (plain attributes,
    tensors kept as attributes, non-persistent buffers, hooks:
    :func:`~modelval.records.digests.module_state_digest`), the resolved preprocessing, the stimuli's content, the
    precision, the device class, channels-last, the forward path's version, the versions of modelval, torch and
    torchvision, and the decoder's (Pillow, libjpeg-turbo, zlib): an upgrade that moves the numbers or the
    pixels must not be hidden by the cache.

    The weights and architecture digests are remembered per model object (:mod:`modelval.records.provenance`)
    and the stimuli's per stimulus set, so a second key of the same model hashes no weights again. Put the
    model on its device first (:func:`~modelval.evaluation.forward.place_model`): a move changes its tensors, so
    the digest is computed again.

    Parameters
    ----------
    model
        The model.
    config
        The preprocessing.
    stimuli
        The stimulus set.
    amp, channels_last
        As :func:`~modelval.evaluation.forward.category_probabilities`.
    device
        Where it runs.
    """
    weights = state_dict_digest(model)
    fields: dict[str, object] = {
        "weights": weights,
        "architecture": architecture_digest(model),
        "module_state": module_state_digest(model),
        "preprocessing": config.to_dict(),
        "stimuli": stimuli.content_digest(),
        "precision": amp or "fp32",
        "device_class": (device if isinstance(device, torch.device) else resolve_device(device)).type,
        "channels_last": channels_last,
        "forward_path": FORWARD_PATH_VERSION,
        "versions": {name: package_version(name) for name in ("modelval", "torch", "torchvision")},
        "decoder": decoder_record(),
    }
    return (json_digest(fields) if weights is not None else None), fields
