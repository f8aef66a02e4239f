"""Regression baseline files: per-image decisions and top-5 category probabilities of one evaluation.

File format (JSON, ``"format": "modelval-baseline/1"``): the evaluation settings (model, normalization, resize,
aggregation, the loading settings that shaped the run (``"settings"``, re-applied by a comparison), the effective
preprocessing), library versions, the stimulus manifest digest, the shape-bias summary, and one record per image:
``{"name", "shape", "texture", "decision", "top5": [[category, probability], ...]}`` where the
probabilities are the 16 aggregated category probabilities (the quantities decisions come from).
:mod:`modelval.judgement.baseline` compares a fresh run with one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelval import __version__
from modelval.atomic import write_text
from modelval.behaviour.categories import CATEGORIES
from modelval.errors import DataError

if TYPE_CHECKING:  # the command line reads REAPPLIED for its help: no torch for `--help`
    from modelval.evaluation import Evaluation

FORMAT = "modelval-baseline/1"
TOP_K = 5


#: The settings a baseline records (``"settings"``) and a comparison re-applies unless given again (issue 40): what
#: shaped the run besides its protocol (``normalization``, ``resize`` and ``aggregation``, stored on their own).
REAPPLIED = (
    "checkpoint", "checkpoint_key", "strip_prefix", "label_map", "mean", "std", "interpolation", "input_size",
    "class_space", "templates", "logit_scale", "amp",
)  # fmt: skip


def run_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`REAPPLIED` settings among ``values`` that are set, JSON-ready (paths as text, tuples as lists).

    Parameters
    ----------
    values
        Setting name -> value (a command's resolved settings).
    """
    kept = {name: values[name] for name in REAPPLIED if values.get(name) is not None}
    return {name: str(v) if isinstance(v, os.PathLike) else list(v) if isinstance(v, tuple) else v
            for name, v in kept.items()}  # fmt: skip


def reapplied_settings(
    baseline: Mapping[str, Any], given: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, tuple[Any, Any]]]:
    """The settings a comparison runs with: each one given again, else the baseline's; and the overrides
    (``name -> (baseline's, given)``) where a given one differs from what the baseline recorded.

    Parameters
    ----------
    baseline
        The loaded baseline.
    given
        Setting name -> value given for this comparison (``None``: not given).
    """
    stored = baseline.get("settings") or {}
    chosen = {**stored, **run_settings(given)}
    overrides = {name: (stored.get(name), chosen[name]) for name in chosen if stored.get(name) != chosen[name]}
    return chosen, overrides


def _manifest_digest(relpaths: list[str]) -> str:
    """A digest of the stimulus list, so a baseline made on other stimuli is recognised."""
    return hashlib.sha256("\n".join(sorted(relpaths)).encode()).hexdigest()[:16]


def baseline_from_evaluation(
    evaluation: Evaluation,
    *,
    normalization: str,
    resize: str = "none",
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON-ready baseline of an evaluation.

    Parameters
    ----------
    evaluation
        The evaluation to keep (its decisions and 16 category probabilities per image).
    normalization
        The normalization it ran under (``model``, ``imagenet``, ...), recorded for the comparison.
    resize
        The resize protocol it ran under (``none``: the 224 px stimuli as they are).
    settings
        The run's settings (name -> value); the :data:`REAPPLIED` ones that are set are stored, so that a
        comparison runs with them again.
    """
    import numpy as np
    import torch

    probabilities = evaluation.category_probabilities
    order = np.argsort(-probabilities, axis=1, kind="stable")[:, :TOP_K]
    images = []
    for index, (stimulus, decision) in enumerate(zip(evaluation.stimuli, evaluation.decisions, strict=True)):
        top = [[CATEGORIES[c], round(float(probabilities[index, c]), 7)] for c in order[index]]
        images.append(
            {
                "name": stimulus.name,
                "shape": stimulus.shape,
                "texture": stimulus.texture,
                "decision": decision.response,
                "top5": top,
            }
        )
    return {
        "format": FORMAT,
        "model": evaluation.model_name,
        "normalization": normalization,
        "resize": resize,
        "aggregation": evaluation.aggregation,
        "settings": run_settings(settings or {}),
        "preprocessing": evaluation.config.to_dict(),
        "stimuli_digest": _manifest_digest([s.relpath for s in evaluation.stimuli]),
        "versions": {"modelval": __version__, "torch": torch.__version__},
        "summary": {
            k: v
            for k, v in evaluation.result.to_dict().items()
            if k not in ("per_category", "ci95", "ci95_resampling")  # the point estimate only
        },
        "images": images,
    }


def save_baseline(path: str | os.PathLike[str], baseline: dict[str, Any]) -> Path:
    """Write ``baseline`` to ``path`` atomically, one image per line (small files, readable diffs).

    Parameters
    ----------
    path
        The file to write (``.json``).
    baseline
        What :func:`baseline_from_evaluation` returned.
    """
    header = json.dumps({**baseline, "images": "@IMAGES@"}, indent=1)
    images = ",\n  ".join(json.dumps(record) for record in baseline["images"])
    # Atomic: a full disk leaves the previous baseline as it was, never a truncated one.
    return write_text(path, header.replace('"@IMAGES@"', "[\n  " + images + "\n ]") + "\n")


def load_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A baseline file, checked field by field; a bad one is one :class:`~modelval.errors.DataError` line.

    Parameters
    ----------
    path
        The file :func:`save_baseline` wrote.
    """
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"baseline file not found: {path}") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: not a JSON baseline ({error})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"{path}: cannot read the baseline ({error})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise DataError(f'{path}: not a modelval baseline (expected "format": "{FORMAT}")')
    for key in ("model", "normalization", "images"):
        if key not in payload:
            raise DataError(f"{path}: baseline lacks the {key!r} entry")
    _check_types(path, payload)
    return payload


