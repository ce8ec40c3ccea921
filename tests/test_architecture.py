"""The package's shape: imports run one way (import-linter's contract in pyproject.toml), no module imports
itself back through others (imports inside functions included), stages are subpackages, and each says
what it is in one line. Reads source only: no TensorFlow, a second or two."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reporter"
TOP_LEVEL_FILES = {"__init__.py", "__main__.py", "cli.py", "api.py"}  # the entry points: command line, Python API


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


def test_measuring_stages_decide_nothing():
    """run/, search/, measure/ and debug/ measure and build: whether a model meets the accuracy target, and every
    finding, is decided in reporter.findings alone. They ask findings only the questions it offers them while they
    measure; reporter.pipeline.conclude is the one module of the run that asks for the findings (and words them). Of
    reporter.core.judgement they read the thresholds and tests the measuring needs: the rule is findings'."""
    findings = _deciding()
    assert {("reporter.findings.derive", "decide"), ("reporter.findings.rule", "meets_target")} <= findings
    modules = {module for module, _ in findings}
    found = []
    for stage in ("run", "search", "measure", "debug"):
        for path in sorted((PACKAGE / stage).rglob("*.py")):
            if path == PACKAGE / "run" / "conclude.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = path.relative_to(PACKAGE)
            found += [f"{where}:{line} {module}.{name}" for module in modules
                      for line, name in _used_names(tree, module) if (module, name) in findings]
    assert not found, found


def test_every_subpackage_is_in_the_wheel():
    """A subpackage missing from pyproject.toml's package list installs nowhere: the wheel imports fail (a new
    plug-in folder, say). Read from the folders, compared with the list setuptools is given."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found - listed == set(), f"subpackages missing from pyproject.toml: {sorted(found - listed)}"
