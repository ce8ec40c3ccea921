"""Issue 50's target counts at a git revision (default: the work tree): comparisons of a target's check outside the
target modules, Ethos-U configuration lists, and hand-written lists of the targets in help and doc texts.

    python benchmarks/target_counts.py [REV]
"""

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK_NAMES = {"check", "NO_CHECK", "REFERENCE", "MICRO", "VELA"}  # Target.check and the strings it held
TARGET_MODULES = ("reporter/core/targets.py", "reporter/core/targets/")
HAND_LIST = re.compile(r"\bcpu\b.{0,600}\bint8\b.{0,600}\bgpu\b", re.DOTALL)  # "cpu", "int8" or "gpu", spelled out


def _files(rev):
    if rev is None:
        return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in (ROOT / "reporter").rglob("*.py")}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "reporter"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout for n in names if n.endswith(".py")}


def _named(node) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def check_comparisons(files) -> list[str]:
    """`target.check == ...`, `check in (MICRO, VELA)`, `{VELA: ...}.get(check)`: code that branches on a target's
    check by name, outside the target modules."""
    found = []
    for name, text in files.items():
        if name.startswith(TARGET_MODULES):
            continue
        for node in ast.walk(ast.parse(text)):
            operands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else \
                node.keys if isinstance(node, ast.Dict) else []
            elts = [e for o in operands if o is not None for e in (o.elts if isinstance(o, ast.Tuple) else [o])]
            if any(_named(e) in CHECK_NAMES for e in elts):
                found.append(f"{name}:{node.lineno}")
    return found


def ethos_lists(files) -> list[str]:
    """Tuples or lists of two or more Ethos-U configuration names."""
    found = []
    for name, text in files.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Tuple, ast.List)) and sum(
                    isinstance(e, ast.Constant) and str(e.value).startswith("ethos-u") for e in node.elts) > 1:
                found.append(f"{name}:{node.lineno}")
    return found


def hand_lists(files) -> list[str]:
    """Help texts, docstrings and comments that list the targets by hand (cpu, int8 and gpu spelled out in one text):
    a list that does not grow when a target is registered."""
    found = []
    for name, text in files.items():
        texts = [(n.lineno, n.value) for n in ast.walk(ast.parse(text))
                 if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        texts += [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type == tokenize.COMMENT]
        found += [f"{name}:{line}" for line, value in texts if HAND_LIST.search(value)]
    return found


if __name__ == "__main__":
    files = _files(sys.argv[1] if len(sys.argv) > 1 else None)
    for title, count in (("check-string comparisons outside the target modules", check_comparisons),
                         ("Ethos-U configuration lists", ethos_lists),
                         ("target lists written by hand in help, doc and comment lines", hand_lists)):
        where = count(files)
        print(f"{title}: {len(where)}  {' '.join(where)}")
