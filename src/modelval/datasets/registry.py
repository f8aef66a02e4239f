"""The stimulus sets as the datasets wing reads them: a view of the one registry of experiments.

Each entry (:class:`~modelval.behaviour.experiments.Experiment`) carries where the images live on disk (a
folder of 16 category folders, or model-vs-human's release layout ``dnn/session-1/<file>``), how many there
are, which committed SHA-256 manifest verifies them, where they are downloaded from, under which licence, how
the label is read from a file name, and which published raw data holds the human observers' decisions on them.
A new stimulus set is one new entry in :data:`~modelval.behaviour.experiments.EXPERIMENTS`.
"""

from modelval.behaviour.experiments import (
    DATASET_NAMES,
    DEFAULT_DATASET,
    TEXTURE_VS_SHAPE_RAW,
    Experiment,
    get_dataset,
    list_datasets,
    parse_release_image_name,
)
from modelval.behaviour.raw_names import parse_category_image_name

#: One stimulus set's entry: the experiment it belongs to.
DatasetEntry = Experiment

__all__ = [
    "DATASET_NAMES",
    "DEFAULT_DATASET",
    "TEXTURE_VS_SHAPE_RAW",
    "DatasetEntry",
    "get_dataset",
    "list_datasets",
    "parse_category_image_name",
    "parse_release_image_name",
]
