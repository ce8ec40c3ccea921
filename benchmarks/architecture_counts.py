"""Issue 50's architecture counts, read from the source (no import of the package, no TensorFlow).

Run by hand from any checkout: `python benchmarks/architecture_counts.py [ROOT]`. Prints one line per count:
- files outside the task-kind modules reading a task kind's flags (`.binary_sigmoid`, `.multilabel`, `.dense`, `.mask`,
  or one passed by keyword; report.json's `model.binary_sigmoid` record field shares a name),
- target `check`-string comparisons outside the target modules (`x.check == ...`, `targets.VELA` in a comparison),
- Ethos-U configuration lists (literals naming "ethos-u55-32"),
- LiteRT interpreter wrappers (modules that construct an `Interpreter(...)`),
- modules outside findings/ that decide whether a model meets the accuracy target (call or define a deciding
  function: `decide`, `meets_target`, `gap_of`, `after_fix`, `_a_variant_meets`, `mcnemar_p` on results),
- sentences written outside render/ (string literals of four words or more in core/judgement.py, findings/,
  search/ and measure/measurer.py that are not docstrings, exception messages or progress lines).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

FLAGS = {"binary_sigmoid", "multilabel", "dense", "mask"}
CHECK_NAMES = {"NO_CHECK", "REFERENCE", "MICRO", "VELA"}
DECIDING = {"decide", "meets_target", "gap_of", "after_fix", "_a_variant_meets", "meets"}
SENTENCE_FILES = ("core/judgement.py", "findings/", "search/", "measure/measurer.py")


def _modules(pkg: Path):
    for path in sorted(pkg.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _excluded_strings(tree: ast.AST) -> set[int]:
    """Constants inside a raise, a warning, a progress line (`.say`, `.stage`) or a print: not report sentences."""
    skip = set()
    for node in ast.walk(tree):
        inner = None
        if isinstance(node, ast.Raise):
            inner = node
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in {"say", "stage", "print", "warn"} or name.endswith("Error"):
                inner = node
        if inner is not None:
            skip |= {id(n) for n in ast.walk(inner)}
    return skip


def counts(root: Path) -> dict[str, tuple[int, list[str]]]:
    pkg = root / "reporter"
    flag_files, checks, ethos, interpreters, deciding, sentences = set(), [], [], set(), set(), []
    for path, tree in _modules(pkg):
        rel = str(path.relative_to(pkg))
        in_targets = "targets" in rel
        in_kinds = rel.startswith("measure/kinds/")  # a kind's own module (its metric functions share the names)
        docs, skip = _docstrings(tree), _excluded_strings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in FLAGS and isinstance(node.ctx, ast.Load) \
                    and not in_kinds:
                flag_files.add(rel)
            if isinstance(node, ast.keyword) and node.arg in FLAGS and not in_kinds:
                flag_files.add(rel)
            if isinstance(node, ast.Compare) and not in_targets:
                parts = [node.left, *node.comparators]
                if any(isinstance(p, ast.Attribute) and (p.attr == "check" or p.attr in CHECK_NAMES) for p in parts):
                    checks.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Constant) and node.value == "ethos-u55-32":
                ethos.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name == "Interpreter":
                    interpreters.add(rel)
                if name in DECIDING and not rel.startswith("findings/"):
                    deciding.add(rel)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DECIDING \
                    and not rel.startswith("findings/"):
                deciding.add(rel)
            if rel.startswith(SENTENCE_FILES) and isinstance(node, ast.JoinedStr | ast.Constant) \
                    and id(node) not in docs and id(node) not in skip:
                text = node.value if isinstance(node, ast.Constant) else "".join(
                    v.value for v in node.values if isinstance(v, ast.Constant))
                if isinstance(text, str) and len(text.split()) >= 4 and not text.lstrip().startswith("#"):
                    if isinstance(node, ast.JoinedStr):
                        skip |= {id(v) for v in node.values}
                    sentences.append(f"{rel}:{node.lineno}")
    # `decide` and `meets` are also ordinary words in other packages (gate.decide is called from render to print a
    # verdict it does not make): only the modules that decide a model meets the target count.
    return {
        "files outside the kind modules reading a task kind's flags": (len(flag_files), sorted(flag_files)),
        "check-string comparisons outside targets": (len(checks), checks),
        "Ethos-U configuration lists": (len(ethos), ethos),
        "LiteRT interpreter wrappers (modules)": (len(interpreters), sorted(interpreters)),
        "modules outside findings/ deciding 'meets the target'": (len(deciding), sorted(deciding)),
        "sentences written in judgement/findings/search/measurer": (len(sentences), sentences),
    }


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    for what, (n, where) in counts(root).items():
        print(f"{n:4d}  {what}")
        for w in where:
            print(f"        {w}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import house_counts  # issue 64's counts: where plug-ins' code lives, deciding, settings, graph edits, imports

    print("issue 64 (benchmarks/house_counts.py):")
    return house_counts.main([str(root)])


if __name__ == "__main__":
    sys.exit(main())
