"""The docs tell the truth: the site builds strictly, the README stays a front door, and every
command option, module path and test file they name exists.

`mkdocs build --strict` fails on a broken link or an API page (mkdocstrings) that names a module or
function that no longer exists; the checks below catch renamed CLI options and moved modules in
the prose and code blocks, which mkdocs cannot see.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from modelval.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README_VALIDATION_TEST.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
MODULE_PATH = re.compile(r"\bmodelval(?:\.(?!toml\b)[A-Za-z_][A-Za-z0-9_]*)+")  # modelval.toml is a file
TEST_PATH = re.compile(r"\btests/[\w/]+\.py\b")


def documents() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def build_site(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", **_path_env()},
    )


def _path_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items()}


def test_mkdocs_builds_strictly(tmp_path):
    result = build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "metrics" / "index.html").read_text()
    assert "expected_calibration_error" in api  # the API pages really render the docstrings


def test_mkdocs_strict_fails_on_a_renamed_function(tmp_path):
    """The build is a real check: an API page naming a function that does not exist breaks it."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "src").symlink_to(ROOT / "src")
    page = tmp_path / "docs" / "api" / "metrics.md"
    page.write_text(page.read_text() + "\n::: modelval.metrics.calibration.no_such_function\n")
    result = build_site(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0


def test_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README has {len(lines)} lines; move reference material to docs/"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its nested sub-commands."""
    found = {s for action in parser._actions for s in action.option_strings}
    for child in _subcommands(parser).values():
        found |= _options(child)
    return found


def command_lines(text: str) -> list[str]:
    """Each ``modelval ...`` invocation in the fenced code blocks, continuation lines joined."""
    commands: list[str] = []
    for block in FENCE.findall(text):
        current: int | None = None  # index of the invocation that continuation lines extend
        for raw in block.splitlines():
            line = raw.split("#", 1)[0].rstrip().removesuffix("\\").rstrip()
            stripped = line.lstrip()
            for prefix in (".venv/bin/modelval ", "modelval "):
                if stripped.startswith(prefix):
                    commands.append(stripped[len(prefix) - len("modelval ") :])
                    current = len(commands) - 1
                    break
            else:
                if current is not None and raw.startswith(" ") and stripped.startswith(("[", "--")):
                    commands[current] += " " + stripped
                else:
                    current = None
    return commands


def unknown_options(text: str) -> list[str]:
    parser = build_parser()
    commands = _subcommands(parser)
    problems = []
    for line in command_lines(text):
        words = re.split(r"[\s|\[\]]+", line)
        named = [w for w in words[1:] if w in commands]
        if not named:
            problems.append(f"{line!r}: no known command")
            continue
        allowed = set().union(*(_options(commands[name]) for name in named))
        problems += [f"{line!r}: {option}" for option in OPTION.findall(line) if option not in allowed]
    return problems


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.name)
def test_documented_command_options_exist(document):
    assert not unknown_options(document.read_text())


def test_option_check_can_fail():
    text = "```bash\nmodelval shape-bias --model x --no-such-option\nmodelval no-such-command\n```\n"
    assert len(unknown_options(text)) == 2


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        try:
            for attribute in parts[cut:]:
                target = getattr(target, attribute)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.name)
def test_documented_module_paths_exist(document):
    text = document.read_text()
    missing = sorted({m for m in MODULE_PATH.findall(text) if not _resolves(m.rstrip("."))})
    assert not missing, f"{document.name} names modules or attributes that do not exist: {missing}"


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.name)
def test_documented_test_files_exist(document):
    missing = sorted({p for p in TEST_PATH.findall(document.read_text()) if not (ROOT / p).is_file()})
    assert not missing, f"{document.name} names test files that do not exist: {missing}"


def test_module_path_check_can_fail():
    assert not _resolves("modelval.stimuli")  # the flat module of before the wings (now modelval.datasets.stimuli)
    assert _resolves("modelval.datasets.stimuli.discover_stimuli")


def test_the_lite_normalization_is_stated_as_the_code_does_it():
    """Issue 19: the code feeds mean = std = 0.5 on [0, 1], i.e. (x - 127.5) / 127.5, not (x - 127) / 128."""
    from modelval.models.efficientnet import LITE0_PREPROCESS

    assert LITE0_PREPROCESS.mean == (0.5, 0.5, 0.5) and LITE0_PREPROCESS.std == (0.5, 0.5, 0.5)
    claim = re.compile(r"\(x\s*[-−]\s*127\)\s*/\s*128\s*,?\s*i\.e\.\s*mean\s*=\s*std\s*=\s*0\.5")
    for path in documents():
        text = " ".join(path.read_text().split())
        assert not claim.search(text), f"{path.name} says (x - 127)/128 is mean = std = 0.5"
    assert "(x − 127.5) / 127.5" in (DOCS / "method.md").read_text()


