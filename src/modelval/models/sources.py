"""One :class:`ModelEntry` per spec source, each loading through that source's own loader.

Preprocessing is read from the source itself where it ships one: timm's ``pretrained_cfg``, the HF
repository's ``preprocessor_config.json``, torchvision's ``weights.transforms()``, or the
``PreprocessConfig`` a factory returns. Elsewhere (torch.hub entries, TorchScript, exported
programs, factories that return a bare module) it is ImageNet's, and the provenance says "default".
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    from torch import nn

    from modelval.models.zero_shot import ZeroShotSettings

from modelval.errors import DataError, DownloadError, ModelvalError, describe_exception, user_code
from modelval.models.registry import LoadContext, ModelEntry, TrainingData
from modelval.models.specs import ModelSpec
from modelval.models.weights import HFRepo, HubCode, WeightsPart, hf_cache_dir, torch_hub_dir
from modelval.preprocessing import PreprocessConfig

DEFAULT_ORIGIN = "default (ImageNet mean/std, bilinear: the source ships no preprocessing)"


def _entry(spec: ModelSpec, source: str, build: Callable[[LoadContext], nn.Module], **fields: Any) -> ModelEntry:
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

    from modelval.models.deit import timm_data_config, timm_preprocess, timm_preprocess_origin

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
    return _entry(
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


# --- HuggingFace -------------------------------------------------------------------------------

#: An HF config passes as ImageNet-1k when this share of its 1000 labels match torchvision's names.
IMAGENET_LABEL_AGREEMENT = 0.9


def _check_imagenet_id2label(id2label: dict[int, str], repo: str) -> None:
    """Refuse an HF classifier whose labels are not ImageNet-1k (it needs a label map)."""
    from torchvision.models._meta import _IMAGENET_CATEGORIES

    if len(id2label) != len(_IMAGENET_CATEGORIES):
        raise ModelvalError(
            f"{repo}: the head has {len(id2label)} labels (config.id2label), not ImageNet-1k's 1000: pass "
            "--label-map FILE.json mapping each of the 16 categories to its output indices"
        )

    def first_name(label: str) -> str:
        return label.split(",")[0].strip().lower().replace("_", " ")

    agree = sum(
        first_name(str(id2label.get(i, id2label.get(str(i), "")))) == first_name(name)  # type: ignore[call-overload]
        for i, name in enumerate(_IMAGENET_CATEGORIES)
    )
    if agree < IMAGENET_LABEL_AGREEMENT * len(_IMAGENET_CATEGORIES):
        raise ModelvalError(
            f"{repo}: config.id2label has 1000 labels but only {agree} match ImageNet-1k's class names in order; "
            "the head is not ImageNet-1k: pass --label-map FILE.json for its classes"
        )


def _hf_classifier(
    where: str, source: str | Path, imagenet_head: bool, zero_shot: ZeroShotSettings | None = None, **options: Any
) -> nn.Module:
    """The transformers classifier of an HF repository in the cache or a local folder, in one code path.

    transformers' own errors on a broken ``config.json``, one without ``model_type``, or an empty, garbage
    or pickle-bearing weights file (``weights_only`` loading refuses its objects, and no code runs) are
    tracebacks of 40 lines; here each is one line naming the folder and the exception.
    """
    from transformers import AutoConfig

    from modelval.models.convert import load_hf_image_classifier
    from modelval.models.wrappers import LogitsOf

    with _hf_errors(f"{where}: transformers cannot read its config.json"):
        config = AutoConfig.from_pretrained(source, **options)
    if getattr(config, "model_type", None) in ZERO_SHOT_MODEL_TYPES:
        from modelval.models.zero_shot import ZeroShotSettings

        return _hf_zero_shot(where, source, zero_shot or ZeroShotSettings(), **options)
    if imagenet_head:
        _check_imagenet_id2label(dict(config.id2label), where)
    with _hf_errors(f"{where}: transformers cannot load the model"):
        return LogitsOf(load_hf_image_classifier(source, **options))


#: ``config.model_type`` of the transformers image-text models read as zero-shot classifiers.
ZERO_SHOT_MODEL_TYPES: tuple[str, ...] = ("clip", "siglip", "siglip2")


def _hf_zero_shot(where: str, source: str | Path, settings: ZeroShotSettings, **options: Any) -> nn.Module:
    """A transformers CLIPModel / SiglipModel and its tokenizer as a zero-shot classifier."""
    from transformers import AutoModel, AutoTokenizer

    from modelval.models.zero_shot import hf_classifier

    with _hf_errors(f"{where}: transformers cannot load the model"):
        model = AutoModel.from_pretrained(source, **options).eval()
    with _hf_errors(f"{where}: transformers cannot load its tokenizer"):
        tokenizer = AutoTokenizer.from_pretrained(source, **options)
    return hf_classifier(model, tokenizer, settings, source=f"transformers {type(model).__name__} {where}")


@contextlib.contextmanager
def _hf_errors(what: str) -> Iterator[None]:
    """transformers' exceptions (OSError, ValueError, UnpicklingError, safetensors', ...) as one DataError line."""
    try:
        yield
    except ModelvalError:
        raise
    except Exception as error:
        if "weights_only" in str(error):
            # torch's message advises weights_only=False, i.e. running the file's code: never do that.
            raise DataError(
                f"{what}: a weights file holds objects other than tensors, which weights_only loading refuses "
                "(loading it otherwise would run code, which modelval never does); save it as model.safetensors"
            ) from error
        raise DataError(f"{what} ({describe_exception(error)})") from error


def hf_entry(spec: ModelSpec, *, imagenet_head: bool = True, zero_shot: ZeroShotSettings | None = None) -> ModelEntry:
    """``hf:<repo_id>[@<revision>]``: AutoModelForImageClassification with the repository's processor.

    Parameters
    ----------
    spec
        The parsed spec.
    imagenet_head
        Refuse a head that is not ImageNet-1k.
    zero_shot
        How a CLIP or SigLIP model becomes a classifier.
    """
    repo_id, revision = spec.target, spec.detail
    repo = HFRepo(repo_id, optional_files=("preprocessor_config.json",), revision=revision)

    def build(context: LoadContext) -> nn.Module:
        options = dict(cache_dir=hf_cache_dir(), local_files_only=True, revision=revision)
        return _hf_classifier(repo_id, repo_id, imagenet_head, zero_shot, **options)

    def resolve(context: LoadContext) -> tuple[PreprocessConfig, str]:
        from modelval.models.hf import load_processor, processor_to_config

        if repo.cached_file("preprocessor_config.json") is None:
            return PreprocessConfig(), f"{DEFAULT_ORIGIN}: {repo_id} has no preprocessor_config.json"
        with _hf_errors(f"{repo_id}: transformers cannot read its preprocessor_config.json"):
            config, _ = processor_to_config(load_processor(repo_id, cache_dir=hf_cache_dir(), revision=revision))
        return config, f"{repo_id} preprocessor_config.json (AutoImageProcessor)"

    return _entry(
        spec,
        "huggingface",
        build,
        resolve_preprocess=resolve,
        weights=(repo,),
        weights_url=repo.url(),
        provenance=f"transformers AutoModelForImageClassification {repo_id}" + (f"@{revision}" if revision else ""),
    )


def hf_local_folder(spec: ModelSpec, base_dir: Path | None = None) -> Path | None:
    """The local ``save_pretrained`` folder an ``hf:`` spec names, or None for a Hub repository.

    ``hf:./dir`` and ``hf:/abs/dir`` always name a folder (relative to ``base_dir``, the models file's folder,
    when given); ``hf:<owner>/<name>`` names one when that folder exists, as transformers itself reads it.

    Parameters
    ----------
    spec
        The parsed spec.
    base_dir
        A relative folder is read from here.
    """
    if spec.kind != "hf":
        return None
    path = Path(spec.target).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if spec.local:
        if not path.is_dir():
            raise DataError(f"{spec.text}: no folder {path} (a local save_pretrained folder was named)")
        return path
    return path if spec.detail is None and path.is_dir() else None


def hf_folder_entry(
    spec: ModelSpec, folder: Path, *, imagenet_head: bool = True, zero_shot: ZeroShotSettings | None = None
) -> ModelEntry:
    """``hf:./<folder>``: a ``save_pretrained`` folder, its processor config as the preprocessing source.

    Parameters
    ----------
    spec
        The parsed spec.
    folder
        The ``save_pretrained`` folder.
    imagenet_head
        Refuse a head that is not ImageNet-1k.
    zero_shot
        How a CLIP or SigLIP model becomes a classifier.
    """
    if not (folder / "config.json").is_file():
        raise DataError(
            f"{spec.text}: {folder} is not a save_pretrained folder (no config.json); write it with "
            "model.save_pretrained(folder) and processor.save_pretrained(folder)"
        )

    def build(context: LoadContext) -> nn.Module:
        return _hf_classifier(str(folder), folder, imagenet_head, zero_shot, local_files_only=True)

    def resolve(context: LoadContext) -> tuple[PreprocessConfig, str]:
        from modelval.models.hf import load_processor, processor_to_config

        if not (folder / "preprocessor_config.json").is_file():
            return PreprocessConfig(), f"{DEFAULT_ORIGIN}: {folder} has no preprocessor_config.json"
        with _hf_errors(f"{folder}: transformers cannot read its preprocessor_config.json"):
            config, _ = processor_to_config(load_processor(folder))
        return config, f"{folder / 'preprocessor_config.json'} (AutoImageProcessor)"

    return _entry(
        spec,
        "huggingface",
        build,
        resolve_preprocess=resolve,
        provenance=f"transformers AutoModelForImageClassification from the local folder {folder}",
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

    def build(context: LoadContext) -> nn.Module:
        from modelval.models.zero_shot import open_clip_classifier

        with user_code(f"open_clip.create_model({name!r}, pretrained={pretrained!r})"):
            model = open_clip.create_model(name, pretrained=pretrained, cache_dir=str(hf_cache_dir())).eval()
            tokenizer = open_clip.get_tokenizer(name)
        return open_clip_classifier(model, tokenizer, settings, source=f"open_clip {name}/{tag}")

    return _entry(
        spec,
        "open_clip",
        build,
        preprocess=preprocess,
        preprocess_origin=f"open_clip's transform for {name}/{tag} (mean, std, interpolation, {size} px)",
        native_input_size=size,
        weights_url=None,
        provenance=f"open_clip {open_clip.__version__} create_model({name!r}, pretrained={pretrained!r}); "
        f"zero-shot {settings.to_dict()}",
    )


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

    return _entry(
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

    return _entry(
        spec,
        "torch.hub",
        build,
        weights=(code,),
        weights_url=code.url(),
        provenance=f"torch.hub.load({github!r}, {entrypoint!r}, pretrained=True)",
    )
