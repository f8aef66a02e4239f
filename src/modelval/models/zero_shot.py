"""Zero-shot classifiers: a CLIP or SigLIP model and a text-built head, as one ``nn.Module`` of logits.

A contrastive image-text model classifies by comparing an image's embedding with one text embedding per
class. The head is built as open_clip's ``build_zero_shot_classifier`` builds it: for each class name, every
template (``"a photo of a {}."``) is filled in and encoded, the text features are L2-normalized, averaged
over the templates and normalized again; the image features are normalized, and the logits are
``scale * image @ head`` (``+ bias`` for SigLIP).

Settings (:class:`ZeroShotSettings`), all in the module's ``repr`` (so in the output-cache key's architecture
digest) and in the provenance record:

- **class space**: ``imagenet1k`` (OpenAI's 1,000 curated ImageNet names; the 16 categories are then read
  through the 1000 -> 16 mapping, as model-vs-human does, so REFINED-BIAS ranks and calibration work as for
  any ImageNet classifier), or ``16`` (the 16 category names directly, as Gavrikov et al. did; the output
  index of each category is its position in :data:`~modelval.behaviour.categories.CATEGORIES`).
- **templates**: ``openai80`` (CLIP's 80 ImageNet templates), ``simple7`` (CLIP's 7-template subset), a single
  template such as ``"{}"`` or ``"a photo of a {}."`` (anything with ``{}``), or a text file, one per line.
- **logit scale**: ``model`` (the model's learned ``exp(logit_scale)``) or a fixed number (``100``).
- **scoring**: ``softmax`` for CLIP; ``sigmoid`` for SigLIP (a model with a logit bias), whose per-class
  probabilities are independent sigmoids. modelval's forward path applies a softmax to what a model returns,
  so a sigmoid model returns ``logsigmoid(z)``: the softmax of that is ``sigmoid(z) / sum(sigmoid(z))``, the
  sigmoid scores made a distribution over the classes (same argmax as the sigmoid).
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from modelval.errors import DataError

CLASS_SPACES: tuple[str, ...] = ("imagenet1k", "16")
TEMPLATE_SETS: tuple[str, ...] = ("openai80", "simple7")


@cache
def _metadata() -> dict[str, Any]:
    text = resources.files("modelval").joinpath("data/zero_shot.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _class_names(space: str) -> tuple[str, ...]:
    """The class names of a class space: ``imagenet1k`` (1,000, OpenAI's curated names) or ``16``."""
    if space in CLASS_SPACES:  # "16": the category names in CATEGORIES order (models may not import behaviour)
        return tuple(_metadata()[space])
    raise DataError(f"unknown class space {space!r}; use one of {', '.join(CLASS_SPACES)}")


#: Bounds of a template set (OpenAI's has 80 templates of at most 50 characters): a file past them is not a
#: template set, and building its head would run the text tower for hours (300,000 lines: 152 s to fail).
MAX_TEMPLATES = 1000
MAX_TEMPLATE_LENGTH = 300
#: A templates file is read only under this size (1,000 templates of 300 characters, with room for comments).
MAX_TEMPLATES_FILE_BYTES = 1024 * 1024
#: A fixed logit scale is in this range: at 0 (or 1e-30) every class scores the same in float32 and each decision
#: falls to the first class (airplane); past the top, the logits overflow.
LOGIT_SCALE_RANGE = (0.01, 10_000.0)
#: Two classes whose text embeddings have a cosine above this cannot be told apart: the head is degenerate.
SAME_EMBEDDING = 1 - 1e-5


def check_template(template: str, where: str = "template") -> str:
    """``template`` when it has exactly one bare ``{}`` for the class name; else one :class:`DataError` line.

    ``{x}`` (a named field), two ``{}``, ``{{}}`` (a literal brace pair, no field) and ``{:999999999}`` (a format
    spec: a gigabyte of padding per class name) each fail here, before any model loads, rather than in
    ``str.format`` during the head's build (``KeyError``, ``IndexError``, ``MemoryError``: exit 3).

    Parameters
    ----------
    template
        The template, e.g. ``a photo of a {}.``.
    where
        Where it was given, for the error.
    """
    if len(template) > MAX_TEMPLATE_LENGTH:
        raise DataError(f"{where} is {len(template)} characters long; a template is at most {MAX_TEMPLATE_LENGTH}")
    try:
        fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(template)
                  if name is not None]  # fmt: skip
    except ValueError as error:  # an unmatched brace
        raise DataError(f"{where} {template!r}: {error}; write one {{}} for the class name") from None
    if fields != [("", "", None)]:
        raise DataError(
            f"{where} {template!r}: a template holds exactly one {{}} for the class name (no name, format or "
            f"second field inside braces; a literal brace is {{{{ or }}}}), e.g. 'a photo of a {{}}.'"
        )
    return template


