"""Expected (published) shape-bias values, read from ``modelval/data/expected_shape_bias.toml``.

A model's table holds its default expectation (``expected``, ``tolerance``, ``flip_budget``) and, optionally,
entries keyed by where and how the model runs, in an ``expectations`` table (the models file takes the same)::

    [models.efficientnet_lite0]
    flip_budget = 0                                   # default: CPU fp32 is the reference itself
    [models.efficientnet_lite0.expectations]
    "cuda" = { flip_budget = 2 }                      # CUDA fp32 against the CPU fp32 decisions
    "cuda/bf16" = { flip_budget = 12 }
    "cuda:9.0/bf16" = { flip_budget = 8, note = "measured on an H100" }
    "*/fp16" = { tolerance = 0.02 }

A key is ``DEVICE[:CAPABILITY][/DTYPE]``: the device type (``cpu``, ``cuda``, ``mps`` or ``*``), a CUDA compute
capability (``8.0``, ``9.0``), the precision (``fp32``, ``bf16``, ``fp16`` or ``*``); ``default`` names the
model's own fields. Every key that matches a run applies, least specific first, so a more specific key
overrides the fields it sets and inherits the others: the **most specific match wins**, where specific
means more parts given (device, capability, dtype), and on a tie the key naming the dtype. The verdict names
the entry that decided (``PASS [cuda/bf16]``, ``expected 21.39% +- 1.5 pp [cuda:9.0/bf16]``); a model
without keyed entries keeps its plain verdicts (``PASS``).

``flip_budget`` is the number of decisions a run may flip against the fp32 CPU reference run of the same
weights and stimuli (mixed precision, another device): :func:`modelval.evaluation.flips.decision_flips` and the
GPU tests hold a run to it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from modelval.errors import DataError
from modelval.paths import package_data

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXPECTED_FILE = "expected_shape_bias.toml"
DEVICE_TYPES: tuple[str, ...] = ("cpu", "cuda", "mps")
DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16")
#: The fields a keyed entry may set (each one overrides the less specific entries' value).
ENTRY_FIELDS: tuple[str, ...] = ("expected", "tolerance", "flip_budget", "source", "note")
DEFAULT_ENTRY = "default"
_KEY = re.compile(r"(?P<device>\*|[a-z]+)(?::(?P<capability>\d+\.\d+))?(?:/(?P<dtype>\*|[a-z0-9]+))?")


@dataclass(frozen=True)
class RunSetting:
    """Where and how a run ran: the device type, the CUDA compute capability (``"9.0"``) and the precision."""

    device: str = "cpu"
    capability: str | None = None
    dtype: str = "fp32"

    def __str__(self) -> str:
        capability = f":{self.capability}" if self.capability else ""
        return f"{self.device}{capability}/{self.dtype}"

    @classmethod
    def of_provenance(cls, provenance: Mapping[str, Any]) -> RunSetting:
        """The setting a provenance record states (``device.type``, ``device.capability``, ``precision``).

        Parameters
        ----------
        provenance
            A run's provenance record.
        """
        device = provenance.get("device")
        device = device if isinstance(device, Mapping) else {}
        capability = device.get("capability")
        return cls(
            device=str(device.get("type") or "cpu"),
            capability=str(capability) if capability else None,
            dtype=str(provenance.get("precision") or "fp32"),
        )

    @classmethod
    def of_evaluation(cls, evaluation: Any) -> RunSetting:
        """The setting of an :class:`~modelval.evaluation.Evaluation` (its provenance and its ``amp``).

        Parameters
        ----------
        evaluation
            The evaluation.
        """
        setting = cls.of_provenance(getattr(evaluation, "provenance", None) or {})
        amp = getattr(evaluation, "amp", None)
        return dataclasses.replace(setting, dtype=amp) if amp else setting


@dataclass(frozen=True)
class ExpectationKey:
    """A parsed entry key: ``None`` parts match anything."""

    text: str
    device: str | None = None
    capability: str | None = None
    dtype: str | None = None

    @classmethod
    def parse(cls, text: str) -> ExpectationKey:
        """``cuda:9.0/bf16``, ``cuda/bf16``, ``*/fp16``, ``cpu``, ``default``; a bad key is one DataError line.

        Parameters
        ----------
        text
            The key as written in the ``expectations`` table.
        """
        if text == DEFAULT_ENTRY:
            return cls(text)
        match = _KEY.fullmatch(text)
        how = (
            f"an expectations key is DEVICE[:CAPABILITY][/DTYPE] (device {', '.join(DEVICE_TYPES)} or *; "
            f"capability such as 8.0; dtype {', '.join(DTYPES)} or *) or {DEFAULT_ENTRY!r}, got {text!r}"
        )
        if match is None:
            raise DataError(how)
        device, capability, dtype = match["device"], match["capability"], match["dtype"]
        if device not in (*DEVICE_TYPES, "*") or (dtype is not None and dtype not in (*DTYPES, "*")):
            raise DataError(how)
        if capability is not None and device != "cuda":
            raise DataError(f"a compute capability is a CUDA device's ({text!r}: write cuda:{capability}/...)")
        return cls(text, None if device == "*" else device, capability, None if dtype in (None, "*") else dtype)

    def matches(self, setting: RunSetting) -> bool:
        """Whether a run on ``setting`` falls under this key (a part the key leaves out matches anything).

        Parameters
        ----------
        setting
            The run's device, capability and dtype.
        """
        return (
            (self.device is None or self.device == setting.device)
            and (self.capability is None or self.capability == setting.capability)
            and (self.dtype is None or self.dtype == setting.dtype)
        )

    @property
    def specificity(self) -> tuple[int, bool, bool]:
        """More parts given is more specific; on a tie, the key naming the dtype, then the device."""
        given = (self.device, self.capability, self.dtype)
        return (sum(part is not None for part in given), self.dtype is not None, self.device is not None)


@dataclass(frozen=True)
class KeyedExpectation:
    """One keyed entry: its key and the fields it sets (a subset of :data:`ENTRY_FIELDS`)."""

    key: ExpectationKey
    fields: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class ExpectedShapeBias:
    model: str
    label: str
    value: float | None  # None: nothing published
    tolerance: float | None
    source: str
    also_published: tuple[tuple[float, str], ...] = ()
    baseline: str | None = None
    note: str = ""
    #: Decisions a run may flip against the fp32 CPU reference (None: not stated).
    flip_budget: int | None = None
    #: Entries keyed by device type, compute capability and dtype (see the module docstring).
    keyed: tuple[KeyedExpectation, ...] = ()
    #: The entry this expectation was resolved to (``"cuda/bf16"``, ``"default"``); None: not resolved, or a
    #: model without keyed entries (its verdicts stay plain).
    entry: str | None = None

    def named(self, word: str) -> str:
        """``word`` with the keyed entry that decided (``FAIL [cuda/bf16]``), or alone for a flat expectation.

        Parameters
        ----------
        word
            ``PASS``, ``FAIL``, ...
        """
        return f"{word} [{self.entry}]" if self.entry else word

    def describe(self) -> str:
        """``expected 21.39% +- 1.5 pp [cuda/bf16]`` (or the flip budget alone when no value is stated)."""
        entry = f" [{self.entry}]" if self.entry else ""
        if self.value is None or self.tolerance is None:
            budget = f"flip budget {self.flip_budget}" if self.flip_budget is not None else "no expected value"
            return f"{budget}{entry}"
        return f"expected {self.value * 100:.2f}% +- {self.tolerance * 100:.1f} pp{entry}"

    def for_setting(self, setting: RunSetting) -> ExpectedShapeBias:
        """This expectation for a run on ``setting``: the default fields, overridden by every matching keyed
        entry from the least to the most specific; :attr:`entry` names the most specific one that matched.

        Parameters
        ----------
        setting
            The run's device, capability and dtype.
        """
        if not self.keyed:
            return self
        values: dict[str, Any] = {
            "expected": self.value, "tolerance": self.tolerance, "flip_budget": self.flip_budget,
            "source": self.source, "note": self.note,
        }  # fmt: skip
        entry = DEFAULT_ENTRY
        for keyed in sorted((k for k in self.keyed if k.key.matches(setting)), key=lambda k: k.key.specificity):
            values.update(dict(keyed.fields))
            entry = keyed.key.text
        return dataclasses.replace(
            self, value=values["expected"], tolerance=values["tolerance"], flip_budget=values["flip_budget"],
            source=values["source"], note=values["note"], keyed=(), entry=entry,
        )  # fmt: skip

    def for_evaluation(self, evaluation: Any) -> ExpectedShapeBias:
        """:meth:`for_setting` of the setting an evaluation ran on (its provenance's device and precision).

        Parameters
        ----------
        evaluation
            The evaluation.
        """
        return self if self.entry is not None else self.for_setting(RunSetting.of_evaluation(evaluation))


def parse_keyed(table: Any, where: str) -> tuple[KeyedExpectation, ...]:
    """An ``expectations`` table as keyed entries, checked; an error names ``where`` and the key.

    Parameters
    ----------
    table
        The ``expectations`` table as read from TOML.
    where
        Its place (file and model), for the error.
    """
    if table is None:
        return ()
    if not isinstance(table, Mapping):
        raise DataError(f"{where}: 'expectations' must be a table of DEVICE[:CAPABILITY][/DTYPE] = {{...}} entries")
    entries = []
    for text, fields in table.items():
        try:
            key = ExpectationKey.parse(str(text))
        except DataError as error:
            raise DataError(f"{where}: {error}") from None
        if not isinstance(fields, Mapping):
            raise DataError(f"{where}: expectations {text!r} must be a table such as {{ tolerance = 0.02 }}")
        checked = []
        for name, value in fields.items():
            if name not in ENTRY_FIELDS:
                raise DataError(f"{where}: expectations {text!r}: unknown field {name!r}; the fields are "
                                f"{', '.join(ENTRY_FIELDS)}")  # fmt: skip
            checked.append((name, check_field(name, value, f"{where}: expectations {text!r}")))
        entries.append(KeyedExpectation(key, tuple(checked)))
    return tuple(entries)


def check_field(name: str, value: Any, where: str) -> Any:
    """One expectation field checked: fractions for ``expected``/``tolerance``, a count for ``flip_budget``.

    Parameters
    ----------
    name
        The field's name.
    value
        Its value as read.
    where
        Its place (file, model and key), for the error.
    """
    if name in ("source", "note"):
        if not isinstance(value, str):
            raise DataError(f"{where}: {name!r} must be a string, got {value!r}")
        return value
    if name == "flip_budget":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DataError(f"{where}: 'flip_budget' is a number of decisions (a whole number >= 0), got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataError(f"{where}: {name!r} must be a number, got {value!r}")
    if not 0 <= value <= 1 or (name == "tolerance" and value <= 0):
        raise DataError(f"{where}: {name!r} is a fraction between 0 and 1 (e.g. 0.2139 for 21.39%), got {value!r}")
    return float(value)


@lru_cache(maxsize=4)
def load_expected(path: Path | None = None) -> dict[str, Any]:
    """The expected-values file (the package's own unless ``path``), read as TOML; a bad one is one DataError line.

    Parameters
    ----------
    path
        Another expected-values file.
    """
    path = path or package_data(EXPECTED_FILE)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"expected-values file not found: {path}") from None
    except tomllib.TOMLDecodeError as error:
        raise DataError(f"{path}: invalid TOML: {error}") from None


def expected_for(
    model: str, path: Path | None = None, *, setting: RunSetting | None = None
) -> ExpectedShapeBias | None:
    """The expected value of a registered model entry (by name), or None if it has no entry; with ``setting``,
    resolved for a run there (:meth:`ExpectedShapeBias.for_setting`).

    Parameters
    ----------
    model
        The registry name.
    path
        Another expected-values file (default: the package's).
    setting
        The run's device, capability and dtype.
    """
    entry = load_expected(path).get("models", {}).get(model)
    if entry is None:
        return None
    where = f"{path or EXPECTED_FILE} [models.{model}]"
    budget = entry.get("flip_budget")
    expected = ExpectedShapeBias(
        model=model,
        label=entry.get("label", model),
        value=entry.get("expected"),
        tolerance=entry.get("tolerance"),
        source=entry.get("source", entry.get("note", "")),
        also_published=tuple((p["value"], p["source"]) for p in entry.get("also_published", [])),
        baseline=entry.get("baseline"),
        note=entry.get("note", ""),
        flip_budget=None if budget is None else check_field("flip_budget", budget, where),
        keyed=parse_keyed(entry.get("expectations"), where),
    )
    return expected if setting is None else expected.for_setting(setting)


def deit_policy(path: Path | None = None) -> dict[str, Any]:
    """The ``[deit]`` table of the expected-values file: how the DeiT cases are held to their published values.

    Parameters
    ----------
    path
        Another expected-values file (default: the package's).
    """
    return dict(load_expected(path).get("deit", {}))
