"""The stimulus sets of Geirhos et al. (ICLR 2019) and model-vs-human (NeurIPS 2021) as registry entries.

An entry carries its config as data: where the images live on disk (a folder of 16 category folders, or
model-vs-human's release layout ``dnn/session-1/<file>``), how many there are, which committed SHA-256
manifest verifies them (none is published for model-vs-human's 14 further sets), where they are downloaded
from (and where on a ``MODELVAL_MIRROR``), under which licence, how the label is read from a file
name, and which published raw-data experiment holds the human observers' decisions on them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import parse_stimulus_name
from modelval.behaviour.experiments import (
    MODEL_VS_HUMAN_DATASETS,
    canonical_condition,
    experiment,
    parse_session_name,
)
from modelval.behaviour.trials import FILE_PREFIXES
from modelval.errors import DataError

TEXTURE_VS_SHAPE_RAW = "https://raw.githubusercontent.com/rgeirhos/texture-vs-shape/master"
#: model-vs-human's release v0.1: one ``<dataset>.tar.gz`` per dataset (``modelvshuman/utils.py``).
MODEL_VS_HUMAN_RELEASE = "https://github.com/bethgelab/model-vs-human/releases/download/v0.1"
IMAGENET_TERMS = "ImageNet terms of access (https://image-net.org/download.php)"

_CATEGORY_IMAGE = re.compile(r"^(?P<category>[a-z]+)(?P<i>\d+)\.png$")


def parse_category_image_name(name: str) -> tuple[str, str]:
    """``oven10.png`` -> ``("oven", "oven")``: an image of one category, no cue conflict."""
    base = name.rsplit("/", 1)[-1]
    match = _CATEGORY_IMAGE.match(base)
    if match is None or match.group("category") not in CATEGORIES:
        raise DataError(
            f"cannot parse image name {name!r}: expected '<category><i>.png' with one of the 16 categories, "
            "e.g. 'oven10.png'"
        )
    return match.group("category"), match.group("category")


def parse_release_image_name(name: str, *, dataset: str) -> tuple[str, str]:
    """``0001_nse_dnn_0.00_bicycle_10_n03792782_1418.png`` -> ``("bicycle", "bicycle")`` for a model-vs-human
    release image of ``dataset`` (its code, one of the 16 categories and one of its conditions)."""
    base = name.rsplit("/", 1)[-1]
    parsed = parse_session_name(base)
    entry = experiment(dataset)
    if parsed is None or parsed.code != entry.code or parsed.category not in CATEGORIES:
        raise DataError(
            f"cannot parse image name {name!r} as a {dataset} image: expected "
            f"'<trial>_{entry.code}_dnn_<condition>_<category>_<n>_<image>.png' (model-vs-human's release naming) "
            "with one of the 16 categories"
        )
    canonical_condition(parsed.condition, dataset)  # an unknown level is an error naming the known ones
    return parsed.category, parsed.category


@dataclass(frozen=True)
class DatasetEntry:
    """One stimulus set: its layout, checks, sources and how its labels are read."""

    name: str
    description: str
    folder: str  # folder name in the data home / user cache
    images: int
    manifest: str | None  # file name under modelval/data/; None: no checksums are published
    label_of: Callable[[str], tuple[str, str]]  # file name -> (shape, texture); equal when no conflict
    experiment: str  # published raw-data file prefix (texture-vs-shape raw-data/<experiment>/)
    folder_url: str  # texture-vs-shape folder, fetched file by file: <folder_url>/<category>/<file>; "" if none
    archive_url: str | None = None  # a release archive of the whole set, when one exists
    license: str = "CC BY 4.0"
    #: ``categories``: ``<category>/<file>``; ``sessions``: model-vs-human's ``dnn/session-<k>/<file>``
    layout: str = "categories"
    #: True: fetched only when the user asks (``modelval data download``), with the licence shown; never on
    #: first use (model-vs-human's 14 further sets: ImageNet-derived, or ImageNet-Sketch's MIT)
    fetch_on_request: bool = False
    source: str = "texture-vs-shape"
    #: The bytes of the manifest's files together, where they are known exactly (an archive of the set may
    #: declare no more); ``None``: bounded per image (:mod:`modelval.datasets.release`).
    image_bytes: int | None = None

    @property
    def has_conflicts(self) -> bool:
        return self.name == "cue-conflict"


_REGISTRY: dict[str, DatasetEntry] = {}


def register_dataset(entry: DatasetEntry) -> DatasetEntry:
    if entry.name in _REGISTRY:
        raise ValueError(f"dataset {entry.name!r} is already registered")
    _REGISTRY[entry.name] = entry
    return entry


def get_dataset(name: str) -> DatasetEntry:
    """The registry entry of ``name``; an unknown name is an error listing the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; expected one of: {', '.join(_REGISTRY)}") from None


