"""One :class:`ModelEntry` per spec source, each loading through that source's own loader.

Preprocessing is read from the source itself where it ships one: timm's ``pretrained_cfg``, the HF
repository's ``preprocessor_config.json``, torchvision's ``weights.transforms()``, or the
``PreprocessConfig`` a factory returns. Elsewhere (torch.hub entries, TorchScript, exported
programs, factories that return a bare module) it is ImageNet's, and the provenance says "default".
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    from torch import nn

    from modelval.models.zero_shot import ZeroShotSettings

from modelval.errors import DownloadError, ModelvalError, user_code
from modelval.models.entry import LoadContext, ModelEntry, TrainingData
from modelval.models.specs import ModelSpec
from modelval.models.weights import HFRepo, HubCode, WeightsPart, hf_cache_dir, torch_hub_dir
from modelval.preprocessing import PreprocessConfig

DEFAULT_ORIGIN = "default (ImageNet mean/std, bilinear: the source ships no preprocessing)"


def spec_entry(spec: ModelSpec, source: str, build: Callable[[LoadContext], nn.Module], **fields: Any) -> ModelEntry:
    """The entry a spec stands for: ``build`` makes its module; unless ``fields`` say otherwise, ImageNet's
    preprocessing, recorded as the default (the source ships none).

    Parameters
    ----------
    spec
        The parsed spec.
    source
        The library it loads through (``timm``, ``huggingface``, ...).
    build
        Makes the module from the load context.
    **fields
        Further fields of the :class:`~modelval.models.entry.ModelEntry`.
    """
    fields.setdefault("preprocess", PreprocessConfig())
    fields.setdefault("preprocess_origin", DEFAULT_ORIGIN)
    return ModelEntry(
        name=spec.text, family="user", variant=spec.kind, source=source, build=build, label=spec.text, **fields
    )


# --- timm --------------------------------------------------------------------------------------

#: The training sets a timm pretrained tag names (``<name>.<tag>``, e.g. ``laion2b_ft_in12k_in1k``): the set, its
#: size where it is published (None: not stated here) and how a model learns from it.
TIMM_TAG_DATA: dict[str, tuple[str, int | None, str]] = {
    "in1k": ("ImageNet-1k", 1_281_167, "supervised"),
    "in21k": ("ImageNet-21k", 14_197_122, "supervised"),
    "in22k": ("ImageNet-21k", 14_197_122, "supervised"),
    "in12k": ("ImageNet-12k", None, "supervised"),
    "laion2b": ("LAION-2B", 2_320_000_000, "image-text contrastive"),
    "openai": ("OpenAI WIT", 400_000_000, "image-text contrastive"),
}


def _timm_training(name: str, tag: str | None) -> TrainingData | None:
    """What a timm model learned from, read from its pretrained tag (timm's ``pretrained_cfg["tag"]``).

    ``a1_in1k`` -> ImageNet-1k; ``laion2b_ft_in12k_in1k`` -> LAION-2B, then ImageNet-12k, ImageNet-1k, with the
    images of the pre-training (the part before ``_ft_``). A tag whose pre-training names no set of
    :data:`TIMM_TAG_DATA` (``fb_ssl_yfcc100m_ft_in1k``) says nothing here: ``None``.
    """
    if not tag:
        return None
    pretraining, _, finetuning = tag.partition("_ft_")
    first = [TIMM_TAG_DATA[token] for token in pretraining.split("_") if token in TIMM_TAG_DATA]
    if not first:
        return None
    later = [TIMM_TAG_DATA[token] for token in finetuning.split("_") if token in TIMM_TAG_DATA]
    names = list(dict.fromkeys(stage[0] for stage in [*first, *later]))
    data = names[0] + (f", then {', '.join(names[1:])}" if len(names) > 1 else "")
    kind = first[0][2] + (", then fine-tuned" if finetuning else "")
    return TrainingData(data, first[0][1], kind, f"timm pretrained tag {name}.{tag}")


def _timm_pretrained_cfg(model_name: str) -> Any:
    """timm's pretrained config of ``model_name``; a clear error when this timm does not know it."""
    import timm

    try:
        cfg = timm.models.get_pretrained_cfg(model_name)
    except RuntimeError:  # an unknown pretrained tag
        cfg = None
    if cfg is None:
        raise ModelvalError(f"timm {timm.__version__} has no pretrained config for {model_name!r}")
    return cfg


def timm_data_config(model_name: str) -> dict[str, Any]:
    """timm's evaluation data config of a pretrained model, as its inference script resolves it.

    ``use_test_size=True``: a pretrained config may name a test resolution and crop (``test_input_size``,
    ``test_crop_pct``) other than the training ones; timm's own inference script evaluates with those
    (timm PR #2769), so they are the source's eval transform. Without it the training-time values were
    recorded (``resnet50.a1_in1k``: 224 px and crop_pct 0.95 instead of 288 px and 1.0).

    Parameters
    ----------
    model_name
        timm's pretrained name (``resnet50.a1_in1k``).
    """
    from timm.data import resolve_data_config

    return dict(resolve_data_config({}, pretrained_cfg=_timm_pretrained_cfg(model_name).to_dict(), use_test_size=True))


def timm_preprocess(model_name: str) -> PreprocessConfig:
    """timm's own resolution of a pretrained config (:func:`timm_data_config`), as a PreprocessConfig.

    timm's ``crop_mode`` (center, squash, border) is not a PreprocessConfig field: on the square stimuli all
    three are the same center crop of the same resize; :func:`timm_preprocess_origin` records it.

    Parameters
    ----------
    model_name
        timm's pretrained name.
    """
    data = timm_data_config(model_name)
    size = data["input_size"][-1]
    return PreprocessConfig(
        mean=data["mean"],
        std=data["std"],
        interpolation=data["interpolation"],
        resize=math.floor(size / data["crop_pct"]),
        crop=size,
    )


def timm_preprocess_origin(model_name: str) -> str:
    """Where :func:`timm_preprocess` comes from, with the resolution, crop_pct and crop_mode timm resolved.

    Parameters
    ----------
    model_name
        timm's pretrained name.
    """
    data = timm_data_config(model_name)
    mode = data.get("crop_mode") or "center"
    square = "" if mode == "center" else " (on square images the same as center)"
    return (
        f"timm pretrained_cfg of {model_name} (resolve_data_config, use_test_size=True: {data['input_size'][-1]} px, "
        f"crop_pct {data['crop_pct']}, crop_mode {mode}{square})"
    )


def timm_entry(spec: ModelSpec, *, pretrained: bool = True) -> ModelEntry:
    """``timm:<name>[.<tag>]``: timm's pretrained loader, weights from the HF Hub cache.

    Parameters
    ----------
    spec
        The parsed spec.
    pretrained
        Load the pretrained weights.
    """
    import timm

    name = spec.target
    if not timm.is_model(name.split(".")[0]):
        close = difflib.get_close_matches(name.split(".")[0], timm.list_models(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ModelvalError(f"timm {timm.__version__} has no model {name!r}.{hint}")
    try:
        cfg = timm.models.get_pretrained_cfg(name)
    except RuntimeError:  # timm: "Invalid pretrained tag (x) for arch", raised for an unknown tag
        cfg = None
    if cfg is None and "." in name:
        tags = timm.list_pretrained(f"{name.split('.')[0]}.*")
        raise ModelvalError(
            f"timm {timm.__version__} has no pretrained tag {name.split('.', 1)[1]!r} for {name.split('.')[0]}; "
            f"its tags: {', '.join(tags) or 'none'}"
        )
    if pretrained and cfg is None:
        tags = timm.list_pretrained(f"{name.split('.')[0]}*")
        raise ModelvalError(
            f"timm {timm.__version__} has no pretrained weights {name!r}; pretrained tags: {', '.join(tags) or 'none'}"
        )
    parts: tuple[Any, ...] = ()
    if pretrained and cfg is not None and cfg.hf_hub_id:
        parts = (HFRepo(cfg.hf_hub_id, files=(), weight_files=("model.safetensors", "pytorch_model.bin")),)

    def build(context: LoadContext) -> nn.Module:
        if not parts:
            return timm.create_model(name, pretrained=pretrained)
        from modelval.models.checkpoints import refusing_pickled_objects

        weights = context.weight_paths[0]
        with refusing_pickled_objects(weights, f"Re-fetch it with: modelval models fetch {spec.text} --force"):
            return timm.create_model(name, pretrained=pretrained, pretrained_cfg_overlay={"file": str(weights)})

    native = timm_data_config(name)["input_size"][-1] if cfg is not None else None
    return spec_entry(
        spec,
        "timm",
        build,
        preprocess=timm_preprocess(name) if cfg is not None else PreprocessConfig(),
        preprocess_origin=timm_preprocess_origin(name) if cfg is not None else DEFAULT_ORIGIN,
        native_input_size=native,
        weights=parts,
        weights_url=parts[0].url() if parts else (cfg.url if cfg is not None else None),
        provenance=f"timm.create_model({name!r}, pretrained={pretrained})",
        training=_timm_training(name.split(".")[0], cfg.tag) if pretrained and cfg is not None else None,
    )


# --- open_clip ---------------------------------------------------------------------------------


def open_clip_entry(spec: ModelSpec, *, zero_shot: ZeroShotSettings | None = None) -> ModelEntry:
    """``open_clip:<model>/<pretrained>``: open_clip's model, tokenizer and transform, as a zero-shot classifier.

    ``<pretrained>`` is one of open_clip's tags for the model (``openai``, ``laion2b_s32b_b82k``, ...), fetched
    by open_clip into the HuggingFace cache; ``none`` builds the architecture with random weights (for testing
    the plumbing: the sanity gate withholds its shape bias). The preprocessing is the model's own transform:
    its mean, std and interpolation, and its resolution (a 336 px model is fed the stimuli resized to 336).

    Parameters
    ----------
    spec
        The parsed spec.
    zero_shot
        The class space, templates and logit scale of the head.
    """
    import open_clip

    from modelval.models.zero_shot import ZeroShotSettings

    settings = zero_shot or ZeroShotSettings()
    name, tag = spec.target, spec.detail or "none"
    if name not in open_clip.list_models():
        close = difflib.get_close_matches(name, open_clip.list_models(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ModelvalError(f"open_clip {open_clip.__version__} has no model {name!r}.{hint}")
    pretrained = None if tag.lower() == "none" else tag
    if pretrained is not None and pretrained not in open_clip.list_pretrained_tags_by_model(name):
        tags = ", ".join(open_clip.list_pretrained_tags_by_model(name)) or "none"
        raise ModelvalError(f"open_clip has no pretrained tag {pretrained!r} for {name}; its tags: {tags}")
    cfg = open_clip.get_model_config(name) or {}
    size = cfg.get("vision_cfg", {}).get("image_size", 224)
    size = int(size[0] if isinstance(size, list | tuple) else size)
    defaults = open_clip.get_pretrained_cfg(name, pretrained) if pretrained else {}
    mean = tuple(defaults.get("mean") or open_clip.OPENAI_DATASET_MEAN)
    std = tuple(defaults.get("std") or open_clip.OPENAI_DATASET_STD)
    interpolation = str(defaults.get("interpolation") or "bicubic")
    preprocess = PreprocessConfig(
        mean=mean, std=std, interpolation=interpolation, resize=size, crop=size,
        input_size=None if size == 224 else size,
    )  # fmt: skip

    parts = _open_clip_parts(defaults)

    def build(context: LoadContext) -> nn.Module:
        from modelval.models.checkpoints import refusing_pickled_objects
        from modelval.models.zero_shot import open_clip_classifier

        # The weights modelval fetched (offline: found in the HF cache, or refused before this) load from their
        # file, so open_clip asks the Hub nothing; its tag's preprocessing is read above, not from the tag here.
        weights = str(context.weight_paths[0]) if parts else pretrained
        refetch = f"Re-fetch it with: modelval models fetch {spec.text} --force"
        with (
            refusing_pickled_objects(weights or "", refetch),
            user_code(f"open_clip.create_model({name!r}, pretrained={pretrained!r})"),
        ):
            model = open_clip.create_model(name, pretrained=weights, cache_dir=str(hf_cache_dir())).eval()
            tokenizer = open_clip.get_tokenizer(name)
        return open_clip_classifier(model, tokenizer, settings, source=f"open_clip {name}/{tag}")

    return spec_entry(
        spec,
        "open_clip",
        build,
        preprocess=preprocess,
        preprocess_origin=f"open_clip's transform for {name}/{tag} (mean, std, interpolation, {size} px)",
        native_input_size=size,
        weights=parts,
        weights_url=parts[0].url() if parts else (defaults.get("url") or None),
        provenance=f"open_clip {open_clip.__version__} create_model({name!r}, pretrained={pretrained!r}); "
        f"zero-shot {settings.to_dict()}",
    )


def _open_clip_parts(defaults: dict[str, Any]) -> tuple[HFRepo, ...]:
    """The HF Hub file an open_clip tag's weights are (``hf_hub: org/name/[file]``), as open_clip would fetch it
    (its safetensors alternative first); none for random weights or a tag served only from a URL."""
    from open_clip.constants import HF_WEIGHTS_NAME
    from open_clip.pretrained import _get_safe_alternatives

    hub = str(defaults.get("hf_hub") or "")
    if not hub:
        return ()
    repo_id, _, filename = hub.rpartition("/")
    filename = filename or HF_WEIGHTS_NAME
    return (HFRepo(repo_id, files=(), weight_files=(*_get_safe_alternatives(filename), filename)),)


# --- torchvision -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchvisionWeights(WeightsPart):
    """A torchvision weights file where ``load_state_dict_from_url`` caches it ($TORCH_HOME/hub/checkpoints)."""

    source_url: str

    @property
    def path(self) -> Path:
        return torch_hub_dir() / "checkpoints" / Path(self.source_url).name

    def url(self) -> str:
        return self.source_url

    def locate(self, checkpoint_dir: Path) -> Path | None:
        return self.path if self.path.is_file() else None

    def expected(self, checkpoint_dir: Path) -> str:
        return f"file {self.path} (TORCH_HOME)"

    def fetch(self, checkpoint_dir: Path, *, progress: bool = True, force: bool = False) -> Path:
        import torch

        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # torch.hub writes a temporary file and checks the hash prefix of the name before moving it.
            torch.hub.download_url_to_file(self.source_url, str(self.path), hash_prefix=_hash_prefix(self.path.name),
                                           progress=progress)  # fmt: skip
        except (OSError, RuntimeError) as error:
            raise DownloadError(f"could not download {self.source_url}: {error}") from None
        return self.path


def _hash_prefix(file_name: str) -> str | None:
    import torch

    found = torch.hub.HASH_REGEX.search(file_name)
    return found.group(1) if found else None


def _torchvision_weights(builder: str, weights: str | None) -> Any:
    import torchvision

    available = torchvision.models.list_models()
    if builder not in available:
        close = difflib.get_close_matches(builder, available, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ModelvalError(f"torchvision {torchvision.__version__} has no model builder {builder!r}.{hint}")
    enum = torchvision.models.get_model_weights(builder)
    name = weights or "DEFAULT"
    try:
        return enum[name]
    except KeyError:
        names = ", ".join(w.name for w in enum)
        raise ModelvalError(f"torchvision:{builder}: no weights {name!r}; {enum.__name__} has {names}") from None


def torchvision_entry(spec: ModelSpec, *, pretrained: bool = True) -> ModelEntry:
    """``torchvision:<builder>[.<WEIGHTS>]``: ``get_model(builder, weights=...)``, ``weights.transforms()``.

    Parameters
    ----------
    spec
        The parsed spec.
    pretrained
        Load the weights.
    """
    import torchvision

    weights = _torchvision_weights(spec.target, spec.detail)
    transform = weights.transforms()
    preprocess = PreprocessConfig(
        mean=tuple(transform.mean),
        std=tuple(transform.std),
        interpolation=transform.interpolation.value,
        resize=int(transform.resize_size[0]),
        crop=int(transform.crop_size[0]),
    )
    part = TorchvisionWeights(weights.url)

    def build(context: LoadContext) -> nn.Module:
        # The real path: get_model -> weights.get_state_dict -> load_state_dict_from_url (cached file).
        return torchvision.models.get_model(spec.target, weights=weights if pretrained else None)

    return spec_entry(
        spec,
        "torchvision",
        build,
        preprocess=preprocess,
        preprocess_origin=f"torchvision {weights} .transforms()",
        native_input_size=int(transform.crop_size[0]),
        weights=(part,) if pretrained else (),
        weights_url=weights.url,
        provenance=f"torchvision.models.get_model({spec.target!r}, weights={weights})",
    )


# --- torch.hub ---------------------------------------------------------------------------------


def hub_entry(spec: ModelSpec, *, trust_repo: bool = False) -> ModelEntry:
    """``hub:<owner>/<repo>[:<ref>]/<entry>``: ``torch.hub.load``, only with explicit trust.

    Parameters
    ----------
    spec
        The parsed spec.
    trust_repo
        Consent to run the repository's code.
    """
    github = f"{spec.target}:{spec.detail or 'main'}"
    if not trust_repo:
        raise ModelvalError(
            f"{spec.text}: torch.hub runs the Python code of github.com/{spec.target} (its hubconf.py and what it "
            "imports) inside this process. Pass --trust-repo (trust_repo = true in the models file) if you trust "
            "that repository"
        )
    code = HubCode(spec.target, spec.detail or "main")
    entrypoint = spec.entry or ""

    def build(context: LoadContext) -> nn.Module:
        from modelval.models.hub import load_hub_model

        repo_dir = context.weight_paths[0]
        with user_code(f"the torch.hub entry {entrypoint!r} of {github} ({repo_dir / 'hubconf.py'})"):
            try:
                return load_hub_model(repo_dir, entrypoint, pretrained=True)
            except TypeError as error:
                if "pretrained" not in str(error):
                    raise
                return load_hub_model(repo_dir, entrypoint)  # an entry without the pretrained convention
            except RuntimeError as error:
                if "Cannot find callable" in str(error):
                    raise ModelvalError(f"{spec.text}: {github} has no entry point {entrypoint!r}: {error}") from None
                raise

    return spec_entry(
        spec,
        "torch.hub",
        build,
        weights=(code,),
        weights_url=code.url(),
        provenance=f"torch.hub.load({github!r}, {entrypoint!r}, pretrained=True)",
    )
