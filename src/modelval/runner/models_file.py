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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelval.errors import DataError
from modelval.judgement.expected import ExpectedShapeBias, KeyedExpectation, check_field, parse_keyed
from modelval.preprocessing import PreprocessOverrides
from modelval.settings import CONFIG_FILE, SETTINGS, checked, find_config_file, read_toml

MODELS_FILE = CONFIG_FILE
#: A model id: a name, never a path (report files are named after it).
MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
CASES: tuple[str, ...] = ("model", "wrong", "imagenet", "half")
#: An entry's own keys (what it is and what it is held against); the model's settings come from the declarations
#: of :mod:`modelval.settings` (those marked ``models_file``).
ENTRY_KEYS: tuple[str, ...] = (
    "label", "spec", "expected", "tolerance", "source", "normalizations", "baseline", "flip_budget", "expectations",
)  # fmt: skip
SETTING_KEYS: tuple[str, ...] = tuple(name for name, s in SETTINGS.items() if s.models_file)
KEYS: tuple[str, ...] = (*ENTRY_KEYS, *SETTING_KEYS)


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
    #: The zero-shot head's settings (``class_space``, ``templates``, ``logit_scale``) the entry gives.
    zero_shot: dict[str, str] = field(default_factory=dict)

    @property
    def expectation(self) -> ExpectedShapeBias:
        """The model's expectations (default and keyed entries); ``.for_evaluation(e)`` resolves one run's."""
        return ExpectedShapeBias(
            model=self.id, label=self.label, value=self.expected, tolerance=self.tolerance,
            source=self.source or self.origin, baseline=str(self.baseline) if self.baseline else None,
            flip_budget=self.flip_budget, keyed=self.keyed,
        )  # fmt: skip


def find_models_file(start: Path | None = None) -> Path | None:
    """``modelval.toml`` in ``start`` (default: the working directory), else a pyproject.toml with [tool.modelval].

    Parameters
    ----------
    start
        The folder to look in.
    """
    return find_config_file(start)


class ModelsFileEntryError(DataError):
    """One table of a models file is wrong; the other tables are still usable."""

    def __init__(self, model_id: str, message: str) -> None:
        super().__init__(message)
        self.model_id = model_id


def read_models_file(path: str | Path) -> list[UserModel]:
    """Every model of a models file, checked; the errors name the file, the table and the key.

    Parameters
    ----------
    path
        The models file (``modelval.toml``, or a ``pyproject.toml`` with ``[tool.modelval.models.<id>]``).
    """
    entries = read_models_file_entries(path)
    for entry in entries:
        if isinstance(entry, ModelsFileEntryError):
            raise entry
    return [entry for entry in entries if isinstance(entry, UserModel)]


def read_models_file_entries(path: str | Path) -> list[UserModel | ModelsFileEntryError]:
    """Each table of a models file as a :class:`UserModel`, or the error of that table alone.

    A file that cannot be read as a models file at all (missing, not TOML, no models) raises ``DataError``.
    The pytest plugin fails a broken table's cases and runs the others.

    Parameters
    ----------
    path
        The models file.
    """
    path = Path(path)
    if not path.is_file() and not path.exists():
        raise DataError(f"models file not found: {path}")
    root = read_toml(path)
    prefix = "tool.modelval." if path.name == "pyproject.toml" else ""
    unknown_top = sorted(set(root) - {"models", "settings"})
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


def _check_table(where: str, name: str, table: Any) -> None:
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
            raise DataError(f"{where}: {key!r} is not a known key{hint}; the keys are {', '.join(KEYS)}")
    spec = table.get("spec")
    if not isinstance(spec, str) or not spec.strip():
        raise DataError(f"{where}: 'spec' is required: a registry name or a spec such as timm:<name> or file.py:build")


def _inside(path: Path, where: str, key: str, given: Any) -> Path:
    """A models file's path: relative to it and inside its folder (a committed file cannot point a run at files
    elsewhere on the machine; a symlink placed there is the local user's choice)."""
    if not isinstance(given, str) or not given:
        raise DataError(f"{where}: {key!r} must be a non-empty string, got {given!r}")
    inside = os.path.normpath(path.parent / given)
    if Path(given).expanduser().is_absolute() or not Path(inside).is_relative_to(os.path.normpath(path.parent)):
        raise DataError(
            f"{where}: {key!r} {given!r} is outside the models file's folder; paths in a models file are relative to "
            f"it and stay inside {path.parent.absolute()} (copy or link the file there)"
        )
    return Path(inside)


def _fraction(table: dict[str, Any], key: str, where: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataError(f"{where}: {key!r} must be a number, got {value!r}")
    if not 0 <= value <= 1:
        raise DataError(f"{where}: {key!r} is a fraction between 0 and 1 (e.g. 0.2139 for 21.39%), got {value!r}")
    return float(value)


def _user_model(path: Path, table_name: str, name: str, table: Any) -> UserModel:
    where = f"{path} [{table_name}]"
    _check_table(where, name, table)
    values: dict[str, Any] = {}
    for key in SETTING_KEYS:  # the model's settings, checked by their one declaration
        if table.get(key) is None:
            continue
        if SETTINGS[key].parse is not str and key in ("checkpoint", "label_map"):
            values[key] = _inside(path, where, key, table[key])
        else:
            values[key] = checked(SETTINGS[key], table[key], f"{where}: {key!r}")
    for key in ("label", "source"):
        if not isinstance(table.get(key, ""), str):
            raise DataError(f"{where}: {key!r} must be a string, got {table[key]!r}")
    expected, tolerance = _fraction(table, "expected", where), _fraction(table, "tolerance", where)
    if expected is not None and tolerance is None:
        raise DataError(f"{where}: 'tolerance' is required with 'expected' (a fraction, e.g. 0.015)")
    if tolerance is not None and tolerance <= 0:
        raise DataError(f"{where}: 'tolerance' must be positive, got {tolerance!r}")
    normalizations = table.get("normalizations", ["model", "wrong"])
    if not isinstance(normalizations, list) or not normalizations or any(n not in CASES for n in normalizations):
        raise DataError(f"{where}: 'normalizations' must be a non-empty list of {', '.join(CASES)}, "
                        f"got {normalizations!r}")  # fmt: skip
    flip_budget = table.get("flip_budget")
    if flip_budget is not None:
        flip_budget = check_field("flip_budget", flip_budget, where)
    try:
        overrides = PreprocessOverrides(
            **{key: values.get(key) for key in ("mean", "std", "interpolation", "input_size")},
            origin=f"{path.name} [{table_name}]",
        )
    except ValueError as error:
        raise DataError(f"{where}: {error}") from None
    baseline = table.get("baseline")
    return UserModel(
        id=name, spec=table["spec"].strip(), label=table.get("label", name), base_dir=path.parent, origin=where,
        checkpoint=values.get("checkpoint"), checkpoint_key=values.get("checkpoint_key"),
        strip_prefix=values.get("strip_prefix"), label_map=values.get("label_map"), overrides=overrides,
        expected=expected, tolerance=tolerance, source=table.get("source", ""),
        normalizations=tuple(dict.fromkeys(normalizations)),
        baseline=None if baseline is None else _inside(path, where, "baseline", baseline),
        trust_repo=bool(values.get("trust_repo", False)), flip_budget=flip_budget,
        keyed=parse_keyed(table.get("expectations"), where),
        zero_shot={k: str(values[k]) for k in ("class_space", "templates", "logit_scale") if k in values},
    )  # fmt: skip
