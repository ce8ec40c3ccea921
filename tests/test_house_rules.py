"""The house rules a contributor keeps without being told: short parameter lists, modules of one job, variant
names spelled only in the registry, no `Any` standing for a project type, and templates that name no variant.
Reads source only (the standard library's ast): no TensorFlow, well under a second."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reporter"
MAX_PARAMETERS = 6  # self and cls not counted; *args and **kwargs count one each
MAX_LINES = 600
# `Any` is allowed where a value really can be anything: JSON read before it is checked, a setting's default.
ANY_ALLOWED = {"model/decode.py": "decodes JSON of any shape against the dataclasses",
               "run/settings.py": "a setting's default and check take the value of any declared kind"}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _parameters(node) -> list[str]:
    a = node.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
    return names + (["*" + a.vararg.arg] if a.vararg else []) + (["**" + a.kwarg.arg] if a.kwarg else [])


def test_no_function_takes_more_than_six_parameters():
    found = [f"{rel}:{node.lineno} {node.name} ({len(_parameters(node))})"
             for _, rel, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(_parameters(node)) > MAX_PARAMETERS]
    assert not found, "functions with more than 6 parameters (take a context or an options record):\n" + "\n".join(found)


def test_no_module_is_longer_than_600_lines():
    found = [f"{rel}: {n} lines" for path, rel, _ in _modules()
             if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not found, "modules over 600 lines (split them by job):\n" + "\n".join(found)


def _variant_names() -> set[str]:
    from reporter.core import variants

    return {v.name for v in variants.REGISTRY}


def test_variant_names_are_spelled_only_in_the_registry():
    """Outside core/, code asks the registry (`variants.FIQ`, `variants.BY_NAME[...]`): a string literal that is
    a variant's name is a second place to change when a variant is added or renamed."""
    names = _variant_names()
    found = [f"{rel}:{node.lineno} {node.value!r}" for _, rel, tree in _modules() if not rel.startswith("core/")
             for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names]
    assert not found, "variant names spelled outside reporter/core/:\n" + "\n".join(found)


def test_templates_name_no_variant():
    names = _variant_names()
    name = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    # a variant looked up or compared by name (a CSS class that happens to read "rule" is not one)
    quoted = re.compile(r"""(?:variant\(\s*|(?:==|!=|\bin)\s*)["'](%s)["']|["'](%s)["']\s*(?:==|!=|\bin\b)""" % (name, name))
    found = [f"{path.name}:{i} {m.group(0)}" for path in sorted((ROOT / "templates").glob("*.j2"))
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for m in quoted.finditer(line)]
    assert not found, "templates spelling variant names (the view should hand them over):\n" + "\n".join(found)


def _bare_any(annotation) -> bool:
    """`Any` or `Optional[Any]` as a whole annotation (a container of Any, e.g. dict[str, Any] of JSON values,
    is a container's content, not a type erased)."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.strip() in ("Any", "Optional[Any]")
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name) \
            and annotation.value.id == "Optional":
        return _bare_any(annotation.slice)
    return False


def test_no_annotation_erases_a_type_to_any():
    found = []
    for _, rel, tree in _modules():
        if rel.startswith("core/") or rel in ANY_ALLOWED:
            continue
        for node in ast.walk(tree):
            annotations = []
            if isinstance(node, ast.AnnAssign):
                annotations.append((node.lineno, node.annotation))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                annotations += [(p.lineno, p.annotation) for p in a.posonlyargs + a.args + a.kwonlyargs if p.annotation]
                if node.returns is not None:
                    annotations.append((node.lineno, node.returns))
            found += [f"{rel}:{line}" for line, ann in annotations if _bare_any(ann)]
    assert not found, "annotations of Any outside core/ (name the project type):\n" + "\n".join(found)


def test_the_rules_see_what_they_forbid(tmp_path):
    """The checks above would pass on any code if they saw nothing: planted breaches are found."""
    tree = ast.parse("def f(a, b, c, d, e, f, g): pass\nx: Any = 1\ny = 'fiq'\n")
    fn = tree.body[0]
    assert len(_parameters(fn)) == 7
    assert _bare_any(tree.body[1].annotation)
    assert not _bare_any(ast.parse("x: dict[str, Any]").body[0].annotation)
    assert any(isinstance(n, ast.Constant) and n.value in _variant_names() for n in ast.walk(tree))


def _metric_names_compared(tree: ast.AST) -> list[int]:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from house_counts import _names_metric  # the counter issue 64's figures come from

    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
            and any(_names_metric(p) for p in [node.left, *node.comparators])]


def test_no_metric_is_compared_by_name():
    """How a metric is worded ("4.3 accuracy points", "4.3 points of mean IoU") is the kind's property
    (TaskKind.plain_points, read by Report.metric_plain), not a comparison with "accuracy": a user's metric named
    "accuracy", or a kind's share that is not a classifier's accuracy, would be worded wrong."""
    found = [f"{rel}:{line}" for _, rel, tree in _modules() for line in _metric_names_compared(tree)]
    assert not found, "metric names compared (ask Report.metric_plain or the kind):\n" + "\n".join(found)
    planted = ast.parse("if metric == 'accuracy': pass\nif name in ('mean IoU', 'x'): pass\nif k == 'other': pass\n")
    assert _metric_names_compared(planted) == [1, 2]
