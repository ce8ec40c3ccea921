"""The package's shape: imports run one way (import-linter's contract in pyproject.toml), no module imports
itself back through others (imports inside functions included), stages are subpackages, and each says
what it is in one line. Reads source only: no TensorFlow, a second or two."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reporter"
# The entry points (command line, Python API) and their composition root (the built-in plug-ins registered).
TOP_LEVEL_FILES = {"__init__.py", "__main__.py", "cli.py", "api.py", "plugins.py", "testing.py"}


def test_import_linter_contract_is_kept():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    assert Path(exe).exists(), "lint-imports is not installed (pip install -e '.[test]')"
    # --no-cache: judge the files as they are now, and write no cache folder into the repository
    run = subprocess.run([exe, "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Stages import downwards only KEPT" in out, out
    assert "0 broken" in out, out


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative: the strongly connected components of `graph`."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _import_graph() -> dict[str, set[str]]:
    import grimp

    # grimp reads every import statement, those inside functions and under TYPE_CHECKING included.
    graph = grimp.build_graph("reporter", cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_the_cycle_finder_finds_cycles():
    """The check below would pass on any graph if the finder found nothing: it finds a planted cycle."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(sorted(c) for c in _strongly_connected(graph) if len(c) > 1) == [["a", "b", "c"]]


def test_no_import_cycle_between_reporters_modules():
    graph = _import_graph()
    assert {"reporter.cli", "reporter.pipeline.stages", "reporter.core.judgement"} <= set(graph)
    assert sum(len(targets) for targets in graph.values()) > 50  # the graph was really read
    # An import inside a function is an edge too: the CLI imports the API, and the API the pipeline, only inside
    # functions (bad input fails before TensorFlow loads), and those imports must be in the graph.
    assert "reporter.api" in graph["reporter.cli"] and "reporter.pipeline.stages" in graph["reporter.api"]
    cycles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_top_level_holds_only_subpackages_and_the_entry_points():
    entries = [p for p in PACKAGE.iterdir() if p.name != "__pycache__"]
    files = {p.name for p in entries if p.is_file()}
    assert files == TOP_LEVEL_FILES, f"move {sorted(files - TOP_LEVEL_FILES)} into a stage's subpackage"
    folders = [p for p in entries if p.is_dir()]
    assert len(folders) >= 10
    for folder in folders:
        assert (folder / "__init__.py").is_file(), f"{folder.name}/ is not a subpackage (no __init__.py)"


@pytest.mark.parametrize("init", sorted(PACKAGE.glob("*/__init__.py")), ids=lambda p: p.parent.name)
def test_every_subpackage_opens_with_a_one_line_docstring(init):
    source = init.read_text(encoding="utf-8")
    module = ast.parse(source)
    docstring = ast.get_docstring(module, clean=False)
    assert docstring, f"{init.relative_to(ROOT)} has no docstring"
    assert isinstance(module.body[0], ast.Expr) and module.body[0].lineno == 1, "the docstring comes first"
    assert "\n" not in docstring.strip(), f"{init.relative_to(ROOT)}: the docstring is more than one line"
    assert source.startswith('"""') and source.splitlines()[0].endswith('"""'), "one line, opened and closed"
    assert len(docstring.split()) >= 3, docstring  # says what the stage is, not just its name


def _findings_functions() -> set[tuple[str, str]]:
    """(module, name) of every function reporter.findings defines at module level: what decides."""
    found = set()
    for path in (PACKAGE / "findings").glob("*.py"):
        module = f"reporter.findings.{path.stem}"
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                found.add((module, node.name))
    return found