def _templates_of(name: str) -> tuple[str, ...]:
    """The templates a name stands for: ``openai80``, ``simple7``, one template with ``{}``, or a file.

    Examples
    --------
    >>> from modelval.models.zero_shot import _templates_of
    >>> len(_templates_of("openai80")), _templates_of("simple7")[0], _templates_of("a photo of a {}.")
    (80, 'itap of a {}.', ('a photo of a {}.',))
    """
    if name in TEMPLATE_SETS:
        return tuple(_metadata()[name])
    if ("{" in name or "}" in name) and not Path(name).expanduser().is_file():
        return (check_template(name),)
    path = Path(name).expanduser()
    if not path.is_file():
        raise DataError(
            f"templates {name!r}: not a template set ({', '.join(TEMPLATE_SETS)}), not a template with '{{}}', "
            "and no such file"
        )
    try:
        size = path.stat().st_size
        if size > MAX_TEMPLATES_FILE_BYTES:  # refused before it is read
            raise DataError(
                f"templates file {path} is {size} bytes; a template set is at most {MAX_TEMPLATES} templates of "
                f"{MAX_TEMPLATE_LENGTH} characters ({MAX_TEMPLATES_FILE_BYTES} bytes)"
            )
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"templates file {path} cannot be read: {error}") from None
    found = tuple(line for line in lines if line and not line.startswith("#"))
    if not found or any("{}" not in line for line in found):
        raise DataError(f"templates file {path}: one template per line, each with '{{}}' for the class name")
    if len(found) > MAX_TEMPLATES:
        raise DataError(
            f"templates file {path} holds {len(found)} templates; a template set is at most {MAX_TEMPLATES}"
        )
    for number, line in enumerate(found, 1):
        check_template(line, f"templates file {path}: template {number}")
    return found


def check_logit_scale(scale: float, what: str) -> float:
    """``scale`` when it is finite and in :data:`LOGIT_SCALE_RANGE`; else one :class:`DataError` line.

    Parameters
    ----------
    scale
        The logit scale.
    what
        What it is, in words (``logit scale '0'``, ``the model's learned logit scale``).
    """
    low, high = LOGIT_SCALE_RANGE
    if not (math.isfinite(scale) and low <= scale <= high):
        raise DataError(
            f"{what} is {scale:g}; a logit scale is a number from {low:g} to {high:g} (CLIP's is 100): at 0 or a "
            "tiny scale every class scores the same and each decision falls to the first class"
        )
    return scale


