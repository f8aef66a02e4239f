"""Model specs: any model a researcher has, named on the command line, in pytest or in a models file.

A bare name is a registry entry (``modelval models list``). A prefix selects a source, each loaded through
that source's own loader (see :mod:`modelval.models.sources`)::

    timm:<name>[.<tag>]                 timm.create_model(..., pretrained=True); preprocessing: pretrained_cfg
    hf:<repo_id>[@<revision>]           AutoModelForImageClassification + AutoImageProcessor
    hf:./<folder>, hf:/abs/<folder>     the same from a local save_pretrained folder (its processor config);
                                        a CLIP or SigLIP checkpoint is a zero-shot classifier (models.zero_shot)
    open_clip:<model>/<pretrained>      open_clip.create_model_and_transforms, as a zero-shot classifier
    torchvision:<builder>[.<WEIGHTS>]   the weights enum; preprocessing: weights.transforms()
    hub:<owner>/<repo>[:<ref>]/<entry>  torch.hub (runs the repository's code: needs trust_repo)
    <module.path>:<callable>            the user's factory: nn.Module or (nn.Module, PreprocessConfig)
    <file.py>:<callable>                the same, from a file
    torchscript:<file>                  torch.jit.load
    export:<file.pt2>                   torch.export.load

This module is the syntax; :mod:`modelval.models.loader` turns a spec into a
:class:`~modelval.models.entry.ModelEntry` (its weights parts, builder and preprocessing as
data), so registry entries and specs share one loading path, one offline policy and one set of
error messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from modelval.errors import ModelvalError

#: The prefixes of :func:`parse_spec`, in the order the docs list them.
SOURCES: tuple[str, ...] = ("timm", "hf", "open_clip", "torchvision", "hub", "torchscript", "export")

_MODULE_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: ``kind`` is "registry", one of :data:`SOURCES`, or "factory"."""

    text: str
    kind: str
    target: str  # registry name, timm name, HF repo id, builder, "owner/repo", module or file path
    detail: str | None = None  # timm tag (in target), HF revision, torchvision weights, hub ref/entry, callable
    entry: str | None = None  # hub entry point
    #: ``hf:`` only: the target is a local ``save_pretrained`` folder, not a Hub repository.
    local: bool = False

    @property
    def is_registry(self) -> bool:
        return self.kind == "registry"


def parse_spec(text: str) -> ModelSpec:
    """Parse a model spec; a malformed one is a :class:`ModelvalError` that shows the accepted forms.

    Parameters
    ----------
    text
        The spec as written.
    """
    text = text.strip()
    if not text:
        raise ModelvalError("empty model spec; give a registry name or one of " + _FORMS)
    prefix, sep, rest = text.partition(":")
    if not sep:
        return ModelSpec(text, "registry", text)
    if prefix in SOURCES:
        if not rest:
            raise ModelvalError(f"model spec {text!r} names no model after {prefix!r}; the forms are {_FORMS}")
        return _parse_source(text, prefix, rest)
    # <module.path>:<callable> or <file.py>:<callable>; the last colon separates the callable (a
    # Windows drive letter "C:\\..." keeps its colon).
    location, _, function = text.rpartition(":")
    if not _IDENTIFIER.match(function):
        raise ModelvalError(f"model spec {text!r}: {function!r} is not a callable name; the forms are {_FORMS}")
    if location.endswith(".py"):
        return ModelSpec(text, "factory", location, function)
    if _MODULE_PATH.match(location):
        return ModelSpec(text, "factory", location, function)
    raise ModelvalError(
        f"model spec {text!r}: unknown source {prefix!r}; use one of {', '.join(p + ':' for p in SOURCES)}, "
        f"<module.path>:<callable> or <file.py>:<callable>"
    )


_LOCAL_PREFIXES = ("./", "../", "/", "~", ".\\", "..\\")

_FORMS = (
    "timm:<name>[.<tag>], hf:<repo_id>[@<revision>], hf:./<folder>, open_clip:<model>/<pretrained>, "
    "torchvision:<builder>[.<WEIGHTS>], "
    "hub:<owner>/<repo>[:<ref>]/<entry>, <module.path>:<callable>, <file.py>:<callable>, "
    "torchscript:<file>, export:<file.pt2>"
)


