"""The 17 experiments of Geirhos et al. (ICLR 2019) and model-vs-human (NeurIPS 2021): one registry, as data.

An :class:`Experiment` is everything modelval knows about one stimulus set, so that a new dataset is one new
entry in :data:`EXPERIMENTS` and never a new branch in the code that uses it:

- **what it measures**: its conditions (the distortion levels) in model-vs-human's order with their plotting
  labels and axis label (``modelvshuman/datasets/experiments.py``), the conditions its benchmark leaves out
  (``modelvshuman/plotting/plot.py``, ``EXCLUDE_CONDITIONS``: the undistorted control condition, and levels
  where the humans' mean accuracy is below 0.2), and whether its images put a shape and a texture in conflict
  (``has_conflicts``: then a shape bias is defined, the sanity gate applies, the bootstrap resamples texture
  images by default, :mod:`modelval.behaviour.resampling`, and its outputs count "conflict images");
- **how its names read**: the image-name code of its stimuli and human sessions, and its file names' labels
  (``label_of``: cue-conflict names, ``<category><i>.png``, or model-vs-human's release names);
- **where its humans are published**: texture-vs-shape's flat ``raw-data/`` (``<file_prefix>_subject-NN_...``)
  or model-vs-human's ``raw-data/<upstream>/``, and how many observers there are;
- **where its images are**: the folder in the data home, the committed SHA-256 manifest (none is published for
  model-vs-human's 14 further sets), the download URLs, the licence, the layout on disk, whether it is fetched
  only on request, and the bytes of its images. ``behaviour`` never reads a folder; ``modelval.datasets`` does,
  with these facts.

Datasets without a manipulation level (cue-conflict, edges, filled silhouettes, sketch, stylized) have one
condition, ``"0"``. The raw data writes a condition as the experiment did (``0.00``, ``3``, ``true``); where
model-vs-human's pandas reading matches ``0.0``, ``3.0``, ``True``, :func:`canonical_condition` matches the same
without pandas: exact, then ignoring case, then numerically equal.

Trials of two observers are matched within a condition by their short image name
(:func:`~modelval.behaviour.raw_names.short_image_name`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelval.behaviour.categories import CATEGORIES
from modelval.behaviour.cue_conflict import parse_stimulus_name
from modelval.behaviour.raw_names import parse_category_image_name, parse_session_name
from modelval.errors import DataError

#: Where the human decisions of an experiment are published.
TEXTURE_VS_SHAPE = "texture-vs-shape"  # rgeirhos/texture-vs-shape raw-data/ (10 observers; also in model-vs-human)
MODEL_VS_HUMAN = "model-vs-human"  # bethgelab/model-vs-human raw-data/<dataset>/
TEXTURE_VS_SHAPE_RAW = "https://raw.githubusercontent.com/rgeirhos/texture-vs-shape/master"
#: model-vs-human's release v0.1: one ``<dataset>.tar.gz`` per dataset (``modelvshuman/utils.py``).
MODEL_VS_HUMAN_RELEASE = "https://github.com/bethgelab/model-vs-human/releases/download/v0.1"
IMAGENET_TERMS = "ImageNet terms of access (https://image-net.org/download.php)"
#: The dataset a command or function uses when none is named: the cue-conflict stimuli of the shape bias.
DEFAULT_DATASET = "cue-conflict"


@dataclass(frozen=True)
class Condition:
    """One level of an experiment: the value in the data (``c05``) and the label upstream plots (``5``)."""

    value: str
    label: str


@dataclass(frozen=True)
class Experiment:
    """One stimulus set: its conditions, names, human observers and images (see the module docstring)."""

    dataset: str  # modelval's name (``edges``, ``filled-silhouettes``; the others as upstream)
    upstream: str  # model-vs-human's name (``edge``, ``silhouette``, ...)
    code: str  # the image-name code (``0001_<code>_<observer>_<condition>_<category>_...``)
    conditions: tuple[Condition, ...]
    xlabel: str
    excluded: tuple[str, ...]  # condition values the benchmark leaves out
    images: int
    observers: int
    description: str
    humans: str = MODEL_VS_HUMAN  # where the human raw data is published
    #: The raw-data file prefix of its human observers (``<file_prefix>_subject-NN_session_K.csv``).
    file_prefix: str = ""
    #: True: each image has a shape and a texture category (cue-conflict); False: one category per image.
    has_conflicts: bool = False
    #: file name -> (shape, texture), equal when the cues do not conflict; ``None``: model-vs-human's release names
    names: Callable[[str], tuple[str, str]] | None = None
    manifest: str | None = None  # file name under modelval/data/; None: no checksums are published
    folder_url: str = ""  # texture-vs-shape folder, fetched file by file: <folder_url>/<category>/<file>; "" if none
    archive_url: str | None = None  # a release archive of the whole set, when one exists
    license: str = IMAGENET_TERMS
    #: What the user is told of the licence before the first fetch (model-vs-human's further sets).
    terms: str = ""
    #: ``categories``: ``<category>/<file>``; ``sessions``: model-vs-human's ``dnn/session-<k>/<file>``
    layout: str = "sessions"
    #: True: fetched only when the user asks (``modelval data download``), with the licence shown; never on
    #: first use (model-vs-human's 14 further sets: ImageNet-derived, or ImageNet-Sketch's MIT)
    fetch_on_request: bool = True
    #: The bytes of the manifest's files together, where they are known exactly (an archive of the set may
    #: declare no more); ``None``: bounded per image (:mod:`modelval.datasets.release`).
    image_bytes: int | None = None
    #: True: the decoded images are kept in the decode cache (the 160-image sets decode in well under a second).
    decode_cache: bool = False

    @property
    def name(self) -> str:
        return self.dataset

    @property
    def folder(self) -> str:
        """The folder's name in the data home and the user cache."""
        return self.dataset

    @property
    def unit(self) -> str:
        """What its outputs count: ``conflict images`` (a shape bias leaves the others out) or ``images``."""
        return "conflict images" if self.has_conflicts else "images"

    @property
    def download_command(self) -> str:
        """The command that fetches its stimuli."""
        return "modelval data download" + ("" if self.dataset == DEFAULT_DATASET else f" --dataset {self.dataset}")

    @property
    def humans_command(self) -> str:
        """The command that fetches its human observers."""
        named = "" if self.humans == TEXTURE_VS_SHAPE else f" --dataset {self.dataset}"
        return f"modelval data download --humans{named}"

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(c.value for c in self.conditions)

    @property
    def parametric(self) -> bool:
        """True for the 12 distortions with levels (model-vs-human draws their per-condition line plots)."""
        return len(self.conditions) > 1

    @property
    def benchmark_conditions(self) -> tuple[str, ...]:
        """The conditions model-vs-human's benchmark averages over (the excluded ones left out)."""
        return tuple(v for v in self.values if v not in self.excluded)

    def condition_label(self, value: str) -> str:
        """The plotting label of the condition ``value``.

        Parameters
        ----------
        value
            One of :attr:`values`.
        """
        return next(c.label for c in self.conditions if c.value == value)

    def label_of(self, name: str) -> tuple[str, str]:
        """``(shape, texture)`` of an image of this set, read from its file name (equal without a conflict).

        Parameters
        ----------
        name
            The file name (a folder part is ignored).
        """
        return self.names(name) if self.names else parse_release_image_name(name, dataset=self.dataset)

    def resampling(self, unit: str | None = None) -> str:
        """The bootstrap's unit here: ``unit`` checked, ``None`` the default (texture images on cue conflicts).

        Parameters
        ----------
        unit
            One of :data:`~modelval.behaviour.resampling.RESAMPLING_UNITS`, or ``None``.
        """
        from modelval.behaviour.resampling import resolve_unit

        return resolve_unit(unit, cue_conflict=self.has_conflicts)