@dataclass(frozen=True)
class ZeroShotSettings:
    """How the zero-shot head is built and scored (see the module docstring)."""

    class_space: str = "imagenet1k"
    templates: str = "openai80"
    #: ``"model"`` (the learned scale) or a number given as text (``"100"``).
    logit_scale: str = "model"

    def __post_init__(self) -> None:
        if self.class_space not in CLASS_SPACES:
            raise DataError(f"unknown class space {self.class_space!r}; use one of {', '.join(CLASS_SPACES)}")
        if self.logit_scale != "model":
            try:
                scale = float(self.logit_scale)
            except ValueError:
                raise DataError(f"logit scale {self.logit_scale!r}: 'model' or a number such as 100") from None
            check_logit_scale(scale, f"logit scale {self.logit_scale!r}")
        _templates_of(self.templates)  # a bad template or file fails here, before any model loads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _build_classifier(
    encode_text: Callable[[Any], torch.Tensor],
    tokenize: Callable[[list[str]], Any],
    names: Sequence[str],
    templates: Sequence[str],
    *,
    classes_per_batch: int = 10,
) -> torch.Tensor:
    """The ``(dim, classes)`` head: per class, the templates' normalized text features averaged and renormalized.

    ``tokenize`` maps a list of texts to what ``encode_text`` takes (token ids, or a dict of tensors).
    """
    for template in templates:  # the one {} makes each class's text its own; checked again for a caller's list
        if len({check_template(template).format(name) for name in names}) < len(names):
            raise DataError(f"template {template!r} gives two classes the same text; each class needs its own")
    columns = []
    with torch.no_grad():
        for start in range(0, len(names), classes_per_batch):
            batch = names[start : start + classes_per_batch]
            texts = [template.format(name) for name in batch for template in templates]
            features = F.normalize(encode_text(tokenize(texts)).float(), dim=-1)
            mean = features.reshape(len(batch), len(templates), -1).mean(dim=1)
            columns.append(F.normalize(mean, dim=-1).T)
    head = torch.cat(columns, dim=1)
    _check_head(head, names)
    return head


def _check_head(head: torch.Tensor, names: Sequence[str]) -> None:
    """Refuse a head in which two classes have the same text embedding: the model could not tell them apart, and
    every image would score them the same (a tokenizer that maps every text to the same tokens, such as the
    2-token one transformers builds for a CLIP folder saved without its tokenizer, makes all 1,000 alike)."""
    similarity = head.T @ head
    similarity.fill_diagonal_(-1.0)
    same = int((similarity.max(dim=0).values > SAME_EMBEDDING).sum())
    if same:
        first, second = divmod(int(similarity.argmax()), similarity.shape[1])
        raise DataError(
            f"the zero-shot head is degenerate: {same} of {len(names)} classes share their text embedding with "
            f"another ({names[first]!r} and {names[second]!r} are the same), so the model cannot tell them apart; "
            "the tokenizer maps different texts to the same tokens (an HF folder saved without its tokenizer: "
            "save it with processor.save_pretrained) or the templates leave the class name out"
        )


class ZeroShotClassifier(nn.Module):
    """An image encoder and a text-built head: ``(N, 3, H, W)`` -> ``(N, classes)`` logits (see the module)."""

    head: torch.Tensor

    def __init__(
        self,
        model: nn.Module,
        encode_image: Callable[[torch.Tensor], torch.Tensor],
        head: torch.Tensor,
        *,
        scale: float,
        bias: float | None,
        settings: ZeroShotSettings,
        source: str,
        template_count: int,
    ) -> None:
        super().__init__()
        self.model = model
        self._encode_image = encode_image
        self.register_buffer("head", head.detach().float().clone())
        self.scale = float(scale)
        self.bias = None if bias is None else float(bias)
        self.settings = settings
        self.source = source
        self.template_count = template_count

    @property
    def scoring(self) -> str:
        return "softmax" if self.bias is None else "sigmoid"

    def zero_shot_record(self) -> dict[str, Any]:
        """What the provenance record keeps: the settings, the scale and bias, the scoring, the head's size."""
        return {
            **self.settings.to_dict(),
            "template_count": self.template_count,
            "logit_scale_value": self.scale,
            "logit_bias": self.bias,
            "scoring": self.scoring,
            "classes": int(self.head.shape[1]),
            "source": self.source,
        }

    def extra_repr(self) -> str:  # the architecture digest of the output-cache key reads the repr
        return json.dumps(self.zero_shot_record(), sort_keys=True)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits of the classes: the scaled cosine of each image's embedding with each class's text embedding.

        Parameters
        ----------
        images
            Preprocessed images, ``(N, 3, H, W)``.
        """
        features = self._encode_image(images)
        features = getattr(features, "pooler_output", features)
        features = F.normalize(features.float(), dim=-1)
        logits = self.scale * features @ self.head
        if self.bias is None:
            return logits
        # SigLIP: sigmoid per class; the forward path's softmax of logsigmoid is the normalized sigmoid.
        return F.logsigmoid(logits + self.bias)


def _scale_of(model: nn.Module, settings: ZeroShotSettings) -> float:
    """The logit scale: the model's learned ``exp(logit_scale)``, or the fixed number of the settings."""
    if settings.logit_scale != "model":
        return float(settings.logit_scale)
    value = getattr(model, "logit_scale", None)
    if value is None:
        raise DataError("the model has no logit_scale: pass a fixed one (--logit-scale 100)")
    learned = float(torch.as_tensor(value).detach().float().exp())
    return check_logit_scale(learned, "the model's learned logit scale (exp(logit_scale); pass --logit-scale 100)")


