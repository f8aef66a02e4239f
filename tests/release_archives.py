"""Archives in model-vs-human's release layout, built by the tests (the real stimuli are not redistributed).

``<dataset>.tar.gz`` holds ``<dataset>/dnn/session-1/<trial>_<code>_dnn_<condition>_<category>_<n>_<image>.png``,
the names model-vs-human's release uses: here those of a human session file with the observer field set to
``dnn`` (the trial numbers differ from the release's; the short image names, conditions and categories are
the human data's, so the decisions of a model evaluated on the archive match the human observers).
"""

from __future__ import annotations

import csv
import io
import tarfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from PIL import Image


def release_names(raw_data: Path, dataset: str) -> list[tuple[str, str]]:
    """``(release file name, category)`` of every image of ``dataset``, from its first human session file."""
    path = sorted((raw_data / dataset).glob(f"{dataset}_subject-01_*.csv"))[0]
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    names = []
    for row in rows:
        parts = row["imagename"].split("_")
        parts[2] = "dnn"
        names.append(("_".join(parts), row["category"]))
    return names


@lru_cache(maxsize=512)  # archives repeat colours 1,280 times: encode each once
def plain_png(colour: tuple[int, int, int] = (120, 90, 60)) -> bytes:
    """A 224x224 PNG of one colour (a few hundred bytes)."""
    buffer = io.BytesIO()
    Image.new("RGB", (224, 224), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def build_release_archive(
    path: Path,
    dataset: str,
    names: list[tuple[str, str]],
    image: Callable[[int, str], bytes],
    *,
    prefix: str | None = None,
) -> Path:
    """Write ``path`` (tar.gz) with ``image(index, category)`` as the bytes of each named file."""
    folder = prefix if prefix is not None else f"{dataset}/dnn/session-1"
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for index, (name, category) in enumerate(names):
            data = image(index, category)
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
