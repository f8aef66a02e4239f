"""The user's own zoo: ``modelval.toml``, or ``[tool.modelval]`` in their ``pyproject.toml``.

One table per model, in the format of ``modelval/data/expected_shape_bias.toml`` (values as fractions)::

    [models.my_resnet]
    label = "My ResNet-50"
    spec = "my_pkg.nets:resnet50"     # or timm:..., hf:..., path/to/file.py:build, torchscript:...
    checkpoint = "runs/best.pt"       # optional; paths are relative to this file and stay inside its folder
    checkpoint_key = "state_dict_ema" # optional: the checkpoint's state dict under this key
    strip_prefix = "model."           # optional: removed from the checkpoint's keys (Lightning)
    mean = [0.485, 0.456, 0.406]      # optional overrides: mean, std, interpolation, input_size
    expected = 0.2139                 # optional, with tolerance and source (a citation)
    tolerance = 0.015
    source = "our paper, Table 2"
    flip_budget = 0                   # optional: decisions a run may flip against the fp32 CPU reference
    expectations = { "cuda/bf16" = { tolerance = 0.02, flip_budget = 12 } }  # optional, keyed by device/dtype
    normalizations = ["model", "wrong"]   # the cases to run (default); also "imagenet", "half"
    baseline = "baselines/my_resnet.csv"  # optional: decisions to compare with (raw-data CSV)
    label_map = "maps/ten_classes.json"   # optional, for heads that are not ImageNet-1k
    trust_repo = false                    # hub: specs run the repository's code only when true

In ``pyproject.toml`` the tables are ``[tool.modelval.models.<id>]``. An unknown key or a bad value
is an error that names the file, the table and the key.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelval.errors import DataError
from modelval.judgement.expected import ExpectedShapeBias, KeyedExpectation, check_field, parse_keyed
from modelval.preprocessing import INTERPOLATIONS, MAX_INPUT_SIZE, PreprocessOverrides

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MODELS_FILE = "modelval.toml"
#: A model id: a name, never a path (report files are named after it).
MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
CASES: tuple[str, ...] = ("model", "wrong", "imagenet", "half")
KEYS: tuple[str, ...] = (
    "label", "spec", "checkpoint", "checkpoint_key", "strip_prefix", "label_map", "mean", "std", "interpolation",
    "input_size", "expected", "tolerance", "source", "normalizations", "baseline", "trust_repo", "flip_budget",
    "expectations",
)  # fmt: skip


@dataclass(frozen=True)
class UserModel:
    """One model of the user's zoo, with everything needed to load, run and judge it."""

    id: str
    spec: str
    label: str
    base_dir: Path
    origin: str  # "modelval.toml [models.x]", for messages
    checkpoint: Path | None = None
    checkpoint_key: str | None = None
    strip_prefix: str | None = None
    label_map: Path | None = None
    overrides: PreprocessOverrides = field(default_factory=PreprocessOverrides)
    expected: float | None = None
    tolerance: float | None = None
    source: str = ""
    normalizations: tuple[str, ...] = ("model", "wrong")
    baseline: Path | None = None
    trust_repo: bool = False
    #: Decisions a run may flip against the fp32 CPU reference (the default entry's).
    flip_budget: int | None = None
    #: ``expectations``: value, tolerance and flip budget keyed by device, compute capability and dtype.
    keyed: tuple[KeyedExpectation, ...] = ()

    @property
    def expectation(self) -> ExpectedShapeBias:
        """The model's expectations (default and keyed entries); ``.for_evaluation(e)`` resolves one run's."""
        return ExpectedShapeBias(
            model=self.id, label=self.label, value=self.expected, tolerance=self.tolerance,
            source=self.source or self.origin, baseline=str(self.baseline) if self.baseline else None,
            flip_budget=self.flip_budget, keyed=self.keyed,
        )  # fmt: skip


def find_models_file(start: Path | None = None) -> Path | None:
    """``modelval.toml`` in ``start`` (default: the working directory), else a pyproject.toml with [tool.modelval]."""
    folder = (start or Path.cwd()).resolve()
    if (folder / MODELS_FILE).is_file():
        return folder / MODELS_FILE
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
            return None
        if "modelval" in data.get("tool", {}):
            return pyproject
    return None


class ModelsFileEntryError(DataError):
    """One table of a models file is wrong; the other tables are still usable."""

    def __init__(self, model_id: str, message: str) -> None:
        super().__init__(message)
        self.model_id = model_id


def read_models_file(path: str | Path) -> list[UserModel]:
    """Every model of a models file, checked; the errors name the file, the table and the key."""
    entries = read_models_file_entries(path)
    for entry in entries:
        if isinstance(entry, ModelsFileEntryError):
            raise entry
    return [entry for entry in entries if isinstance(entry, UserModel)]


