"""The user's own model files as :class:`ModelEntry` sources: a factory (``file.py:fn``, ``module.path:fn``),
a TorchScript archive (``torchscript:FILE``) and a ``torch.export`` program (``export:FILE``).

A factory's preprocessing is the ``PreprocessConfig`` it returns beside the module, else ImageNet's (the
provenance says "default"); a serialized model ships none.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

from modelval.errors import DataError, ModelvalError, UserCodeError, describe_exception, user_code
from modelval.models.entry import LoadContext, ModelEntry
from modelval.models.sources import DEFAULT_ORIGIN, spec_entry
from modelval.models.specs import ModelSpec
from modelval.preprocessing import PreprocessConfig

# --- the user's own code and files ------------------------------------------------------------


def _resolve_file(target: str, base_dir: Path | None) -> Path:
    path = Path(target).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_file():
        raise DataError(f"model file not found: {path}")
    return path


def _import_factory(spec: ModelSpec, base_dir: Path | None) -> Callable[..., Any]:
    if spec.target.endswith(".py"):
        path = _resolve_file(spec.target, base_dir).resolve()
        name = f"modelval_user_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
        module = sys.modules.get(name)
        if module is None:
            loader_spec = importlib.util.spec_from_file_location(name, path)
            if loader_spec is None or loader_spec.loader is None:
                raise DataError(f"{path} cannot be imported as a Python module")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[name] = module
            try:
                with user_code(f"importing {path} (for {spec.detail}())"):
                    loader_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
    else:
        try:
            with user_code(f"importing {spec.target} (for {spec.detail}())"):
                module = importlib.import_module(spec.target)
        except UserCodeError as error:
            missing = error.__cause__
            # The module itself is not there (a typo, not installed): say so without "raised".
            if isinstance(missing, ModuleNotFoundError) and missing.name and spec.target.startswith(missing.name):
                raise ModelvalError(f"{spec.text}: cannot import {spec.target!r}: {missing}") from None
            raise
    factory = getattr(module, spec.detail or "", None)
    if not callable(factory):
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ModelvalError(f"{spec.text}: {spec.target} has no callable {spec.detail!r}; it has {', '.join(names)}")
    return factory


def import_callable(text: str, *, base_dir: Path | None = None) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The callable a ``file.py:fn`` or ``module.path:fn`` spec names, and its identity for caches and records.

    The identity is the spec, the callable's name and the SHA-256 of the file that defines it (so an edited
    file is a different model); a callable without a readable source file is identified by its names alone.

    Parameters
    ----------
    text
        The spec (``file.py:fn`` or ``module.path:fn``).
    base_dir
        A relative file is read from here (the models file's folder).
    """
    from modelval.download import sha256_of
    from modelval.models.specs import parse_spec

    spec = parse_spec(text)
    if spec.kind != "factory":
        raise ModelvalError(f"{text!r} is not a callable spec: give file.py:function or module.path:function")
    function = _import_factory(spec, base_dir)
    identity: dict[str, Any] = {"spec": text, "callable": spec.detail}
    try:
        where = inspect.getsourcefile(function)
    except TypeError:
        where = None
    if where is not None and Path(where).is_file():
        identity.update(file=str(where), sha256=sha256_of(where))
    return function, identity


def factory_entry(spec: ModelSpec, *, base_dir: Path | None = None) -> ModelEntry:
    """``<module.path>:<callable>`` / ``<file.py>:<callable>``: an ``nn.Module`` or ``(module, PreprocessConfig)``.

    Parameters
    ----------
    spec
        The parsed spec.
    base_dir
        A relative file is read from here (the models file's folder).
    """
    factory = _import_factory(spec, base_dir)
    made: dict[str, Any] = {}

    try:
        where = inspect.getsourcefile(factory) or spec.target
    except TypeError:  # a builtin or C callable has no source file
        where = spec.target

    def produce() -> tuple[nn.Module, PreprocessConfig | None]:
        if "value" not in made:
            with user_code(f"the model factory {where}:{spec.detail}()"):
                result = factory()
            made["value"] = _unpack_factory_result(spec, result)
        return made["value"]

    def build(context: LoadContext) -> nn.Module:
        return produce()[0]

    def resolve(context: LoadContext) -> tuple[PreprocessConfig, str]:
        shipped = produce()[1]
        if shipped is None:
            return PreprocessConfig(), f"{DEFAULT_ORIGIN}: {spec.detail}() returned a bare module"
        return shipped, f"the PreprocessConfig {spec.detail}() returned"

    return spec_entry(
        spec,
        "factory",
        build,
        resolve_preprocess=resolve,
        provenance=f"{spec.detail}() from {where}",
    )


def _unpack_factory_result(spec: ModelSpec, result: object) -> tuple[nn.Module, PreprocessConfig | None]:
    from torch import nn

    if isinstance(result, nn.Module):
        return result, None
    if (
        isinstance(result, tuple)
        and len(result) == 2
        and isinstance(result[0], nn.Module)
        and isinstance(result[1], PreprocessConfig)
    ):
        return result[0], result[1]
    raise ModelvalError(
        f"{spec.text} returned {type(result).__name__}; a factory returns an nn.Module or "
        "(nn.Module, modelval.PreprocessConfig)"
    )