def parse_release_image_name(name: str, *, dataset: str) -> tuple[str, str]:
    """``0001_nse_dnn_0.00_bicycle_10_n03792782_1418.png`` -> ``("bicycle", "bicycle")``.

    Parameters
    ----------
    name
        A model-vs-human release image name (its code, one of the 16 categories and one of its conditions).
    dataset
        The dataset it belongs to.
    """
    parsed = parse_session_name(name)
    entry = experiment(dataset)
    if parsed is None or parsed.code != entry.code or parsed.category not in CATEGORIES:
        raise DataError(
            f"cannot parse image name {name!r} as a {dataset} image: expected "
            f"'<trial>_{entry.code}_dnn_<condition>_<category>_<n>_<image>.png' (model-vs-human's release naming) "
            "with one of the 16 categories"
        )
    canonical_condition(parsed.condition, dataset)  # an unknown level is an error naming the known ones
    return parsed.category, parsed.category


def _levels(values: str, labels: str | None = None) -> tuple[Condition, ...]:
    data = values.split()
    shown = labels.split() if labels is not None else data
    return tuple(Condition(v, label) for v, label in zip(data, shown, strict=True))


_SINGLE = (Condition("0", "all"),)


def _texture_vs_shape(dataset: str, upstream: str, code: str, images: int, prefix: str, **facts: Any) -> Experiment:
    """One of Geirhos et al.'s three experiments: 10 observers, texture-vs-shape's raw data and stimuli."""
    return Experiment(
        dataset,
        upstream,
        code,
        _SINGLE,
        "",
        (),
        images,
        10,
        humans=TEXTURE_VS_SHAPE,
        file_prefix=prefix,
        license="CC BY 4.0",
        layout="categories",
        fetch_on_request=False,
        manifest=f"{dataset.replace('-', '_')}_manifest.json",
        **facts,
    )


