"""Downloading one project's W&B prediction artifacts (the ``preds-<event>-lb<k>-set<j>-seed<s>-vNNN`` folders
whose ECE :mod:`modelval.metrics.artifacts` computes). wandb is imported only here, on first use."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from modelval.errors import DownloadError


def download_wandb_predictions(
    runs: Iterable[Any] | str, root: str | Path, *, api: Any = None, prefix: str = "preds", offline: bool | None = None
) -> list[Path]:
    """Download a run's logged artifacts whose name starts with ``prefix`` into ``root``; the folders written.

    Each artifact ``preds-...:vN`` lands in ``root/preds-...-vNNN`` (version zero-padded to 3 digits), the
    folder :func:`modelval.metrics.artifacts.ece_of_artifacts` reads; an existing folder is never overwritten.
    Offline (``$MODELVAL_OFFLINE`` or ``$HF_HUB_OFFLINE`` set, or ``offline=True``) nothing is downloaded.

    Parameters
    ----------
    runs
        A run path ``"entity/project/run_id"``, or run objects (anything with ``logged_artifacts()``).
    root
        The folder the artifacts land in.
    api
        The W&B API (default ``wandb.Api()``; tests inject a fake).
    prefix
        The start of the artifact names downloaded.
    offline
        Download nothing (``None``: as the environment says).
    """
    from modelval.download import resolve_offline

    if resolve_offline(offline):
        raise DownloadError(f"this run is offline (MODELVAL_OFFLINE or HF_HUB_OFFLINE): not downloading {runs!r}")
    if api is None:
        from modelval.extras import require

        wandb = require("wandb", extra="wandb", purpose="downloading from Weights & Biases")
        api = wandb.Api()
    selected: Iterable[Any] = [api.run(runs)] if isinstance(runs, str) else runs
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for run in selected:
        for artifact in run.logged_artifacts():
            name, _, version = str(artifact.name).partition(":")
            if not name.startswith(prefix):
                continue
            version = version or str(getattr(artifact, "version", "v0"))
            number = int(version.lstrip("v")) if version.lstrip("v").isdigit() else 0
            target = root / f"{name}-v{number:03d}"
            if target.exists():
                continue
            artifact.download(root=str(target))
            written.append(target)
    return written
