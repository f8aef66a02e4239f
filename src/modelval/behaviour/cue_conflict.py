"""The cue-conflict stimulus set of Geirhos et al. (ICLR 2019): what a stimulus is and how its name reads.

Layout: 16 folders named after the *shape* category, files ``<shape><i>-<texture><j>.png``; the
texture category is the last ``-`` part without its digits. The full set has 1280 images, 80 of
them with shape == texture (no conflict; excluded from shape bias) and 1200 conflicts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from modelval.behaviour.categories import CATEGORIES
from modelval.errors import DataError

EXPECTED_IMAGES = 1280
EXPECTED_CONFLICTS = 1200

# Both published imagename styles end in "<shape><i>-<texture><j>.png"; the texture-vs-shape style
# prefixes "NNNN_s5n_dnn_0_<cat>_00_".
_STIMULUS_NAME = re.compile(r"(?:^|_)(?P<shape>[a-z]+)(?P<i>\d+)-(?P<texture>[a-z]+)(?P<j>\d+)\.png$")


@dataclass(frozen=True, order=True)
class Stimulus:
    """One cue-conflict image: ``relpath`` is ``<shape folder>/<file name>``."""

    relpath: str
    shape: str
    texture: str

    @property
    def name(self) -> str:
        return self.relpath.rsplit("/", 1)[-1]

    @property
    def is_conflict(self) -> bool:
        return self.shape != self.texture


def parse_stimulus_name(name: str) -> tuple[str, str]:
    """``airplane1-bicycle2.png`` (either published style) -> ``("airplane", "bicycle")``.

    Parameters
    ----------
    name
        A cue-conflict file name.
    """
    match = _match(name)
    return match.group("shape"), match.group("texture")


def stimulus_sources(name: str) -> tuple[str, str]:
    """``airplane1-bicycle2.png`` -> ``("airplane1", "bicycle2")``: the shape image and the texture image.

    Geirhos et al. made the 1280 stimuli by style transfer of 48 texture images (3 per category) onto
    160 shape images (10 per category); stimuli that share a source are not independent draws, which
    is what cluster resampling (:mod:`modelval.behaviour.resampling`) needs to know.

    Parameters
    ----------
    name
        A cue-conflict file name.
    """
    match = _match(name)
    return match.group("shape") + match.group("i"), match.group("texture") + match.group("j")


def _match(name: str) -> re.Match[str]:
    base = name.rsplit("/", 1)[-1]
    match = _STIMULUS_NAME.search(base)
    if match is None:
        raise DataError(
            f"cannot parse stimulus name {name!r}: expected '<shape><i>-<texture><j>.png', "
            "e.g. 'airplane1-bicycle2.png'"
        )
    shape, texture = match.group("shape"), match.group("texture")
    for role, category in (("shape", shape), ("texture", texture)):
        if category not in CATEGORIES:
            raise DataError(f"{name!r}: unknown {role} category {category!r}; expected one of {', '.join(CATEGORIES)}")
    return match
