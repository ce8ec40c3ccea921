"""Issue 64's flatbuffer count, read from the source (no import of the package, no TensorFlow).

Run by hand from any checkout: `python benchmarks/flatbuffer_counts.py [ROOT]`. Prints the modules outside the one
graph editor (reporter/measure/graph.py, and graph_edits.py built on it) that walk or edit a model's flatbuffer tree themselves: they import the
generated schema, flatbuffer_utils or flatbuffers; name its object classes or readers (`ModelT`, `OperatorT`,
`TensorT`, `BufferT`, `GetRootAs`, `InitFromPackedBuf`); ask graph.py for the schema, the object classes or the
object tree (`schema`, `objects`, `read_model`, `write_model` ...); or reach into a tree (`.subgraphs`, `.operators`,
`.buffers`, `.operatorCodes`, `.opcodeIndex` ... or a `Graph`'s `.sg`/`.obj`). Calling graph.py's named operations
and readers (bytes in; bytes, names or numbers out) is not walking the tree.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

EDITORS = ("measure/graph.py", "measure/graph_edits.py")  # the primitives, and the whole-model edits on them
MODULES = ("schema_py_generated", "flatbuffer_utils", "flatbuffers", "tflite.Model")
CLASSES = {"ModelT", "OperatorT", "TensorT", "BufferT", "OperatorCodeT", "SubGraphT", "GetRootAs",
           "InitFromPackedBuf"}
TREE_CALLS = {"schema", "objects", "read_model", "write_model", "compact", "add_buffer", "buffer_view",
              "consumers", "has_data", "op_name", "op_names", "constant", "integers", "drop_orphan_buffers",
              "main_ops", "host_outputs", "quantized_host_outputs", "tensor_name"}
TREE_FIELDS = {"subgraphs", "operators", "buffers", "operatorCodes", "signatureDefs", "opcodeIndex",
               "builtinOptions", "builtinOptionsType", "shapeSignature", "sg", "obj"}


def reasons(tree: ast.AST) -> list[str]:
    """What in one module walks or edits the flatbuffer tree, by line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and
                                                     node.module else [])
            if any(m in n for n in names for m in MODULES):
                found.append(f"{node.lineno}: imports {', '.join(names)}")
        elif isinstance(node, ast.Attribute) and node.attr in CLASSES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "graph" \
                and node.attr in TREE_CALLS:
            found.append(f"{node.lineno}: graph.{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr in TREE_FIELDS:
            found.append(f"{node.lineno}: .{node.attr}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def counts(root: Path) -> dict[str, list[str]]:
    pkg = root / "reporter"
    out = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = str(path.relative_to(pkg))
        if rel in EDITORS:
            continue
        why = reasons(ast.parse(path.read_text(), str(path)))
        if why:
            out[rel] = why
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    found = counts(root)
    print(f"{len(found):4d}  modules walking or editing the flatbuffer tree outside {' and '.join(EDITORS)}")
    for rel, why in found.items():
        print(f"        {rel}: {'; '.join(why[:4])}{' ...' if len(why) > 4 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