def _bias_of(model: nn.Module) -> float | None:
    """SigLIP's learned logit bias, or ``None`` (CLIP: softmax scoring)."""
    value = getattr(model, "logit_bias", None)
    return None if value is None else float(torch.as_tensor(value).detach().float().reshape(-1)[0])


def open_clip_classifier(model: Any, tokenizer: Any, settings: ZeroShotSettings, source: str) -> ZeroShotClassifier:
    """An open_clip model (``encode_image``, ``encode_text``) as a :class:`ZeroShotClassifier`.

    Parameters
    ----------
    model
        The open_clip model.
    tokenizer
        Its tokenizer.
    settings
        The class space, templates and logit scale.
    source
        Where the model came from, for the record.
    """
    templates = _templates_of(settings.templates)
    device = next(model.parameters()).device
    head = _build_classifier(
        model.encode_text, lambda texts: tokenizer(texts).to(device), _class_names(settings.class_space), templates
    )
    return ZeroShotClassifier(
        model, model.encode_image, head, scale=_scale_of(model, settings), bias=_bias_of(model), settings=settings,
        source=source, template_count=len(templates),
    )  # fmt: skip


def hf_classifier(model: Any, tokenizer: Any, settings: ZeroShotSettings, source: str) -> ZeroShotClassifier:
    """A transformers ``CLIPModel`` or ``SiglipModel`` as a :class:`ZeroShotClassifier`.

    SigLIP's text tower was trained on texts padded to its full length (``padding="max_length"``), CLIP's on
    texts padded to the longest in the batch; each is tokenized as it was trained.

    Parameters
    ----------
    model
        The transformers model.
    tokenizer
        Its tokenizer.
    settings
        The class space, templates and logit scale.
    source
        Where the model came from, for the record.
    """
    templates = _templates_of(settings.templates)
    siglip = "siglip" in str(getattr(model.config, "model_type", ""))
    padding = "max_length" if siglip else True

    def tokenize(texts: list[str]) -> dict[str, torch.Tensor]:
        encoded = tokenizer(texts, padding=padding, truncation=True, return_tensors="pt")
        return {key: value for key, value in encoded.items() if key in ("input_ids", "attention_mask")}

    def encode_text(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        if siglip:
            inputs = {"input_ids": inputs["input_ids"]}  # SiglipModel takes no attention mask for its padding
        out = model.get_text_features(**inputs)
        return getattr(out, "pooler_output", out)

    head = _build_classifier(encode_text, tokenize, _class_names(settings.class_space), templates)
    return ZeroShotClassifier(
        model, lambda images: model.get_image_features(pixel_values=images), head,
        scale=_scale_of(model, settings), bias=_bias_of(model) if siglip else None, settings=settings,
        source=source, template_count=len(templates),
    )  # fmt: skip
