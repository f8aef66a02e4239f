"""Loading any spec: a registry entry, or an entry made for the spec's source (one code path for both)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    import torch

    from modelval.models.zero_shot import ZeroShotSettings

from modelval.errors import ModelvalError
from modelval.extras import require_for_source
from modelval.models import files, hf, sources
from modelval.models.entry import LoadedModel, ModelEntry
from modelval.models.registry import get_entry, load_entry
from modelval.models.specs import ModelSpec, check_zero_shot_spec, parse_spec
from modelval.preprocessing import PreprocessConfig, PreprocessOverrides


def entry_for_spec(
    spec: str | ModelSpec,
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    trust_repo: bool = False,
    imagenet_head: bool = True,
    base_dir: Path | None = None,
    zero_shot: ZeroShotSettings | None = None,
) -> ModelEntry:
    """The :class:`ModelEntry` a spec stands for (a registry entry, or one built for this source).

    Parameters
    ----------
    spec
        A registry name or a spec (docs/models.md).
    checkpoint
        A state dict the entry will load.
    trust_repo
        Consent to run a ``hub:`` repository's code.
    imagenet_head
        Refuse an HF head that is not ImageNet-1k (a label map reads another).
    base_dir
        A relative file is read from here (the models file's folder).
    zero_shot
        How an image-text model becomes a classifier.
    """
    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec)
    if checkpoint is not None and parsed.kind in ("torchscript", "export"):
        raise ModelvalError(
            f"{parsed.text}: --checkpoint does not apply to a {parsed.kind} file, which holds its weights"
        )
    if zero_shot is not None:
        check_zero_shot_spec(parsed)
    if parsed.is_registry:
        return get_entry(parsed.target)
    require_for_source(parsed.kind, f"the spec {parsed.text!r}")
    if parsed.kind == "timm":
        return sources.timm_entry(parsed, pretrained=checkpoint is None)
    if parsed.kind == "hf":
        folder = hf.hf_local_folder(parsed, base_dir)
        if folder is not None:
            return hf.hf_folder_entry(parsed, folder, imagenet_head=imagenet_head, zero_shot=zero_shot)
        return hf.hf_entry(parsed, imagenet_head=imagenet_head, zero_shot=zero_shot)
    if parsed.kind == "open_clip":
        return sources.open_clip_entry(parsed, zero_shot=zero_shot)
    if parsed.kind == "torchvision":
        return sources.torchvision_entry(parsed, pretrained=checkpoint is None)
    if parsed.kind == "hub":
        return sources.hub_entry(parsed, trust_repo=trust_repo)
    if parsed.kind == "factory":
        return files.factory_entry(parsed, base_dir=base_dir)
    if parsed.kind == "torchscript":
        return files.torchscript_entry(parsed, base_dir=base_dir)
    return files.export_entry(parsed, base_dir=base_dir)


def load_model(
    spec: str,
    *,
    normalization: str = "model",
    overrides: PreprocessOverrides | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    trust_repo: bool = False,
    imagenet_head: bool = True,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device = "auto",
    offline: bool | None = None,
    progress: bool = True,
    base_dir: Path | None = None,
    checkpoint_key: str | None = None,
    strip_prefix: str | None = None,
    zero_shot: ZeroShotSettings | None = None,
) -> LoadedModel:
    """Load a registered model or any model spec in eval mode, with the preprocessing it was trained with.

    A registry name (``modelval models list``) or a spec (``timm:``, ``hf:``, ``torchvision:``, ``hub:``,
    ``file.py:function``, ``torchscript:``, ...; see docs/models.md) is built through its source's own code
    path, its weights fetched and verified (unless offline), and put on ``device``. The result carries the
    source's preprocessing, where each value came from, and the evaluation protocol's preprocessing (the
    stimuli as they are: no resize, no crop).

    Parameters
    ----------
    spec
        The registry name or spec.
    normalization
        ``"model"`` (the source's own mean/std), or ``"imagenet"`` / ``"half"`` (0.5/0.5) forced on the model.
    overrides
        Single values replacing the source's mean, std, interpolation or input size (recorded as such).
    checkpoint
        A state dict loaded into the built module (``weights_only=True``, strict).
    trust_repo
        Allow a ``hub:`` spec to run the repository's code in this process.
    imagenet_head
        ``False`` when a label map is given: skips the ImageNet-1k check of HuggingFace configs.
    checkpoint_dir
        Where downloaded weights are kept (default: ``$MODELVAL_CHECKPOINT_DIR``, else the per-user cache).
    device
        ``"auto"`` (the default, as :func:`modelval.evaluate`'s, so the two agree: CUDA when available),
        ``"cpu"``, ``"cuda[:N]"``, ``"mps"``, or a ``torch.device`` the caller resolved (used as it is).
    offline
        Never download (``None``: ``$MODELVAL_OFFLINE``).
    progress
        Show download progress.
    base_dir
        The folder a spec's relative file paths are resolved from (a models file's folder).
    checkpoint_key
        The checkpoint's state dict under this key (``state_dict_ema``).
    strip_prefix
        A prefix removed from the checkpoint's keys (Lightning's ``model.``).
    zero_shot
        For ``open_clip:`` and ``hf:`` CLIP / SigLIP specs: the class space, templates and logit scale of the
        zero-shot head (:class:`~modelval.models.zero_shot.ZeroShotSettings`; ``None``: ImageNet-1k names, the
        80 OpenAI templates, the model's scale).

    Returns
    -------
    LoadedModel
        ``.model`` (in eval mode, on ``device``), ``.entry``, ``.config`` (the resolved preprocessing and its
        sources) and ``.preprocess`` (a transform of a PIL image under the evaluation protocol).

    Raises
    ------
    modelval.ModelvalError
        An unknown name (with suggestions), a spec whose extra is not installed, weights that are not available
        offline, or user code that raises (one line each).

    Examples
    --------
    >>> import modelval
    >>> loaded = modelval.load_model("efficientnet_lite0", progress=False)
    >>> loaded.model.training, loaded.config.preprocess.normalization_name, loaded.config.preprocess.mean
    (False, 'half', (0.5, 0.5, 0.5))
    >>> loaded.config.preprocess.resize, loaded.preprocess.config.resize  # the source's transform; the protocol's
    (256, None)
    """
    entry = entry_for_spec(
        spec, checkpoint=checkpoint, trust_repo=trust_repo, imagenet_head=imagenet_head, base_dir=base_dir,
        zero_shot=zero_shot,
    )  # fmt: skip
    loaded = load_entry(
        entry,
        normalization=normalization,
        overrides=overrides,
        checkpoint=checkpoint,
        checkpoint_dir=checkpoint_dir,
        device=device,
        offline=offline,
        progress=progress,
        checkpoint_key=checkpoint_key,
        strip_prefix=strip_prefix,
    )
    notes = _registry_notes(entry, loaded.config.preprocess) if normalization == "model" else ()
    if notes:
        loaded.config = dataclasses.replace(loaded.config, audit_notes=notes)
    return loaded


def _registry_notes(entry: ModelEntry, resolved: PreprocessConfig) -> tuple[str, ...]:
    """Where a registry entry of the same weights (same HF repository) prescribes another normalization."""
    from modelval.models.registry import list_models
    from modelval.models.weights import HFRepo

    if entry.source != "huggingface" or not entry.weights:
        return ()
    repo_id = entry.weights[0].repo_id  # type: ignore[attr-defined]
    notes = []
    for known in list_models():
        if not any(isinstance(part, HFRepo) and part.repo_id == repo_id for part in known.weights):
            continue
        if (known.preprocess.mean, known.preprocess.std) != (resolved.mean, resolved.std):
            notes.append(
                f"{repo_id} ships mean={resolved.mean} std={resolved.std}, but the registry entry {known.name} "
                f"evaluates these weights with mean={known.preprocess.mean} std={known.preprocess.std} "
                f"({known.provenance.split(';')[0]}); see `modelval models audit --model {known.name}`"
            )
    return tuple(notes)