def _parse_source(text: str, prefix: str, rest: str) -> ModelSpec:
    if prefix == "timm":
        return ModelSpec(text, "timm", rest)
    if prefix == "hf":
        if rest.startswith(_LOCAL_PREFIXES) or re.match(r"^[A-Za-z]:[\\/]", rest):
            return ModelSpec(text, "hf", rest, local=True)  # ./dir, ../dir, /abs/dir, ~/dir, C:\dir
        repo, _, revision = rest.partition("@")
        if repo.count("/") != 1 or not all(repo.split("/")):
            if Path(rest).expanduser().is_dir():  # hf:folder, a save_pretrained folder here
                return ModelSpec(text, "hf", rest, local=True)
            raise ModelvalError(
                f"model spec {text!r}: an HF repository is <owner>/<name>, got {repo!r}; a local save_pretrained "
                "folder is hf:./<folder> or hf:/absolute/<folder>"
            )
        # hf:<owner>/<name> may also be a folder of that relative path (as transformers reads it): see
        # modelval.models.loader, which looks for it relative to the models file's folder too.
        return ModelSpec(text, "hf", repo, revision or None)
    if prefix == "open_clip":
        model, _, pretrained = rest.partition("/")
        if not model or not pretrained:
            raise ModelvalError(
                f"model spec {text!r}: an open_clip spec is open_clip:<model>/<pretrained> (open_clip:ViT-L-14/openai; "
                "open_clip:RN50/none builds the architecture with random weights)"
            )
        return ModelSpec(text, "open_clip", model, pretrained)
    if prefix == "torchvision":
        builder, _, weights = rest.partition(".")
        return ModelSpec(text, "torchvision", builder, weights or None)
    if prefix == "hub":
        location, _, entry = rest.rpartition("/")
        owner, _, repo_ref = location.partition("/")
        repo, _, ref = repo_ref.partition(":")
        if not (owner and repo and entry):
            raise ModelvalError(f"model spec {text!r}: a torch.hub spec is hub:<owner>/<repo>[:<ref>]/<entry>")
        return ModelSpec(text, "hub", f"{owner}/{repo}", ref or None, entry)
    return ModelSpec(text, prefix, rest)  # torchscript:, export:


#: Spec kinds whose model can be an image-text model read as a zero-shot classifier (``hf:`` when its config is
#: CLIP's or SigLIP's, :data:`modelval.models.hf.ZERO_SHOT_MODEL_TYPES`).
ZERO_SHOT_KINDS: tuple[str, ...] = ("open_clip", "hf")


def not_zero_shot(what: str) -> str:
    """The refusal of zero-shot settings for a model that is not zero-shot (``what`` names it).

    Parameters
    ----------
    what
        The model, in words.
    """
    return (
        f"{what} is not a zero-shot (image-text) model, so the zero-shot settings (--class-space, --templates, "
        "--logit-scale) do not apply: its outputs are its own classes, read through the 1000 -> 16 mapping or "
        "--label-map; they are for open_clip: specs and hf: CLIP or SigLIP models"
    )


def check_zero_shot_spec(spec: str | ModelSpec) -> None:
    """Refuse zero-shot settings for a spec that can never be a zero-shot model (a registry name, ``timm:``, a
    factory, ...): they would be ignored, or (class space 16) read outputs 0-15 as the 16 categories.

    Parameters
    ----------
    spec
        The spec given with the settings.
    """
    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec)
    if parsed.kind not in ZERO_SHOT_KINDS:
        kind = "registry" if parsed.is_registry else parsed.kind
        raise ModelvalError(not_zero_shot(f"the {kind} model {parsed.text!r}"))


#: Spec kinds that run Python code the spec names: the user's module or file, a torch.hub repository.
CODE_KINDS: tuple[str, ...] = ("factory", "hub")


def runs_code(spec: str | ModelSpec) -> bool:
    """True when loading ``spec`` imports and runs Python code it names (``file.py:fn``, ``module:fn``, ``hub:``).

    Parameters
    ----------
    spec
        A spec, as written or parsed.
    """
    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec)
    return parsed.kind in CODE_KINDS


def check_spec_consent(spec: str, origin: str, *, given: str | None = None, trusted: bool = False) -> str:
    """The spec to run when ``spec`` was read from a file (``origin``), refused when it names code without consent.

    A file (a baseline, a saved run) is data that others share and commit; it cannot consent to running the
    code it names. The consent is the spec given again on the command line (``given``, which then wins) or
    an explicit ``trusted`` (``--trust-repo``), as for ``hub:`` specs typed by hand.

    Parameters
    ----------
    spec
        The spec the file names.
    origin
        The file, for the refusal.
    given
        The spec given again on the command line.
    trusted
        Explicit consent (``--trust-repo``).
    """
    if given is not None:
        return given
    if runs_code(spec) and not trusted:
        parsed = parse_spec(spec)
        what = f"the Python code of github.com/{parsed.target}" if parsed.kind == "hub" else f"{parsed.target}"
        raise ModelvalError(
            f"{origin}: its model {spec!r} runs {what} in this process, and a data file cannot agree to that "
            f"for you; pass --model {spec} to run it (the model given again), or --trust-repo if you trust "
            "the file"
        )
    return spec
