"""The layout is the architecture: imports between the wings flow one way, downward.

    shells (cli, runner, pytest_plugin) -> api -> judgement -> evaluation -> datasets -> records
        -> behaviour / models / metrics -> ground
    figures and contrib stand beside judgement: below the front door, above the wings they draw or read.

The shells are clients of the front door: a shell never loads a model or runs a forward pass itself (no
shell imports the loader or the forward path: :data:`PIPELINE_NAMES`), so the runner, the plugin and every
command reach a model only through ``modelval.api``. The test reads every module's imports (``import``
statements anywhere in the file, including the lazy ones inside functions and those under ``TYPE_CHECKING``)
with :mod:`ast`, so a forbidden edge fails here the day it is written.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "modelval"

#: The ground: small modules every wing may use.
GROUND = {
    "download", "preprocessing", "errors", "extras", "lazy", "paths", "runtime", "jsonio", "proportions", "atomic",
    "settings", "parsing", "csvio",
}  # fmt: skip
SHELLS = {"cli", "runner", "pytest_plugin"}
#: From the top down (a wing may import the wings listed after it in ALLOWED, never one above it).
WINGS = [
    "cli", "pytest_plugin", "runner", "api", "judgement", "figures", "contrib", "evaluation", "datasets", "records",
    "behaviour", "models", "metrics",
]  # fmt: skip

BELOW_API = {"judgement", "figures", "contrib", "evaluation", "datasets", "records", "behaviour", "models", "metrics"}
#: wing -> the wings (besides itself and the ground) that it may import
ALLOWED: dict[str, set[str]] = {
    # The shells: argparse / pytest / the validation matrix above the front door. The command line drives the
    # runner (`modelval validate`), the plugin drives the runner; none of them runs a forward pass itself.
    "cli": {"runner", "api"} | BELOW_API,
    "pytest_plugin": {"runner", "api"} | BELOW_API,
    "runner": {"api"} | BELOW_API,
    # The front door: one pipeline from a model (or a decision file) to a typed result. One project's
    # conventions (contrib) are the command line's to call, never the door's.
    "api": BELOW_API - {"contrib"},
    # What a number means against the published one; may run the sanity probe's forward.
    "judgement": {"evaluation", "datasets", "records", "behaviour", "models"},
    # Figures draw the behaviour and metrics wings' results; contrib downloads one project's prediction files.
    "figures": {"behaviour", "metrics"},
    "contrib": {"metrics"},
    "evaluation": {"datasets", "records", "behaviour", "models"},
    # A dataset's labels are the 16 categories, so datasets read the behaviour wing's category
    # names and stimulus grammar; behaviour never reads a folder.
    "datasets": {"records", "behaviour"},
    "records": set(),
    "behaviour": set(),
    "models": set(),
    "metrics": set(),
    "ground": set(),
    "package": set(WINGS),  # modelval/__init__.py re-exports lazily; __main__ calls the cli
}
#: Single modules a wing may not import although their wing is allowed.
FORBIDDEN_MODULES: dict[str, set[str]] = {
    "cli": {"modelval.models.loader", "modelval.evaluation.forward"},
    "pytest_plugin": {"modelval.models.loader", "modelval.evaluation.forward"},
    "runner": {"modelval.models.loader", "modelval.evaluation.forward"},
}
#: What loads a model or runs a forward pass: the front door's job (``api.run_model``), never a shell's.
PIPELINE_NAMES = frozenset({
    "load_model", "load_entry", "evaluate", "model_outputs", "category_probabilities",
    "category_probabilities_by_aggregation", "probe_sanity", "sensitivity_card",
})  # fmt: skip


def wing_of(module: str) -> str:
    """``modelval.metrics.calibration`` -> ``metrics``; the ground is one wing, ``ground``."""
    parts = module.split(".")
    if parts == ["modelval"] or parts[1:] == ["__main__"]:
        return "package"
    head = parts[1]
    if head in GROUND:
        return "ground"
    if head in WINGS:
        return head
    raise AssertionError(f"{module}: not in any wing; add it to a wing or to the ground in tests/test_layout.py")


def is_module(name: str) -> bool:
    return (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name / "__init__.py").is_file()


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            # `from modelval import models` imports the submodule `modelval.models`
            if target == "modelval":
                found.update(f"modelval.{alias.name}" for alias in node.names if is_module(alias.name))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return {name for name in found if name == "modelval" or name.startswith("modelval.")}


def all_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def forbidden_imports() -> list[str]:
    problems = []
    for path in all_modules():
        module = module_name(path)
        source = wing_of(module)
        for target in sorted(imported_modules(path, module)):
            if target == "modelval":
                continue  # the package's own lazy re-exports; only `__version__` and errors are eager
            destination = wing_of(target)
            forbidden = any(target == n or target.startswith(n + ".") for n in FORBIDDEN_MODULES.get(source, ()))
            if (destination in (source, "ground") or destination in ALLOWED[source]) and not forbidden:
                continue
            problems.append(f"{module} ({source}) imports {target} ({destination})")
    return problems


def test_every_module_belongs_to_a_wing():
    for path in all_modules():
        wing_of(module_name(path))


def test_imports_flow_downward():
    problems = forbidden_imports()
    assert not problems, "imports against the layout (see docs/architecture.md):\n" + "\n".join(problems)


def pipeline_names_imported(source: str, where: str) -> list[str]:
    """Each import of a :data:`PIPELINE_NAMES` name from a modelval module in ``source``."""
    problems = []
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("modelval"):
            problems += [f"{where}:{node.lineno} imports {alias.name} from {node.module}"
                         for alias in node.names if alias.name in PIPELINE_NAMES]  # fmt: skip
    return problems


def test_shells_reach_models_only_through_the_front_door():
    problems = [
        problem
        for path in all_modules()
        if wing_of(module_name(path)) in SHELLS
        for problem in pipeline_names_imported(path.read_text(), module_name(path))
    ]
    assert not problems, "a shell loads or runs a model itself (use modelval.api.run_model):\n" + "\n".join(problems)


def test_the_front_door_rule_can_fail():
    """The check sees an import of the loader by name, as the runner had (`from modelval.models import load_model`)."""
    planted = "def f():\n    from modelval.models import load_model\n    from modelval.evaluation import evaluate\n"
    assert len(pipeline_names_imported(planted, "modelval.runner.planted")) == 2


def test_metrics_wing_stands_alone():
    for path in (PACKAGE / "metrics").rglob("*.py"):
        module = module_name(path)
        for target in imported_modules(path, module):
            if target != "modelval":
                assert wing_of(target) in ("metrics", "ground"), f"{module} imports {target}"


def test_no_import_cycles_between_modules():
    graph = {module_name(p): imported_modules(p, module_name(p)) for p in all_modules()}
    modules = set(graph)
    # Only top-level imports make a cycle at import time; a cycle through function-level imports is
    # still a design smell, so every edge counts.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in modules or target == node or target == "modelval":
                continue
            if node.startswith(target + ".") or (target.count(".") < node.count(".") and node.startswith(target)):
                continue  # a module importing its own package's __init__ re-exports
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(modules):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        ("modelval.metrics.calibration", "modelval.models.registry", False),
        ("modelval.behaviour.decisions", "modelval.datasets.stimuli", False),
        ("modelval.datasets.stimuli", "modelval.behaviour.categories", True),
        ("modelval.evaluation", "modelval.runner.matrix", False),
        ("modelval.cli.metrics", "modelval.metrics.calibration", True),
        ("modelval.api.calibration", "modelval.contrib.wandb_artifacts", False),
        ("modelval.cli.metrics", "modelval.contrib.wandb_artifacts", True),
        ("modelval.models.registry", "modelval.runtime", True),
    ],
)
def test_the_rule_itself(source, target, allowed):
    """The checker would catch the edges the issue names (e.g. metrics importing models)."""
    src, dst = wing_of(source), wing_of(target)
    assert (dst in (src, "ground") or dst in ALLOWED[src]) is allowed


def test_the_wings_are_ordered():
    """ALLOWED never points up the list: the order in WINGS is the order of the house."""
    for wing, allowed in ALLOWED.items():
        if wing in ("package", "ground"):
            continue
        above = set(WINGS[: WINGS.index(wing)])
        assert not allowed & above, f"{wing} may import {allowed & above}, which stand above it"


def test_no_module_is_left_in_a_wing_that_is_gone():
    assert not (PACKAGE / "validation").exists(), "modelval.validation was split by kind (docs/architecture.md)"