def list_datasets() -> list[DatasetEntry]:
    return list(_REGISTRY.values())


register_dataset(
    DatasetEntry(
        name="cue-conflict",
        description="style-transfer images whose shape and texture come from two categories",
        folder="cue-conflict",
        images=1280,
        manifest="cue_conflict_manifest.json",
        label_of=parse_stimulus_name,
        experiment=FILE_PREFIXES["cue-conflict"],
        folder_url=f"{TEXTURE_VS_SHAPE_RAW}/stimuli/style-transfer-preprocessed-512",
        archive_url="https://github.com/bethgelab/model-vs-human/releases/download/v0.1/cue-conflict.tar.gz",
        image_bytes=136_489_547,  # the 1280 files of cue_conflict_manifest.json (largest: 133,629 bytes)
    )
)
register_dataset(
    DatasetEntry(
        name="edges",
        description="edge maps of natural images, 10 per category: the outline without texture",
        folder="edges",
        images=160,
        manifest="edges_manifest.json",
        label_of=parse_category_image_name,
        experiment=FILE_PREFIXES["edges"],
        folder_url=f"{TEXTURE_VS_SHAPE_RAW}/stimuli/edges",
    )
)
register_dataset(
    DatasetEntry(
        name="filled-silhouettes",
        description="filled black silhouettes, 10 per category: the shape without texture or inner edges",
        folder="filled-silhouettes",
        images=160,
        manifest="filled_silhouettes_manifest.json",
        label_of=parse_category_image_name,
        experiment=FILE_PREFIXES["filled-silhouettes"],
        folder_url=f"{TEXTURE_VS_SHAPE_RAW}/stimuli/filled-silhouettes",
    )
)


_RELEASE_DESCRIPTIONS = {
    "colour": "ImageNet images in colour and in greyscale",
    "contrast": "ImageNet images at 8 contrast levels (100% to 1%)",
    "high-pass": "high-pass filtered ImageNet images (8 filter widths)",
    "low-pass": "low-pass filtered (blurred) ImageNet images (8 filter widths)",
    "phase-scrambling": "ImageNet images with phase noise of 0 to 180 degrees",
    "power-equalisation": "ImageNet images with their own and with an equalised power spectrum",
    "false-colour": "ImageNet images in true and in opponent colours",
    "rotation": "ImageNet images rotated by 0, 90, 180 and 270 degrees",
    "eidolonI": "Eidolon distortions (coherence 1.0) at 8 reach levels",
    "eidolonII": "Eidolon distortions (coherence 0.3) at 8 reach levels",
    "eidolonIII": "Eidolon distortions (coherence 0.0) at 8 reach levels",
    "uniform-noise": "ImageNet images with additive uniform noise of 8 widths",
    "sketch": "ImageNet-Sketch drawings, 50 per category",
    "stylized": "Stylized-ImageNet images, 50 per category",
}

for _name in MODEL_VS_HUMAN_DATASETS:
    register_dataset(
        DatasetEntry(
            name=_name,
            description=_RELEASE_DESCRIPTIONS[_name],
            folder=_name,
            images=experiment(_name).images,
            manifest=None,
            label_of=functools.partial(parse_release_image_name, dataset=_name),
            experiment=FILE_PREFIXES[_name],
            folder_url="",
            archive_url=f"{MODEL_VS_HUMAN_RELEASE}/{_name}.tar.gz",
            license="MIT (ImageNet-Sketch)" if _name == "sketch" else IMAGENET_TERMS,
            layout="sessions",
            fetch_on_request=True,
            source="model-vs-human",
        )
    )

#: Every registered stimulus set's name (the command line's ``--dataset`` choices).
DATASET_NAMES: tuple[str, ...] = tuple(_REGISTRY)
