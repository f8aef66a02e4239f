"""The names of the published stimuli and raw data, read without the registry: an image of one category
(``oven10.png``), a session or release name (``0001_cl_dnn_bw_oven_40_n04111531_14126.png``) and the short name
that matches two observers' trials within a condition (model-vs-human's ``get_short_imagename`` in
``modelvshuman/helper/plotting_helper.py``: the ImageNet id ``n03792782_1418.png`` for ImageNet-derived images,
else the part after the last ``_``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from modelval.behaviour.categories import CATEGORIES
from modelval.errors import DataError

_CATEGORY_IMAGE = re.compile(r"^(?P<category>[a-z]+)(?P<i>\d+)\.png$")


def parse_category_image_name(name: str) -> tuple[str, str]:
    """``oven10.png`` -> ``("oven", "oven")``: an image of one category, no cue conflict.

    Parameters
    ----------
    name
        The file name (a folder part is ignored).
    """
    match = _CATEGORY_IMAGE.match(name.rsplit("/", 1)[-1])
    if match is None or match.group("category") not in CATEGORIES:
        raise DataError(
            f"cannot parse image name {name!r}: expected '<category><i>.png' with one of the 16 categories, "
            "e.g. 'oven10.png'"
        )
    return match.group("category"), match.group("category")


def short_image_name(imagename: str) -> str:
    """model-vs-human's short image name, the key that matches the trials of two observers.

    ``0001_nse_dnn_0.00_bicycle_10_n03792782_1418.png`` -> ``n03792782_1418.png`` (an ImageNet image keeps
    its ``n0…`` synset prefix); ``0001_edg_s01_0_oven_00_oven10.png`` -> ``oven10.png``; a name without
    ``_`` is returned as it is. A folder part (``dnn/session-1/...``) is dropped first.

    Parameters
    ----------
    imagename
        The image name as written.
    """
    parts = imagename.rsplit("/", 1)[-1].split("_")
    return "_".join(parts[-2:]) if len(parts) > 1 and parts[-2].startswith("n0") else parts[-1]


# <trial>_<code>_<observer>_<condition>_<category>_<number>_<image>: the release's and the sessions' names
_SESSION_NAME = re.compile(
    r"^(?P<trial>\d+)_(?P<code>[a-z]+)_(?P<observer>[A-Za-z0-9-]+)_(?P<condition>[^_]+)_(?P<category>[a-z]+)_"
    r"(?P<number>\d+)_(?P<image>.+)$"
)


@dataclass(frozen=True)
class SessionName:
    """The fields of a model-vs-human image name (``0001_cl_dnn_bw_oven_40_n04111531_14126.png``)."""

    trial: str
    code: str
    observer: str
    condition: str
    category: str
    image: str

    @property
    def short(self) -> str:
        return short_image_name(self.image)


def parse_session_name(name: str) -> SessionName | None:
    """The fields of a prefixed image name, or None when ``name`` is not one (e.g. ``oven10.png``).

    Parameters
    ----------
    name
        The image name (a folder part is ignored).
    """
    match = _SESSION_NAME.match(name.rsplit("/", 1)[-1])
    if match is None:
        return None
    return SessionName(*match.group("trial", "code", "observer", "condition", "category", "image"))
