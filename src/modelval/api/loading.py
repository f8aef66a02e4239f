"""What the front door loads before a model runs: the stimuli (found, fetched, verified) and the model (a
registry name, a spec, an ``nn.Module`` or a loaded model), each checked once, in the pipeline's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelval.api.options import EvaluationOptions, ModelOptions
from modelval.errors import ModelvalError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.models.entry import LoadedModel
    from modelval.models.zero_shot import ZeroShotSettings
    from modelval.preprocessing import PreprocessConfig


def load_stimuli(options: EvaluationOptions, *, offline: bool | None = None) -> StimulusSet:
    """The stimuli of ``options.dataset``, found (and fetched unless ``offline``) and verified; their pixels are
    decoded on first use, so a model that fails to load (a factory that raises, weights not available offline)
    costs no decoding.

    Parameters
    ----------
    options
        The evaluation options (the dataset, its folder, the cache).
    offline
        Never download (``None``: the ``offline`` setting).
    """
    from modelval.datasets.fetch import ensure_stimuli
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.records.store import cache_on

    folder = ensure_stimuli(options.data_root, dataset=options.dataset, offline=offline, progress=options.progress)
    return StimulusSet.load(
        folder,
        workers=options.workers,
        progress=options.progress,
        cache=cache_on(options.cache),
        dataset=options.dataset,
        allow_modified=options.allow_modified_stimuli,
        decode=False,
    )


def module_entry(module: nn.Module, preprocess: PreprocessConfig, name: str):
    """A registry-like entry for a module passed from Python, so it loads through the same code path.

    Parameters
    ----------
    module
        The model.
    preprocess
        The preprocessing it was trained with.
    name
        Its name in reports.
    """
    from modelval.models.entry import ModelEntry

    return ModelEntry(
        name=name, family="user", variant="module", source="python", preprocess=preprocess,
        build=lambda context: module, provenance=f"nn.Module {type(module).__name__} passed from Python",
        label=name, preprocess_origin="the preprocess= argument",
    )  # fmt: skip


def load(
    model: Any,
    *,
    preprocess: PreprocessConfig | None = None,
    normalization: str = "model",
    model_options: ModelOptions | None = None,
    progress: bool = False,
    name: str | None = None,
    device: torch.device | None = None,
) -> tuple[LoadedModel, str]:
    """``(loaded model, report name)`` for a spec string, an ``nn.Module`` (with ``preprocess``) or a loaded model.

    Parameters
    ----------
    model, preprocess
        As :func:`run_model` takes them.
    normalization
        ``model``, ``imagenet`` or ``half``.
    model_options
        How the model is loaded.
    progress
        Show download progress.
    name
        The name the model goes by in reports.
    device
        The evaluation device, resolved once at the door (``None``: ``model_options.device``).
    """
    from pathlib import Path

    from modelval.models.entry import LoadedModel
    from modelval.models.registry import load_entry

    opts = model_options or ModelOptions()
    if isinstance(model, LoadedModel):
        return model, name or model.config.spec or model.entry.name
    check_model(model, preprocess, opts.zero_shot)  # the errors said once, the same before any data is read
    common: dict[str, Any] = dict(
        normalization=normalization, overrides=opts.overrides(), checkpoint=opts.checkpoint,
        checkpoint_key=opts.checkpoint_key, strip_prefix=opts.strip_prefix, checkpoint_dir=opts.checkpoint_dir,
        device=device if device is not None else opts.device, offline=opts.offline, progress=progress,
    )  # fmt: skip
    if isinstance(model, str):
        from modelval.models import load_model

        base_dir = None if opts.base_dir is None else Path(opts.base_dir)
        loaded = load_model(model, **common, trust_repo=opts.trust_repo, imagenet_head=opts.label_map is None,
                            base_dir=base_dir, zero_shot=opts.zero_shot)  # fmt: skip
        return loaded, name or model
    assert preprocess is not None  # check_model refused a module without it
    label = name or type(model).__name__
    return load_entry(module_entry(model, preprocess, label), **common), label


def check_model(model: Any, preprocess: PreprocessConfig | None, zero_shot: ZeroShotSettings | None = None) -> None:
    """Refuse what cannot be loaded before any data is read: an unknown registry name (with suggestions),
    an ``nn.Module`` without its preprocessing, ``preprocess=`` with a spec, or neither, and zero-shot settings
    for a spec that is never a zero-shot model.

    Parameters
    ----------
    model, preprocess
        As :func:`run_model` takes them.
    zero_shot
        The zero-shot settings given (``None``: none).
    """
    from modelval.models.entry import LoadedModel

    if isinstance(model, LoadedModel):
        return
    if isinstance(model, str):
        from modelval.models import get_entry, parse_spec

        if parse_spec(model).is_registry:
            get_entry(model)
        if zero_shot is not None:
            from modelval.models.specs import check_zero_shot_spec

            check_zero_shot_spec(model)
        if preprocess is not None:
            raise ModelvalError(
                "preprocess= is for an nn.Module; a spec brings its own preprocessing (override single values "
                "with mean=, std=, interpolation=, input_size=)"
            )
        return
    from torch import nn

    if not isinstance(model, nn.Module):
        raise ModelvalError(
            f"model must be a registry name or spec (str), an nn.Module or a LoadedModel, not {type(model).__name__}"
        )
    if preprocess is None:
        raise ModelvalError(
            "an nn.Module needs its preprocessing: pass preprocess=PreprocessConfig(mean=..., std=..., "
            "interpolation=...) with the values it was trained with"
        )