# --- the ```python blocks of the README and docs/python.md run as written (issue 32) ---------------------------

PYTHON_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
#: ``print(x)  # -> 0.2394``: what the line prints, exactly; a block's printed lines must be these, in order.
OUTPUT_MARK = re.compile(r"#\s*->\s?(.*)$")
#: ``# docs-test: skip <reason>`` in a block: not run (it needs the network or weights), and the reason is shown.
SKIP_MARK = re.compile(r"#\s*docs-test:\s*skip\s+(.+)$", re.M)
RUNNABLE = [README, DOCS / "python.md"]


def python_blocks(text: str) -> list[str]:
    return PYTHON_FENCE.findall(text)


def expected_output(block: str) -> list[str]:
    """The ``# -> ...`` outputs of a block, in order."""
    return [match.group(1).rstrip() for line in block.splitlines() if (match := OUTPUT_MARK.search(line))]


def run_blocks(blocks: list[str]) -> list[str]:
    """Run the blocks in one namespace, in order (as a reader would in one session); the problems found."""
    import contextlib
    import io

    namespace: dict[str, object] = {"__name__": "__docs__"}
    problems = []
    for number, block in enumerate(blocks, 1):
        if SKIP_MARK.search(block):
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block, f"<block {number}>", "exec"), namespace)  # the docs' own code
        lines = printed.getvalue().splitlines()
        if lines != expected_output(block):
            problems.append(f"block {number} printed {lines}, the doc shows {expected_output(block)}")
    return problems


def test_every_python_block_states_what_it_prints():
    """A ``print`` whose output the doc does not show is a stale output waiting to happen."""
    for document in RUNNABLE:
        for block in python_blocks(document.read_text()):
            prints = sum("print(" in line for line in block.splitlines())
            assert prints == len(expected_output(block)), f"{document.name}: a print without '# -> output'"
            assert "STIMULI" not in block or "STIMULI =" in document.read_text(), f"{document.name}: STIMULI"


