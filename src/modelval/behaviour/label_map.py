"""Which of a model's outputs stand for each of the 16 categories.

An ImageNet-1k classifier uses the reference toolbox's table (:data:`IMAGENET_INDICES`). A head that
is not 1000-way (a 10-way fine-tune, a 16-way classifier) needs a *label map*: a JSON object mapping
category names to non-empty lists of output indices, the lists disjoint::

    {"airplane": [0], "bear": [1], "bicycle": [2, 3], ...}

A category the head has no output for is left out: it scores 0 and is never the decision (a 10-way
head can answer 10 of the 16 categories at most); the result lists the unmapped ones. The indices are
checked against the head's size when the first batch comes out of the model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from modelval.behaviour.categories import IMAGENET_LABEL_MAP, LabelMap
from modelval.errors import DataError

__all__ = ["IMAGENET_LABEL_MAP", "LabelMap", "read_label_map"]


def read_label_map(path: str | os.PathLike[str]) -> LabelMap:
    """A label map from a JSON file (see the module docstring); every problem is named with the file.

    Parameters
    ----------
    path
        The JSON file.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"label map {path} not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"label map {path} cannot be read: {error}") from None
    except json.JSONDecodeError as error:
        raise DataError(f"label map {path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise DataError(f"label map {path}: expected a JSON object of category -> [indices], got {type(data).__name__}")
    indices: dict[str, tuple[int, ...]] = {}
    for name, values in data.items():
        if isinstance(values, int) and not isinstance(values, bool):
            values = [values]
        if not isinstance(values, list):
            raise DataError(f"label map {path}: {name!r} must map to a list of output indices, got {values!r}")
        indices[name] = tuple(values)
    return LabelMap(indices, origin=str(path))