def read_models_file_entries(path: str | Path) -> list[UserModel | ModelsFileEntryError]:
    """Each table of a models file as a :class:`UserModel`, or the error of that table alone.

    A file that cannot be read as a models file at all (missing, not TOML, no models) raises ``DataError``.
    The pytest plugin fails a broken table's cases and runs the others.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"models file not found: {path}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text (UTF-8) file; a models file is TOML") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read the models file ({error.strerror or error})") from None
    except tomllib.TOMLDecodeError as error:
        raise DataError(f"{path}: invalid TOML: {error}") from None
    prefix = "tool.modelval." if path.name == "pyproject.toml" else ""
    root = data.get("tool", {}).get("modelval", {}) if prefix else data
    unknown_top = sorted(set(root) - {"models"})
    if unknown_top:
        raise DataError(f"{path}: unknown table or key {prefix}{unknown_top[0]!r}; models go in [{prefix}models.<id>]")
    models = root.get("models", {})
    if not isinstance(models, dict) or not models:
        raise DataError(f"{path}: no models; add tables [{prefix}models.<id>] with at least a spec")
    entries: list[UserModel | ModelsFileEntryError] = []
    for name, table in models.items():
        try:
            entries.append(_user_model(path, f"{prefix}models.{name}", name, table))
        except DataError as error:
            entries.append(ModelsFileEntryError(name, str(error)))
    return entries


def _user_model(path: Path, table_name: str, name: str, table: Any) -> UserModel:
    where = f"{path} [{table_name}]"

    def bad(key: str, why: str) -> DataError:
        return DataError(f"{where}: {key} {why}")

    if not isinstance(table, dict):
        raise DataError(f"{where}: expected a table of settings, got {type(table).__name__}")
    if not MODEL_ID.fullmatch(name):
        # The id names report files (<id>.csv, <id>.png): a path in it would write outside the report folder.
        raise DataError(f"{where}: the model id {name!r} must be a plain name (letters, digits, '_', '-', '.'; "
                        "starting with a letter or digit), not a path")  # fmt: skip
    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise bad(repr(key), f"is not a known key{hint}; the keys are {', '.join(KEYS)}")
    spec = table.get("spec")
    if not isinstance(spec, str) or not spec.strip():
        raise bad("'spec'", "is required: a registry name or a spec such as timm:<name> or file.py:build")

    def text(key: str, default: str = "") -> str:
        value = table.get(key, default)
        if not isinstance(value, str):
            raise bad(repr(key), f"must be a string, got {value!r}")
        return value

    def fraction(key: str) -> float | None:
        value = table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad(repr(key), f"must be a number, got {value!r}")
        if not 0 <= value <= 1:
            raise bad(repr(key), f"is a fraction between 0 and 1 (e.g. 0.2139 for 21.39%), got {value!r}")
        return float(value)

    def channels(key: str) -> tuple[float, float, float] | None:
        value = table.get(key)
        if value is None:
            return None
        if (
            not isinstance(value, list)
            or len(value) != 3
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        ):
            raise bad(repr(key), f"must be three numbers, one per RGB channel, got {value!r}")
        return (float(value[0]), float(value[1]), float(value[2]))

    def file(key: str) -> Path | None:
        value = table.get(key)
        if value is None:
            return None
        given = text(key)
        # A models file is shared and committed: its paths are relative to it and stay in its folder, so it
        # cannot point a run at files elsewhere on the machine (a symlink placed there is the local user's choice).
        inside = os.path.normpath(path.parent / given)
        if Path(given).expanduser().is_absolute() or not Path(inside).is_relative_to(os.path.normpath(path.parent)):
            raise bad(
                repr(key),
                f"{given!r} is outside the models file's folder; paths in a models file are relative to it and stay "
                f"inside {path.parent.absolute()} (copy or link the file there)",
            )
        return Path(inside)

    def optional_text(key: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise bad(repr(key), f"must be a non-empty string, got {value!r}")
        return value

    expected, tolerance = fraction("expected"), fraction("tolerance")
    if expected is not None and tolerance is None:
        raise bad("'tolerance'", "is required with 'expected' (a fraction, e.g. 0.015)")
    if tolerance is not None and tolerance <= 0:
        raise bad("'tolerance'", f"must be positive, got {tolerance!r}")
    interpolation = table.get("interpolation")
    if interpolation is not None and interpolation not in INTERPOLATIONS:
        raise bad("'interpolation'", f"must be one of {', '.join(INTERPOLATIONS)}, got {interpolation!r}")
    input_size = table.get("input_size")
    if input_size is not None and (
        isinstance(input_size, bool) or not isinstance(input_size, int) or not 16 <= input_size <= MAX_INPUT_SIZE
    ):
        raise bad("'input_size'", f"must be a whole number of pixels from 16 to {MAX_INPUT_SIZE}, got {input_size!r}")
    normalizations = table.get("normalizations", ["model", "wrong"])
    if not isinstance(normalizations, list) or not normalizations or any(n not in CASES for n in normalizations):
        raise bad("'normalizations'", f"must be a non-empty list of {', '.join(CASES)}, got {normalizations!r}")
    flip_budget = table.get("flip_budget")
    if flip_budget is not None:
        flip_budget = check_field("flip_budget", flip_budget, where)
    keyed = parse_keyed(table.get("expectations"), where)
    trust_repo = table.get("trust_repo", False)
    if not isinstance(trust_repo, bool):
        raise bad("'trust_repo'", f"must be true or false, got {trust_repo!r}")
    try:
        overrides = PreprocessOverrides(
            mean=channels("mean"),
            std=channels("std"),
            interpolation=interpolation,
            input_size=input_size,
            origin=f"{path.name} [{table_name}]",
        )
    except ValueError as error:
        raise DataError(f"{where}: {error}") from None
    return UserModel(
        id=name,
        spec=spec.strip(),
        label=text("label", name),
        base_dir=path.parent,
        origin=where,
        checkpoint=file("checkpoint"),
        checkpoint_key=optional_text("checkpoint_key"),
        strip_prefix=optional_text("strip_prefix"),
        label_map=file("label_map"),
        overrides=overrides,
        expected=expected,
        tolerance=tolerance,
        source=text("source"),
        normalizations=tuple(dict.fromkeys(normalizations)),
        baseline=file("baseline"),
        trust_repo=trust_repo,
        flip_budget=flip_budget,
        keyed=keyed,
    )