def test_render_reads_decisions_and_calls_no_deciding_function():
    """reporter.render words and lays out what reporter.findings decided: no module under render/ calls a function
    of reporter.findings (decide, judge, compare, the gate, the diff ...), whether imported by name or through its
    module. Records and constants may be read."""
    deciding = _findings_functions()
    calls = []
    for path in sorted((PACKAGE / "render").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names, modules = {}, {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reporter.findings"):
                for alias in node.names:
                    if (node.module, alias.name) in deciding:
                        names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    elif node.module == "reporter.findings":
                        modules[alias.asname or alias.name] = f"reporter.findings.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("reporter.findings.") and alias.asname:
                        modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in names:
                calls.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {names[f.id]}")
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules \
                    and (modules[f.value.id], f.attr) in deciding:
                calls.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {modules[f.value.id]}.{f.attr}")
    assert deciding and not calls, calls


def _constant(path: Path, name: str):
    """A module-level constant of the module at `path`, read from its source (a literal)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.relative_to(ROOT)} defines no {name}")


def _used_names(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """(line, name) of every name of `module` a module's syntax tree uses: imported by name (`from module import
    name`, inside functions too), or read through the module (`from package import module as m` or `import module
    as m`, then `m.name`)."""
    package, _, leaf = module.rpartition(".")
    aliases, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == package:
            aliases |= {alias.asname or alias.name for alias in node.names if alias.name == leaf}
        elif isinstance(node, ast.Import):
            aliases |= {alias.asname for alias in node.names if alias.name == module and alias.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found.append((node.lineno, node.attr))
    return found


def test_the_name_finder_finds_names_however_imported():
    """The checks below would pass if the finder saw nothing: it sees each way a module's names are read."""
    tree = ast.parse("from a.b import c\nfrom a.b.c import d, E\nimport a.b.c as k\n"
                     "def f():\n    from a.b import c as j\n    return c.g(), j.h, k.i\n")
    assert sorted(_used_names(tree, "a.b.c")) == [(2, "E"), (2, "d"), (6, "g"), (6, "h"), (6, "i")]


JUDGEMENT = "reporter.core.judgement"


def test_render_reads_only_the_judgements_constants():
    """reporter.render draws and words what reporter.findings decided: of reporter.core.judgement it reads the
    thresholds (UPPER_CASE constants, for the legend and the sentences that state them), never a function (a
    predicate, a step, a test): a yes/no a view shows is a field of a findings record."""
    used, functions = [], []
    for path in sorted((PACKAGE / "render").rglob("*.py")):
        for line, name in _used_names(ast.parse(path.read_text(encoding="utf-8")), JUDGEMENT):
            used.append(name)
            if not name.isupper():
                functions.append(f"{path.relative_to(PACKAGE)}:{line} {name}")
    assert "ALPHA" in used  # the constants are found: the check reads render's imports
    assert not functions, functions


def _deciding() -> set[tuple[str, str]]:
    """What decides: every public function of reporter.findings (the accuracy target's one rule,
    reporter.findings.rule, among them) but the questions the run may ask while it measures
    (reporter.findings.decision.ASKED_WHILE_MEASURING)."""
    asked = set(_constant(PACKAGE / "findings" / "decision.py", "ASKED_WHILE_MEASURING"))
    return {(module, name) for module, name in _findings_functions()
            if not name.startswith("_") and not (module == "reporter.findings.decision" and name in asked)}


MEASURING_STAGES = ("pipeline", "inputs", "measure", "search", "convert", "debug")


def test_measuring_stages_decide_nothing():
    """pipeline/, inputs/, measure/, search/, convert/ and debug/ read, measure and build: whether a model meets the
    accuracy target, and every finding, is decided in reporter.findings alone. They ask findings only the questions it
    offers them while they measure (and the rule it hands them, reporter.findings.decision.TargetRule);
    reporter.pipeline.conclude is the one module of the run that asks for the findings (and words them). Of
    reporter.core.statistics they read the tests the measuring needs; the paired test that decides between two
    candidates (`paired_p`) is the findings' acceptance's."""
    findings = _deciding()
    assert {("reporter.findings.derive", "decide"), ("reporter.findings.rule", "meets_target")} <= findings
    decided = findings | {("reporter.core.statistics", "paired_p")}
    modules = {module for module, _ in decided}
    found, read = [], 0
    for stage in MEASURING_STAGES:
        paths = sorted((PACKAGE / stage).rglob("*.py"))
        assert paths, f"reporter/{stage}/ is gone: the guard must name the packages that exist"
        for path in paths:
            if path == PACKAGE / "pipeline" / "conclude.py":
                continue
            read += 1
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = path.relative_to(PACKAGE)
            found += [f"{where}:{line} {module}.{name}" for module in modules
                      for line, name in _used_names(tree, module) if (module, name) in decided]
    assert read > 20 and not found, found


def test_the_measuring_stages_are_every_package_below_the_findings_but_render():
    """The guard above reads every package that measures or builds: each package of reporter/ is either one of them,
    the findings, the rooms that only word and lay out (render) or stand below every stage (model, core), or the
    entry points above the run (batch)."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages - {"findings", "render", "model", "core", "batch"} == set(MEASURING_STAGES)


def test_every_subpackage_is_in_the_wheel():
    """A subpackage missing from pyproject.toml's package list installs nowhere: the wheel imports fail (a new
    plug-in folder, say). Read from the folders, compared with the list setuptools is given."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found - listed == set(), f"subpackages missing from pyproject.toml: {sorted(found - listed)}"


def _layers() -> list[str]:
    """The import-linter contract's layers in pyproject.toml, top first."""
    import tomllib

    (contract,) = [c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
                   if c["type"] == "layers"]
    return contract["layers"]


def _layer(module: str, layers: list[str]):
    """The index of `module`'s layer (0: the top), or None for a module no layer holds."""
    return next((i for i, layer in enumerate(layers) if module == layer or module.startswith(layer + ".")), None)


def _upward_runtime_imports(sources: dict[str, str], layers: list[str]) -> list[str]:
    """Imports that reach a higher layer at run time, in `sources` (module name -> source): `importlib.import_module`
    or `__import__` of a reporter module named by a string (or a module-level string constant) anywhere, and
    `import reporter.X` / `from reporter.X import ...` inside a function, of a module above the importing one."""
    found = []
    for module, source in sorted(sources.items()):
        here = _layer(module, layers)
        if here is None:
            continue
        tree = ast.parse(source)
        constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                     and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                     for t in n.targets if isinstance(t, ast.Name)}
        package = module.split(".")[:-1]  # what a relative import starts from (reporter/ has no __init__ importing so)

        def reach(line: int, target: str, how: str):
            there = _layer(target, layers)
            if there is not None and there < here:
                found.append(f"{module}:{line} {how} {target}")

        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                arg = node.args[0]
                named = arg.value if isinstance(arg, ast.Constant) else constants.get(getattr(arg, "id", ""))
                if called in ("import_module", "__import__") and isinstance(named, str):
                    reach(node.lineno, named, "importlib")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import):
                        for alias in inner.names:
                            reach(inner.lineno, alias.name, "imports in a function")
                    elif isinstance(inner, ast.ImportFrom):
                        base = package[:len(package) - inner.level + 1] if inner.level else []
                        target = ".".join([*base, *([inner.module] if inner.module else [])])
                        for name in ([target] if inner.module else [f"{target}.{a.name}" for a in inner.names]):
                            reach(inner.lineno, name, "imports in a function")  # `from . import x`: x a module
    return sorted(set(found))


def test_the_upward_import_finder_finds_each_kind():
    """The check below would pass if the finder saw nothing: it finds a planted import_module by a constant, one by
    a literal, imports inside a function (absolute and relative) reaching up, and none reaching down or sideways."""
    layers = ["a.top", "a.mid", "a.low"]
    sources = {
        "a.low.x": ("import importlib\nBUILT_IN = 'a.mid.kinds'\n"
                    "def f():\n    importlib.import_module(BUILT_IN)\n    import a.top.cli\n    from a.low import y\n"),
        "a.low.y": "def g():\n    return __import__('a.top')\n",
        "a.mid.z": ("def h():\n    from ..top import api\n    from a.low.x import f\n    from .w import k\n"
                    "import a.top\n"),
        "a.top.cli": "def main():\n    from a.low import x\n    import importlib\n    importlib.import_module('a.mid')\n",
    }
    assert _upward_runtime_imports(sources, layers) == [
        "a.low.x:4 importlib a.mid.kinds", "a.low.x:5 imports in a function a.top.cli",
        "a.low.y:2 importlib a.top", "a.mid.z:2 imports in a function a.top"]


def test_no_module_imports_a_higher_layer_at_run_time():
    """An import by name (importlib) or inside a function is in no import graph import-linter checks as the code runs
    it: none reaches a layer above its module's (the registries in core/ are filled by the entry points,
    reporter.plugins, never by loading the plug-ins above them)."""
    layers = _layers()
    assert "reporter.plugins" in layers and layers.index("reporter.plugins") < layers.index("reporter.batch")
    sources = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p.read_text("utf-8")
               for p in PACKAGE.rglob("*.py")}
    assert len(sources) > 100 and "reporter.core.tasks" in sources
    assert _upward_runtime_imports(sources, layers) == []


def test_a_report_is_read_and_rendered_in_a_fresh_process_without_tensorflow(tmp_path):
    """In a fresh process, whatever module of the package is imported first, the built-in plug-ins are registered by
    the package itself (the composition root; core/ and model/ never reach up to fill their registries): a report.json
    read through reporter.model names its task kind, no TensorFlow is imported, and `quant-report render` renders it."""
    fixture = ROOT / "tests" / "fixtures" / "report.json"
    code = ("import sys\nfrom pathlib import Path\nfrom reporter.model.report import Report\n"
            f"report = Report.from_json(Path({str(fixture)!r}).read_text())\n"
            "print('KIND', report.model.task_kind.name)\n"
            "print('TENSORFLOW', 'tensorflow' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [f"KIND {json.loads(fixture.read_text())['model']['task']}",
                                       "TENSORFLOW False"], run.stdout
    out = tmp_path / "summary.md"
    render = subprocess.run([sys.executable, "-m", "reporter", "render", str(fixture), "--format", "md", "--out",
                             str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert render.returncode == 0, render.stderr
    assert out.read_text(encoding="utf-8").startswith("#")


def _composed() -> tuple:
    """In a child: whether the built-in kinds were registered at its start (before anything asked for them)."""
    return "reporter.measure.kinds" in sys.modules, "reporter.plugins" in sys.modules


def test_a_child_process_starts_with_its_parents_plugins():
    """Every child (reporter.core.children: the batch worker, the contained and side processes) is composed as its
    parent: the built-in plug-ins the entry point registered (here conftest.py, as the CLI and the API do) are
    registered in the child before its first call, so a chart or a candidate built there reads the kinds."""
    from reporter.core import children

    assert children.run_once(_composed, timeout=120) == (True, True)


def _table_modules(text: str) -> dict[str, set[str]]:
    """docs/architecture.md's module table: each row's package (`reporter/render/views/`, or a top-level module
    `reporter/cli.py`) and the names it lists, the backquoted names outside parentheses of its last cell."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"\| `reporter/([^`]*)` \|.*\|([^|]*)\|$", line)
        if not match:
            continue
        depth, names = 0, set()
        for token in re.findall(r"`[^`]*`|[()]", match.group(2)):
            depth += {"(": 1, ")": -1}.get(token, 0)
            if token.startswith("`") and depth == 0:
                names.add(token.strip("`"))
        rows[match.group(1)] = names
    return rows


def _package_modules() -> dict[str, set[str]]:
    """What the table must list: every package of reporter/ with its modules and subpackages, and each top-level
    module."""
    found = {p.name: set() for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    for init in PACKAGE.rglob("__init__.py"):
        folder = init.parent
        if folder != PACKAGE:
            found[folder.relative_to(PACKAGE).as_posix() + "/"] = (
                {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
                | {d.name for d in folder.iterdir() if (d / "__init__.py").is_file()})
    return found


def test_the_table_reader_reads_names_outside_parentheses():
    """The check below would pass on a table it cannot read: it reads a planted row's modules, not the names in their
    descriptions."""
    text = ("| `reporter/a/` | what | `x` (the `y` of `z`), `w` and `v` (more (`u`)) |\n"
            "| `reporter/cli.py` | the command line | |\n| `reporter/a/b/` | (in a) | `t` |\n")
    assert _table_modules(text) == {"a/": {"x", "w", "v"}, "cli.py": set(), "a/b/": {"t"}}


def test_the_architecture_docs_list_every_module():
    """docs/architecture.md's module table is drawn from the code: every package of reporter/ (subpackages too) has
    a row listing each of its modules and subpackages, and each top-level module has a row; nothing listed is
    gone."""
    listed = _table_modules((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    actual = _package_modules()
    assert len(actual) > 15 and "core/" in actual and "cli.py" in actual
    problems = [f"no row for reporter/{name}" for name in sorted(actual.keys() - listed.keys())]
    problems += [f"a row for reporter/{name}, which is gone" for name in sorted(listed.keys() - actual.keys())]
    for name in sorted(actual.keys() & listed.keys()):
        problems += [f"reporter/{name}: `{m}` is missing" for m in sorted(actual[name] - listed[name])]
        problems += [f"reporter/{name}: `{m}` is listed but gone" for m in sorted(listed[name] - actual[name])]
    assert not problems, problems