def _release(
    dataset: str,
    code: str,
    values: str,
    labels: str | None,
    xlabel: str,
    excluded: str,
    description: str,
    *,
    images: int = 1280,
    observers: int = 4,
    **facts: Any,
) -> Experiment:
    """One of model-vs-human's 14 further datasets (ImageNet-derived unless told): its release archive, its
    condition ``values`` with their plotting ``labels`` (``None``: the values; no values: one condition)."""
    facts.setdefault(
        "terms",
        f"{dataset} is derived from ImageNet images; using it means accepting the "
        f"{IMAGENET_TERMS}, which allow non-commercial research and education only",
    )
    return Experiment(
        dataset,
        dataset,
        code,
        _levels(values, labels) if values else _SINGLE,
        xlabel,
        tuple(excluded.split()),
        images,
        observers,
        description,
        file_prefix=dataset,
        archive_url=f"{MODEL_VS_HUMAN_RELEASE}/{dataset}.tar.gz",
        **facts,
    )


def _eidolon(dataset: str, coherence: int, excluded: str) -> Experiment:
    values = " ".join(f"{2**k}-{coherence}-10" for k in range(8))
    return _release(
        dataset,
        "eid",
        values,
        "0 1 2 3 4 5 6 7",
        "log2 of the 'reach' parameter",
        excluded,
        f"Eidolon distortions (coherence {coherence / 10:.1f}) at 8 reach levels",
    )


EXPERIMENTS: dict[str, Experiment] = {
    e.dataset: e
    for e in (
        _texture_vs_shape(
            "cue-conflict",
            "cue-conflict",
            "s5n",
            1280,
            "style-transfer-512-nomask-experiment",
            description="style-transfer images whose shape and texture come from two categories",
            has_conflicts=True,
            names=parse_stimulus_name,
            decode_cache=True,
            folder_url=f"{TEXTURE_VS_SHAPE_RAW}/stimuli/style-transfer-preprocessed-512",
            archive_url=f"{MODEL_VS_HUMAN_RELEASE}/cue-conflict.tar.gz",
            image_bytes=136_489_547,  # the 1280 files of cue_conflict_manifest.json (largest: 133,629 bytes)
        ),
        _texture_vs_shape(
            "edges",
            "edge",
            "edg",
            160,
            "edge-experiment",
            names=parse_category_image_name,
            description="edge maps of natural images, 10 per category: the outline without texture",
            folder_url=f"{TEXTURE_VS_SHAPE_RAW}/stimuli/edges",
        ),
        _texture_vs_shape(
            "filled-silhouettes",
            "silhouette",
            "sif",
            160,
            "silhouette-filled-experiment",
            names=parse_category_image_name,
            folder_url=f"{TEXTURE_VS_SHAPE_RAW}/stimuli/filled-silhouettes",
            description="filled black silhouettes, 10 per category: the shape without texture or inner edges",
        ),
        _release(
            "colour", "cl", "cr bw", "colour greyscale", "Colour", "cr", "ImageNet images in colour and in greyscale"
        ),
        _release(
            "contrast",
            "cop",
            "c100 c50 c30 c15 c10 c05 c03 c01",
            "100 50 30 15 10 5 3 1",
            "Contrast in percent",
            "c100 c03 c01",
            "ImageNet images at 8 contrast levels (100% to 1%)",
        ),
        _release(
            "high-pass",
            "hp",
            "inf 3.0 1.5 1.0 0.7 0.55 0.45 0.4",
            "inf 3.0 1.5 1.0 .7 .55 .45 .4",
            "Filter standard deviation",
            "inf 0.55 0.45 0.4",
            "high-pass filtered ImageNet images (8 filter widths)",
        ),
        _release(
            "low-pass",
            "lp",
            "0 1 3 5 7 10 15 40",
            None,
            "Filter standard deviation",
            "0 15 40",
            "low-pass filtered (blurred) ImageNet images (8 filter widths)",
        ),
        _release(
            "phase-scrambling",
            "ps",
            "0 30 60 90 120 150 180",
            None,
            "Phase noise width [degrees]",
            "0 150 180",
            "ImageNet images with phase noise of 0 to 180 degrees",
            images=1120,
        ),
        _release(
            "power-equalisation",
            "pow",
            "0 pow",
            "original equalised",
            "Power spectrum",
            "0",
            "ImageNet images with their own and with an equalised power spectrum",
            images=1120,
        ),
        _release(
            "false-colour",
            "fc",
            "True False",
            "true opponent",
            "Colour",
            "True",
            "ImageNet images in true and in opponent colours",
            images=1120,
        ),
        _release(
            "rotation",
            "rot",
            "0 90 180 270",
            None,
            "Rotation angle [degrees]",
            "0",
            "ImageNet images rotated by 0, 90, 180 and 270 degrees",
        ),
        _eidolon("eidolonI", 10, "1-10-10 64-10-10 128-10-10"),
        _eidolon("eidolonII", 3, "1-3-10 32-3-10 64-3-10 128-3-10"),
        _eidolon("eidolonIII", 0, "1-0-10 16-0-10 32-0-10 64-0-10 128-0-10"),
        _release(
            "uniform-noise",
            "nse",
            "0.0 0.03 0.05 0.1 0.2 0.35 0.6 0.9",
            "0.0 .03 .05 .1 .2 .35 .6 .9",
            "Uniform noise width",
            "0.0 0.6 0.9",
            "ImageNet images with additive uniform noise of 8 widths",
        ),
        _release(
            "sketch",
            "ske",
            "",
            None,
            "",
            "",
            "ImageNet-Sketch drawings, 50 per category",
            images=800,
            observers=7,
            license="MIT (ImageNet-Sketch)",
            terms="sketch is ImageNet-Sketch (Wang et al. 2019), "
            "licensed MIT by its authors (https://github.com/HaohanWang/ImageNet-Sketch/blob/master/LICENSE)",
        ),
        _release(
            "stylized", "sty", "", None, "", "", "Stylized-ImageNet images, 50 per category", images=800, observers=5
        ),
    )
}