def _serialized_kind(path: Path) -> str:
    """What a model file is, from its zip listing alone: "export", "torchscript", "torch.save", "zip" or "other".

    Read before handing the file to torch, whose loaders answer a file of the wrong kind with a logged
    traceback and an internal message (``PytorchStreamReader failed locating file archive_format``).
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return "other"
    inner = {name.split("/", 1)[-1] for name in names}
    # torch >= 2.7 writes a PT2 archive (archive_format); torch 2.6 wrote serialized_exported_program.json at the top.
    if "archive_format" in inner or "serialized_exported_program.json" in names:
        return "export"
    if any(name.startswith("code/") for name in inner) or "constants.pkl" in inner:
        return "torchscript"
    if "data.pkl" in inner:
        return "torch.save"
    return "zip"


def _wrong_kind(path: Path, wanted: str) -> str | None:
    """The one-line reason a file is not a ``wanted`` ("export" or "torchscript") model file, or None."""
    kind = _serialized_kind(path)
    if kind == wanted:
        return None
    names = {"export": "torch.export program", "torchscript": "TorchScript file"}
    if kind in names:
        return f"{path} is a {names[kind]}, not a {names[wanted]}: use {kind}:{path}"
    if kind == "torch.save":
        return (
            f"{path} is a torch.save file (a state dict or another pickled object), not a {names[wanted]}: build "
            f"the model with a factory (file.py:fn) and pass --checkpoint {path}"
        )
    if wanted == "export":
        return (
            f"{path}: not a loadable torch.export file (not a torch.export archive); write one with "
            "torch.export.save(torch.export.export(model, (x,)), path)"
        )
    return (
        f"{path}: not a loadable TorchScript file (not a TorchScript archive); write one with "
        "torch.jit.save(torch.jit.script(model), path)"
    )


def torchscript_entry(spec: ModelSpec, *, base_dir: Path | None = None) -> ModelEntry:
    """``torchscript:<file>``: ``torch.jit.load`` (no Python code of the model's runs).

    Parameters
    ----------
    spec
        The parsed spec.
    base_dir
        A relative file is read from here (the models file's folder).
    """
    path = _resolve_file(spec.target, base_dir)

    def build(context: LoadContext) -> nn.Module:
        import torch

        wrong = _wrong_kind(path, "torchscript")
        if wrong:
            raise DataError(wrong)
        try:
            return torch.jit.load(str(path), map_location="cpu")
        except (RuntimeError, ValueError) as error:
            raise DataError(f"{path}: not a loadable TorchScript file: {str(error).splitlines()[0]}") from None

    return spec_entry(spec, "torchscript", build, provenance=f"torch.jit.load({str(path)!r})")


def export_entry(spec: ModelSpec, *, base_dir: Path | None = None) -> ModelEntry:
    """``export:<file.pt2>``: ``torch.export.load(file).module()``.

    Parameters
    ----------
    spec
        The parsed spec.
    base_dir
        A relative file is read from here (the models file's folder).
    """
    path = _resolve_file(spec.target, base_dir)

    def build(context: LoadContext) -> nn.Module:
        import logging

        import torch

        wrong = _wrong_kind(path, "export")
        if wrong:
            raise DataError(wrong)
        logger = logging.getLogger("torch.export")
        level = logger.level
        logger.setLevel(logging.CRITICAL)  # torch logs the traceback of a bad archive before raising
        try:
            program = torch.export.load(str(path))
        except Exception as error:  # torch.export raises many kinds on a bad archive
            raise DataError(f"{path}: not a loadable torch.export file: {describe_exception(error)}") from None
        finally:
            logger.setLevel(level)
        _check_exported_batch(program, path)
        from modelval.models.wrappers import ExportedModule

        return ExportedModule(program.module())

    return spec_entry(spec, "torch.export", build, provenance=f"torch.export.load({str(path)!r}).module()")


def _check_exported_batch(program: Any, path: Path) -> None:
    """Refuse an exported program whose batch dimension is fixed: its graph would fail on the first batch.

    ``torch.export.export(model, (x,))`` specialises every dimension of ``x``; a program traced with one image
    then raises ``Guard failed: inputs.size()[0] == 1`` (and 65 lines) on a batch of 32.
    """
    inputs = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" and node.name in inputs else None
        shape = getattr(value, "shape", None)
        if shape is None or len(shape) != 4 or not isinstance(shape[0], int):
            continue
        raise DataError(
            f"{path} was exported with a fixed batch size of {shape[0]} (input {node.name!r} of shape "
            f"{tuple(shape)}), and modelval feeds batches of many images; re-export it with a dynamic batch: "
            f"torch.export.export(model, (x,), dynamic_shapes={{{node.name!r}: {{0: torch.export.Dim('batch')}}}})"
        )