def test_the_block_runner_fails_on_a_stale_output_and_a_missing_name():
    good = "x = 2\nprint(x * 3)   # -> 6\n"
    assert run_blocks([good]) == []
    assert run_blocks(["print(0.2394)  # -> 0.2393\n"]) == ["block 1 printed ['0.2394'], the doc shows ['0.2393']"]
    with pytest.raises(NameError, match="STIMULI"):
        run_blocks(["import modelval\nmodelval.shape_bias('efficientnet_lite0', data_root=STIMULI)\n"])
    assert run_blocks(["# docs-test: skip needs the network\nraise SystemExit\n"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("document", RUNNABLE, ids=lambda p: p.name)
def test_python_blocks_run_as_written(document, modelval_data_root, monkeypatch, tmp_path, session_caches):
    """Every ```python block of the README and docs/python.md, as written, with the data located the way the docs
    say: one data home ($MODELVAL_DATA_HOME, docs/data.md) holding the stimuli, the other sets and the human
    data, and no other data setting; the outputs they show are compared with what they print."""
    blocks = python_blocks(document.read_text())
    assert blocks, f"{document.name} has no python block"
    home = Path(modelval_data_root).parent
    if 'dataset="edges"' in document.read_text() and not (home / "edges").is_dir():
        pytest.skip(f"{document.name} evaluates the edges set, which is not beside the stimuli ({home})")
    if not (home / "reference" / "raw-data").is_dir() or Path(modelval_data_root).name != "cue-conflict":
        pytest.skip(f"the stimuli {modelval_data_root} are not in a data home laid out as docs/data.md shows")
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(home))
    # the session's output and decode caches (never the user's): the pages evaluate the bundled model seven times, as
    # the docstring examples and the front door's tests do (session_caches)
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        if (skipped := SKIP_MARK.search(block)) is not None:
            print(f"{document.name}: block skipped: {skipped.group(1)}")
    assert run_blocks(blocks) == []


def test_the_docs_build_is_named_where_serving_is():
    """mkdocs comes with the test extra: a page that says `mkdocs serve` names `make docs`, which installs it."""
    assert "`make docs`" in README.read_text()
    for document in documents():
        text = document.read_text()
        assert "mkdocs serve" not in text or "make docs" in text, document.name


RUN_ID = re.compile(r"\bruns (?:diff|show) \d+")


def test_a_run_id_in_an_example_comes_from_runs_list():
    """`runs diff 42` works only where run 42 exists: a block that uses a literal id lists the runs first."""
    for document in documents():
        for block in FENCE.findall(document.read_text()):
            for match in RUN_ID.finditer(block):
                assert "runs list" in block[: match.start()], f"{document.name}: {match.group(0)} without runs list"


# --- docs/settings.md: the table of every setting, generated from the declarations (issue 39) ---------------------

SETTINGS_PAGE = DOCS / "settings.md"
ZOO_PAGE = DOCS / "zoo.md"
#: The marks around a generated table in a page: the test finds the table between them and compares it.
GENERATED_START = "<!-- generated by `python tests/test_docs.py {what}` from modelval.settings: do not edit -->"
GENERATED_END = "<!-- end of the generated table -->"


def _cell(text: str) -> str:
    """A table cell's text: a ``|`` escaped, and ``<data home>`` kept from reading as an HTML tag."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def _default(declared) -> str:
    from modelval.settings import size

    value = declared.default
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if declared.parse is size:
        for unit in "TGMK":
            scale = 1024 ** " KMGT".index(unit)
            if value % scale == 0:
                return f"`{value // scale}{unit}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _flags_offered() -> set[str]:
    """Every option some command of the real parser offers (a declared flag no command takes is no flag)."""
    from modelval.cli import walk_commands

    parsers = [parser for _, parser in walk_commands(build_parser())]
    return {s for parser in parsers for action in parser._actions for s in action.option_strings}


def settings_table() -> str:
    """The Markdown table of every setting of :data:`modelval.settings.SETTINGS`, in declaration order."""
    from modelval.settings import SETTINGS

    offered = _flags_offered()
    yes_no = {True: "yes", False: "no"}
    lines = [
        "| setting | flag | variable | pytest option (ini key) | config key | models-file key | default | what it is |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, declared in SETTINGS.items():
        flag = f"`{declared.option}`" if declared.option in offered else "—"
        variable = f"`{declared.env}`" if declared.env else "—"
        plugin = f"`{declared.plugin_option}` (`{declared.ini}`)" if declared.plugin else "—"
        what = declared.help + (f"; one of {', '.join(declared.choices)}" if declared.choices else "")
        cells = [f"`{name}`", flag, variable, plugin, yes_no[declared.config], yes_no[declared.models_file],
                 _default(declared), _cell(what)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plugin_table() -> str:
    """The Markdown table of the pytest plugin's options (docs/zoo.md), from the same declarations."""
    from modelval.pytest_plugin.settings import SETTINGS as PLUGIN_SETTINGS

    lines = ["| option | ini key | variable | default | meaning |", "|---|---|---|---|---|"]
    for declared in PLUGIN_SETTINGS:
        metavar = declared.metavar or declared.name.upper()
        option = declared.plugin_option if declared.is_flag else f"{declared.plugin_option}={metavar}"
        variable = f"`{declared.env}`" if declared.env else "—"
        what = declared.help + (f"; one of {', '.join(declared.choices)}" if declared.choices else "")
        cells = [f"`{option}`", f"`{declared.ini}`", variable, _default(declared), _cell(what)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


GENERATED = {"settings": (SETTINGS_PAGE, settings_table), "plugin": (ZOO_PAGE, plugin_table)}


def generated_block(what: str) -> str:
    """A generated table with its marks, as a page holds it."""
    return f"{GENERATED_START.format(what=what)}\n\n{GENERATED[what][1]()}\n\n{GENERATED_END}"


@pytest.mark.parametrize("what", sorted(GENERATED))
def test_a_generated_table_is_the_declarations(what):
    """docs/settings.md's table of every setting and docs/zoo.md's of the plugin's options are the declarations of
    modelval.settings, verbatim: a setting added, renamed or given another flag, variable or default changes them
    (regenerate with `python tests/test_docs.py settings` or `plugin` and paste)."""
    page, _ = GENERATED[what]
    assert generated_block(what) in page.read_text(), (
        f"{page.name}: the table differs from modelval.settings; paste the output of `python tests/test_docs.py {what}`"
    )


def test_the_settings_table_names_every_setting_and_variable():
    from modelval.settings import SETTINGS, variables

    table = settings_table()
    assert all(f"| `{name}` |" in table for name in SETTINGS)
    assert all(f"`{env}`" in table for env in variables())
    assert len(variables()) <= 15  # the issue-39 ceiling; docs/settings.md lists them


def test_the_settings_pages_config_files_are_valid(tmp_path):
    """Each ```toml block of docs/settings.md with a [settings] table is read by modelval's own reader."""
    from modelval.settings import config_settings

    blocks = re.findall(r"^```toml\n(.*?)^```", SETTINGS_PAGE.read_text(), re.M | re.S)
    checked = 0
    for number, block in enumerate(blocks):
        if "settings]" not in block:
            continue
        name = "pyproject.toml" if "[tool.modelval" in block else "modelval.toml"
        folder = tmp_path / str(number)
        folder.mkdir()
        (folder / name).write_text(block)
        assert config_settings(folder / name), f"block {number}: no setting read"
        checked += 1
    assert checked >= 2  # the modelval.toml example and the pyproject.toml one


REMOVED_VARIABLES = (
    "MODELVAL_DATA_ROOT", "MODELVAL_REFERENCE_DIR", "MODELVAL_MODEL_VS_HUMAN_DIR", "MODELVAL_NO_STIMULUS_CACHE",
    "MODELVAL_NO_OUTPUT_CACHE", "MODELVAL_OUTPUT_CACHE", "MODELVAL_OUTPUT_CACHE_SIZE", "MODELVAL_DATA_MIRROR",
    "MODELVAL_WEIGHTS_MIRROR", "MODELVAL_RAY_CONNECT_TIMEOUT", "MODELVAL_SUBMITIT_FOLDER", "MODELVAL_SUBMITIT_CLUSTER",
    "MODELVAL_SLURM", "MODELVAL_EXECUTOR", "MODELVAL_MODELS_FILE",
)  # fmt: skip
#: Pages that may name a removed variable: where it is said to be gone.
REMOVED_NAMED_IN = ("settings.md", "data.md")


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.name)
def test_no_page_sets_a_removed_variable(document):
    """A variable of before issue 39 appears only where a page says it is gone (settings.md, data.md)."""
    if document.name in REMOVED_NAMED_IN or document.name == "architecture.md":
        return
    text = document.read_text()
    named = sorted({v for v in REMOVED_VARIABLES if re.search(rf"\b{v}\b", text)})
    assert not named, f"{document.name} names variables that are gone: {named}"


if __name__ == "__main__":  # python tests/test_docs.py settings|plugin: the table to paste into the page
    print(generated_block(sys.argv[1] if len(sys.argv) > 1 else "settings"))


# --- docs/cli.md: every command, and every option of each, as the parser has them (issue 39) ----------------------


def documented_commands(text: str) -> dict[tuple[str, ...], set[str]]:
    """The options each command path (``("data", "download")``) is shown with, over every invocation of ``text``."""
    shown: dict[tuple[str, ...], set[str]] = {}
    parser = build_parser()
    for line in command_lines(text):
        node, path = parser, list[str]()
        for word in line.split()[1:]:
            children = _subcommands(node)
            if word not in children:
                break
            node, path = children[word], [*path, word]
        shown.setdefault(tuple(path), set()).update(OPTION.findall(line))
    return shown


def test_the_command_line_page_shows_every_command_with_every_option():
    """docs/cli.md is the full reference: each command and action of `modelval --help`, with each of its options."""
    from modelval.cli import walk_commands

    shown = documented_commands((DOCS / "cli.md").read_text())
    missing = []
    for path, parser in walk_commands(build_parser()):
        if not path or _subcommands(parser):
            continue
        options = {a.option_strings[-1] for a in parser._actions if a.option_strings} - {"--help", "--debug"}
        if path not in shown:
            missing.append(f"modelval {' '.join(path)}: not shown")
        elif options - shown[path]:
            missing.append(f"modelval {' '.join(path)}: {sorted(options - shown[path])}")
    assert not missing, missing


def test_a_group_command_names_its_action():
    """`modelval calibration FILE` (the card before issue 39) or a bare `modelval models` is no command now."""
    problems = []
    for document in documents():
        for line in command_lines(document.read_text()):
            shown = documented_commands(f"```\n{line}\n```\n")
            (path,) = shown
            node = build_parser()
            for word in path:
                node = _subcommands(node)[word]
            if path and _subcommands(node) and not {"-h", "--help"} & set(line.split()):
                problems.append(f"{document.name}: {line!r} names no action of `modelval {' '.join(path)}`")
    assert not problems, problems


def test_the_command_checks_can_fail():
    """A command shown without an action, and an action shown without one of its options, are found."""
    shown = documented_commands("```\nmodelval calibration x.npz --json\nmodelval data download --force\n```\n")
    assert shown == {("calibration",): {"--json"}, ("data", "download"): {"--force"}}


def test_every_module_below_the_shells_has_an_api_page():
    """Each public module of the package (the command line's are its --help) is on a page of docs/api/: a module
    split or added in a wing is documented where its wing is."""
    import pkgutil

    import modelval

    listed = set(re.findall(r"^::: (\S+)", "".join(p.read_text() for p in (DOCS / "api").glob("*.md")), re.M))
    missing = [
        info.name
        for info in pkgutil.walk_packages(modelval.__path__, "modelval.")
        if not info.ispkg and not any(part.startswith("_") for part in info.name.split("."))
        and not info.name.startswith("modelval.cli.") and info.name not in listed
    ]
    assert not missing, f"not on any page of docs/api/: {missing}"
