"""Issue 53's plumbing counts, read from the source (no import of the package, no TensorFlow).

Run by hand from any checkout: `python benchmarks/plumbing_counts.py [ROOT]`. Prints one line per count:
- child-process managers: modules that start processes themselves (multiprocessing's Process, Pool or get_context,
  a ProcessPoolExecutor, subprocess.run or Popen),
- regex reads of a tool's printed output: patterns matched against what Vela or TFLite Micro print,
- private API uses: calls or attributes of other objects whose name starts with one underscore (os._exit, a
  namedtuple's _replace and TensorFlow's converter switches named as such excepted, listed apart),
- modules of the package that reads the user's inputs and of the pipeline (run/ before the split),
- places a setting is declared: modules that declare a setting's default or field by name (`Setting("...`, a
  dataclass field named after a run setting, a mapping of setting names),
- README size in bytes and lines, and whether docs/ exists.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

STARTERS = ("multiprocessing.get_context(", "ProcessPoolExecutor(", "subprocess.run(", "subprocess.Popen(",
            "context.Process(", "ctx.Process(", "multiprocessing.Process(", "multiprocessing.Pool(")
TOOL_OUTPUT = re.compile(r"operators =|Warning \\\\?\(supported operators\\\\?\)|operator: |Arena allocation total")
PUBLIC_UNDERSCORE = {"_exit", "_replace", "_asdict", "_fields", "_make", "_getframe"}
SETTING_NAMES = ("calibration_samples", "search_budget", "selection_samples", "suspect_threshold", "keep_float_ops")


def _py(root: Path):
    return sorted((root / "reporter").rglob("*.py"))


def managers(root: Path) -> list[str]:
    found = []
    for path in _py(root):
        text = path.read_text()
        if any(s in text for s in STARTERS):
            found.append(str(path.relative_to(root)))
    return found


def tool_regexes(root: Path) -> list[str]:
    found = []
    for path in _py(root):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "re.compile(" in line and TOOL_OUTPUT.search(line):
                found.append(f"{path.relative_to(root)}:{number}")
    return found


def _own_names(root: Path) -> set[str]:
    """Underscore names the package defines itself (methods, attributes set on self): its own, not a library's."""
    own = set()
    for path in _py(root):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
    return own


def private_uses(root: Path) -> tuple[list[str], list[str]]:
    """Another library's private names used (the package's own underscore names, used inside it, not counted)."""
    found, switches = [], []
    own = _own_names(root)
    for path in _py(root):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in PUBLIC_UNDERSCORE or (
                    name in own and not name.startswith("_experimental")):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            where = f"{path.relative_to(root)}:{node.lineno} .{name}"
            (switches if name.startswith("_experimental") else found).append(where)
    return found, switches


def run_modules(root: Path) -> dict[str, int]:
    pkg = root / "reporter"
    return {name: len([p for p in (pkg / name).glob("*.py") if p.name != "__init__.py"])
            for name in ("run", "inputs", "pipeline") if (pkg / name).is_dir()}


def setting_declarations(root: Path) -> list[str]:
    found = []
    for path in _py(root):
        text = path.read_text()
        declares = any(re.search(rf"^\s+{n}\s*:\s*\w", text, re.M) for n in SETTING_NAMES) or \
            bool(re.search(r"Setting\(\"\w+\"", text)) or bool(re.search(r"GATE_NAMES\s*=|BATCH_KEYS\s*=\s*\{", text))
        if declares:
            found.append(str(path.relative_to(root)))
    return found


def main(root: Path) -> None:
    m = managers(root)
    print(f"child-process managers: {len(m)}  {', '.join(m)}")
    r = tool_regexes(root)
    print(f"regex reads of tool output: {len(r)}  {', '.join(r)}")
    p, switches = private_uses(root)
    print(f"private API uses: {len(p)}  {', '.join(p)}")
    print(f"  TensorFlow converter switches with no public form: {len(switches)}  {', '.join(switches)}")
    print(f"modules: {run_modules(root)}")
    s = setting_declarations(root)
    print(f"places a setting is declared: {len(s)}  {', '.join(s)}")
    readme = (root / "README.md").read_bytes()
    lines = readme.count(b"\n")
    print(f"README: {len(readme):,} bytes, {lines:,} lines; docs/: {(root / 'docs').is_dir()}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