#: Every experiment's name, cue-conflict, edges and filled silhouettes first (the command line's ``--dataset``).
DATASET_NAMES: tuple[str, ...] = tuple(EXPERIMENTS)
#: The 14 datasets whose human data model-vs-human added (the other three are texture-vs-shape's).
MODEL_VS_HUMAN_DATASETS: tuple[str, ...] = tuple(n for n, e in EXPERIMENTS.items() if e.humans == MODEL_VS_HUMAN)
#: model-vs-human's benchmark order (``constants.DEFAULT_DATASETS``), in modelval's names.
BENCHMARK_DATASETS: tuple[str, ...] = ("edges", "filled-silhouettes", "cue-conflict", *MODEL_VS_HUMAN_DATASETS)


def get_dataset(name: str) -> Experiment:
    """The entry of ``name`` (modelval's name); an unknown name is an error listing the known ones.

    Parameters
    ----------
    name
        One of :data:`DATASET_NAMES`.
    """
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; expected one of: {', '.join(EXPERIMENTS)}") from None


def list_datasets() -> list[Experiment]:
    """Every experiment's entry, in :data:`DATASET_NAMES`' order."""
    return list(EXPERIMENTS.values())


def experiment(dataset: str) -> Experiment:
    """The :class:`Experiment` of ``dataset``, modelval's or model-vs-human's name; a clear error otherwise.

    Parameters
    ----------
    dataset
        ``edges`` or ``edge``, ``filled-silhouettes`` or ``silhouette``, ...
    """
    found = [entry for entry in EXPERIMENTS.values() if entry.upstream == dataset]
    return found[0] if dataset not in EXPERIMENTS and found else get_dataset(dataset)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def canonical_condition(raw: str, dataset: str) -> str:
    """The condition of ``dataset`` that the raw value ``raw`` (from a CSV or an image name) stands for.

    A single-condition dataset has one answer whatever is written (model-vs-human writes ``NaN`` or ``0``
    there); otherwise the match is exact, then case-insensitive (``true`` -> ``True``), then numeric
    (``0.00`` -> ``0.0``, ``3`` -> ``3.0``), as model-vs-human's pandas reading makes it. Anything else is
    an error naming the dataset's conditions.

    Parameters
    ----------
    raw
        The condition as written.
    dataset
        The experiment.
    """
    entry = experiment(dataset)
    if not entry.parametric:
        return entry.conditions[0].value
    text, number = raw.strip(), _number(raw)
    exact = [v for v in entry.values if v == text]
    matches = exact or [v for v in entry.values if v.lower() == text.lower()]
    matches = matches or [v for v in entry.values if number is not None and _number(v) == number]
    if matches:
        return matches[0]
    raise DataError(
        f"condition {raw!r} is not one of the {dataset} conditions ({', '.join(entry.values)}, as model-vs-human "
        "names them)"
    )
