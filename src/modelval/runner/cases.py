"""Validation cases: which (model, normalization) pairs a validation run checks, as plain data.

Light on purpose (no torch): the pytest plugin builds the cases at collection time, and a test session
that collects no modelval case must not pay for importing torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from modelval.models import ModelEntry, list_models
from modelval.runner.models_file import UserModel

__all__ = ["FAMILY_ALIASES", "ValidationCase", "build_cases", "build_user_cases"]

#: --family values -> the registry families they select
FAMILY_ALIASES = {"resnet": ("resnet50",), "deit": ("deit",), "efficientnet": ("efficientnet",)}


def _wrong_normalization(entry: ModelEntry) -> str:
    """The other common normalization: ImageNet mean/std for 0.5/0.5 models and vice versa."""
    return "imagenet" if entry.preprocess.normalization_name != "imagenet" else "half"


@dataclass(frozen=True)
class ValidationCase:
    model: str  # a registry name, or the id of a model in the user's models file
    family: str
    variant: str
    source: str
    role: str  # "correct", "wrong", or "forced" (a models file's explicit imagenet/half case)
    normalization: str  # "model", "imagenet", "half", or "wrong" (resolved once the model is loaded)
    user: UserModel | None = None

    @property
    def id(self) -> str:
        norm = "model-norm" if self.normalization == "model" else f"{self.normalization}-norm"
        if self.user is not None:
            return f"{self.user.id}-{norm}"
        return f"{self.family}-{self.variant}-{self.source}-{self.role}-{norm}"


def build_user_cases(models: Iterable[UserModel]) -> list[ValidationCase]:
    """The cases of a models file: each model under each of its ``normalizations``.

    Parameters
    ----------
    models
        The models file's entries.
    """
    roles = {"model": "correct", "wrong": "wrong", "imagenet": "forced", "half": "forced"}
    cases = []
    for user in models:
        for normalization in user.normalizations:
            cases.append(ValidationCase(user.id, "user", user.id, user.spec, roles[normalization], normalization, user))
    return cases


def build_cases(family: str = "all", entries: Iterable[ModelEntry] | None = None) -> list[ValidationCase]:
    """Every registered entry x (correct, wrong) normalization, optionally for one family.

    Parameters
    ----------
    family
        A registry family (``resnet50``, ``deit``, ...; :data:`FAMILY_ALIASES`) or ``all``.
    entries
        The entries to choose from (default: the registry's).
    """
    families = None if family == "all" else FAMILY_ALIASES.get(family, (family,))
    cases = []
    for entry in entries if entries is not None else list_models():
        if families is not None and entry.family not in families:
            continue
        for role, normalization in (("correct", "model"), ("wrong", _wrong_normalization(entry))):
            cases.append(ValidationCase(entry.name, entry.family, entry.variant, entry.source, role, normalization))
    return cases
