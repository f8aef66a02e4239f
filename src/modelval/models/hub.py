"""torch.hub loading (the facebookresearch/deit code path), isolated from the rest of the process.

``torch.hub.load`` imports the repository's ``hubconf.py`` and its modules. DeiT's ``models.py``
decorates its functions with timm's ``@register_model`` under the names timm itself uses
(``deit_tiny_patch16_224``...), which silently replaces timm's entry points for the whole process:
a later ``timm.create_model("deit_tiny_patch16_224.fb_in1k")`` would call DeiT's function instead.
It also leaves a top-level module named ``models`` in ``sys.modules``. Both are undone here.
"""

from __future__ import annotations

import copy
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads on first use: listing models or parsing specs stays light
    from torch import nn

from modelval.errors import DownloadError


def _timm_registry_state():
    try:
        from timm.models import _registry
    except ImportError:
        return None, {}
    names = [n for n, v in vars(_registry).items() if n.startswith("_") and isinstance(v, dict | set)]
    return _registry, {n: copy.deepcopy(getattr(_registry, n)) for n in names}


@contextmanager
def _isolated_hub_imports(hub_root: Path) -> Iterator[None]:
    """Restore timm's model registry and drop modules imported from under ``hub_root`` afterwards."""
    registry, saved = _timm_registry_state()
    modules_before = set(sys.modules)
    try:
        yield
    finally:
        for name, value in saved.items():
            current = getattr(registry, name)
            current.clear()  # in place: other modules hold references to these containers
            current.update(value)
        root = str(hub_root.resolve())
        for name in set(sys.modules) - modules_before:
            file = getattr(sys.modules[name], "__file__", None) or ""
            if file and str(Path(file).resolve()).startswith(root):
                del sys.modules[name]


def load_hub_model(repo_dir: Path, entrypoint: str, **kwargs: object) -> nn.Module:
    """``torch.hub.load(repo_dir, entrypoint, source="local", **kwargs)``: the hub code path, without network.

    Parameters
    ----------
    repo_dir
        The downloaded repository (its ``hubconf.py``).
    entrypoint
        The hub entry point.
    **kwargs
        Passed to the entry point (``pretrained=True``).
    """
    import torch

    with _isolated_hub_imports(repo_dir), warnings.catch_warnings():
        # timm warns that DeiT overwrites its registry entries; _isolated_hub_imports undoes that.
        warnings.filterwarnings("ignore", message="Overwriting .* in registry", category=UserWarning)
        return torch.hub.load(str(repo_dir), entrypoint, source="local", **kwargs)


def download_hub_code(github: str, *, force: bool = False) -> Path:
    """Download a hub repository's code into ``$TORCH_HOME/hub`` (what ``torch.hub.load`` does first).

    Parameters
    ----------
    github
        ``owner/repo:ref``.
    force
        Download again even when it is there.
    """
    import torch

    hub_root = Path(torch.hub.get_dir())
    try:
        with _isolated_hub_imports(hub_root):
            # torch.hub.list is the public call that caches the repository without building a model.
            torch.hub.list(github, force_reload=force, trust_repo=True)
    except (OSError, RuntimeError, ValueError) as error:  # urllib's URLError/HTTPError are OSErrors
        raise DownloadError(f"could not download the torch.hub code of {github}: {error}") from None
    except ImportError as error:
        # Downloaded, but its hubconf.py does not import with the installed timm/torch versions.
        raise DownloadError(
            f"the torch.hub code of {github} was downloaded to {hub_root} but does not import here: {error}"
        ) from None
    owner, rest = github.split("/", 1)
    name, _, ref = rest.partition(":")
    return hub_root / f"{owner}_{name}_{(ref or 'main').replace('/', '_')}"