def _check_types(path: Path, payload: dict[str, Any]) -> None:
    """Every field a comparison reads has the type it needs; a wrong one is one line naming the field."""

    def bad(field: str, expected: str, value: object) -> DataError:
        return DataError(f"{path}: {field} must be {expected}, got {type(value).__name__} {str(value)[:60]!r}")

    for key in ("model", "normalization", "resize", "aggregation"):
        value = payload.get(key, "none")
        if not isinstance(value, str) or not value.strip():
            raise bad(f'"{key}"', "a non-empty string", value)
    settings = payload.get("settings", {})
    if not isinstance(settings, dict) or not set(settings) <= set(REAPPLIED):
        unknown = sorted(set(settings) - set(REAPPLIED)) if isinstance(settings, dict) else settings
        raise bad('"settings"', f"an object of {', '.join(REAPPLIED)}", unknown)
    for name, value in settings.items():
        if not isinstance(value, str | int | float | list) or isinstance(value, bool):
            raise bad(f'"settings".{name}', "a string, a number or a list", value)
    summary = payload.get("summary", {})
    if not isinstance(summary, dict):
        raise bad('"summary"', "an object", summary)
    shape_bias = summary.get("shape_bias")
    if shape_bias is not None and (isinstance(shape_bias, bool) or not isinstance(shape_bias, int | float)):
        raise bad('"summary.shape_bias"', "a number or null", shape_bias)
    images = payload["images"]
    if not isinstance(images, list) or not images:
        raise bad('"images"', "a non-empty list of per-image records", images)
    for number, record in enumerate(images):
        where = f'"images"[{number}]'
        if not isinstance(record, dict):
            raise bad(where, 'an object {"name", "decision", "top5"}', record)
        for key in ("name", "decision"):
            if not isinstance(record.get(key), str):
                raise bad(f"{where}.{key}", "a string", record.get(key))
        if record["decision"] not in CATEGORIES and record["decision"] != "na":
            raise DataError(f"{path}: {where}.decision {record['decision']!r} is not one of the 16 categories")
        top = record.get("top5")
        if not isinstance(top, list):
            raise bad(f"{where}.top5", "a list of [category, probability] pairs", top)
        for pair in top:
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or pair[0] not in CATEGORIES
                or isinstance(pair[1], bool)
                or not isinstance(pair[1], int | float)
                or not math.isfinite(pair[1])
            ):
                raise bad(f"{where}.top5", "a list of [category, probability] pairs", pair)
    names = [record["name"] for record in images]
    if len(set(names)) != len(names):
        duplicate = next(name for name in names if names.count(name) > 1)
        raise DataError(f'{path}: the image {duplicate!r} appears twice in "images"')


def baseline_model(
    baseline: dict[str, Any], path: str | os.PathLike[str], *, model: str | None = None, trust_code: bool = False
) -> str:
    """The model a comparison runs: ``model`` when given, else the baseline's own, which may not name code.

    A baseline is a shared, committed data file: a ``"model"`` that imports and runs Python code
    (``file.py:fn``, ``module:fn``, ``hub:``) runs only with the same explicit consent as a ``hub:`` spec
    (``trust_code``, the command line's ``--trust-repo``) or when the model is given again (``model``).

    Parameters
    ----------
    baseline
        The loaded baseline.
    path
        Its file (named in the refusal).
    model
        The model given again on the command line (``--model``), which then runs instead.
    trust_code
        Consent to run a baseline's model that names code (``--trust-repo``).
    """
    from modelval.models.specs import check_spec_consent

    return check_spec_consent(str(baseline["model"]), f"baseline {path}", given=model, trusted=trust_code)

