"""Issue 64's house counts, read from a checkout's source (one count also imports its settings classes, one runs its
settings walk): where a plug-in's code lives, where deciding happens, how settings are declared and typed, who edits
the flatbuffer tree, and imports that reach up at run time.

Run by hand, before and after: `python benchmarks/house_counts.py [ROOT]` (default: this checkout). For a before
figure, check the earlier commit out beside this one (`git worktree add /tmp/before COMMIT`) and pass its folder.

What each count counts (code only: names, attributes, keywords, definitions and string constants that are not
docstrings; comments and docstrings never count):
- files holding a plug-in's code outside its own modules. A plug-in's own modules are the files whose path names it
  (kinds/detection.py, rungs/float_detection_outputs.py), its target module and, for the tools, the two hardware
  modules that run them and keep their records (measure/hardware.py, model/hardware.py). Its code: identifiers and
  strings matching its pattern (`PLUGINS` below). Detection's pattern names the detector's own things (the kind,
  its postprocess op, mAP, its labels); until issue 64's last round it also named the host-op registry (`HOST_OPS`,
  `host_ops`) and the kind protocol's several-outputs hooks (`joins`, `join_labels`), 15 files with them. Those are
  generic now: the detection kind fills the registry (core.targets.rules.add_host_ops) and implements the hooks as
  any kind of several outputs may; with them counted the figure is still 15.
- modules of the stages (STAGES: search, pipeline, debug, convert, inputs, batch, render) that decide whether a model
  meets the target or run a paired test themselves: they define one of DECIDING or PAIRED, or call one of PAIRED
  (calling findings' `decide` or its rule is asking findings, not deciding).
- metric names compared: a comparison (==, !=, in, not in) with a string constant (or a tuple, list or set of them)
  that names a metric (METRIC_NAMES).
- argparse declarations outside the schema's one builder (inputs/settings.py): `add_argument(` calls.
- Any-typed settings fields: fields of RunSettings (inputs/settings.py) and report.json's Settings
  (model/settings.py) annotated Any (imports those two modules, which import no TensorFlow).
- modules editing or walking the flatbuffer tree outside measure/graph.py: they name the generated schema or its
  object API (FLATBUFFER).
- walk returns: benchmarks/settings_flow.py's "returns" on the demo MLP (a stop in a module the settings had left).
- upward run-time imports: `importlib.import_module("reporter...")` anywhere, and imports inside a function of a
  package above the importing module's own in the import-linter layers (pyproject.toml).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from architecture_counts import _docstrings  # noqa: E402 - the same docstrings as issue 50's counts

PLUGINS = {
    "detection": (re.compile(r"detection|Detection|postprocess|PostProcess|map50|coco_map|y_boxes|y_classes"
                             r"|num_detections"),
                  ("core/targets/",), ("detection", "yolo")),  # a raw YOLO output is a detector: its kind module is
    # of the family and scores with detection's COCO evaluation, by import
    "segmentation": (re.compile(r"segmentation|Segmentation|mean_iou|iou_per_class|MeanIoU|pixel_accuracy"),
                     (), ("segmentation",)),
    "Vela (Ethos-U)": (re.compile(r"vela|Vela|VELA|ethos|Ethos|npu_share|sram"),
                       ("core/targets/ethos_u.py", "measure/hardware.py", "model/hardware.py"), ("vela", "ethos")),
    "TFLite Micro": (re.compile(r"^(?!.*[fF]1).*(^micro$|^micro_|Micro|MICRO|tflite_micro|arena)"),
                     ("core/targets/micro.py", "measure/hardware.py", "model/hardware.py"), ("micro",)),
}
# The stages that measure, search and build: they may measure paired figures through core's statistics (measure/
# stores them in report.json), but deciding and paired tests that choose are findings/' (the search and the ladder
# are handed its rule). core/ (the statistics) and measure/ (paired figures recorded) are not counted.
STAGES = ("search/", "pipeline/", "debug/", "convert/", "inputs/", "batch/", "render/")
DECIDING = {"decide", "meets_target", "gap_of", "after_fix", "_a_variant_meets", "meets", "meets_on_target"}
PAIRED = {"mcnemar_p", "mcnemar_p_counts", "bootstrap_p", "paired_worse", "paired_better", "paired_t",
          "paired_correct", "worse_beyond_noise", "may_ship", "paired_p"}
METRIC_NAMES = {"accuracy", "mean IoU", "mask IoU", "mAP@0.5", "micro-F1", "micro F1", "exact-match accuracy",
                "pixel accuracy", "R²", "MSE", "top-5 accuracy"}
FLATBUFFER = re.compile(r"schema_py_generated|flatbuffer_utils|^ModelT$|^OperatorT$|^TensorT$|^BufferT$|^SubGraphT$"
                        r"|GetRootAs|^Builder$|OperatorCodeT|BuiltinOptions")


def _modules(pkg: Path):
    for path in sorted(pkg.rglob("*.py")):
        yield str(path.relative_to(pkg)), ast.parse(path.read_text(encoding="utf-8"), str(path))


def _tokens(tree: ast.AST):
    """(token, line) of every name, attribute, keyword, definition, imported name and non-docstring string."""
    docs = _docstrings(tree)
    docs |= {id(k.value) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg == "average"}  # sklearn's
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id, node.lineno
        elif isinstance(node, ast.Attribute):
            yield node.attr, node.lineno
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.arg, node.value.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
        elif isinstance(node, ast.alias):
            yield node.name.rpartition(".")[2], getattr(node, "lineno", 0)
            if node.name.startswith("reporter") or "." in node.name:
                yield node.name, getattr(node, "lineno", 0)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value, node.lineno


def _layers(root: Path) -> list[str]:
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"layers = \[(.*?)\]", text, re.S)
    return [name.split(".")[1] for name in re.findall(r'"(reporter\.[a-z_]+)"', block.group(1))] if block else []


def _package(rel: str) -> str:
    return rel.split("/")[0].removesuffix(".py")


def _names_metric(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in METRIC_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_metric(e) for e in node.elts)
    return False


def counts(root: Path) -> dict[str, tuple[int, list[str]]]:
    pkg = root / "reporter"
    layers = _layers(root)
    plugin_files: dict[str, set[str]] = {name: set() for name in PLUGINS}
    deciding, metric_names, argparse_calls, flatbuffer, upward = set(), [], [], set(), []
    for rel, tree in _modules(pkg):
        for name, (pattern, own, keys) in PLUGINS.items():
            if any(key in rel.lower() for key in keys) or rel.startswith(own) or rel in own:
                continue
            if any(isinstance(tok, str) and pattern.search(tok) for tok, _ in _tokens(tree)):
                plugin_files[name].add(rel)
        if rel not in ("measure/graph.py", "measure/graph_edits.py") and any(isinstance(t, str) and FLATBUFFER.search(t) for t, _ in _tokens(tree)):
            flatbuffer.add(rel)
        here = _package(rel)
        constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                     for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value.value, str)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if called in PAIRED and rel.startswith(STAGES):  # a paired test run here (asking findings'
                    deciding.add(rel)  # `decide` or rule is not deciding: conclude.py hands findings' answers on)
                if called == "add_argument" and rel != "inputs/settings.py":
                    argparse_calls.append(f"{rel}:{node.lineno}")
                arg = node.args[0] if node.args else None
                module = arg.value if isinstance(arg, ast.Constant) else constants.get(getattr(arg, "id", ""), "")
                if called == "import_module" and str(module).startswith("reporter."):
                    there = str(module).split(".")[1]
                    if here in layers and there in layers and layers.index(there) < layers.index(here):
                        upward.append(f"{rel}:{node.lineno} importlib {module}")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name in DECIDING | PAIRED and rel.startswith(STAGES):
                    deciding.add(rel)
                for inner in ast.walk(node):
                    target = inner.module if isinstance(inner, ast.ImportFrom) else None
                    names = [a.name for a in inner.names] if isinstance(inner, ast.Import) else [target or ""]
                    for imported in names:
                        if not imported.startswith("reporter."):
                            continue
                        there = imported.split(".")[1]
                        if here in layers and there in layers and layers.index(there) < layers.index(here):
                            upward.append(f"{rel}:{inner.lineno} {imported}")
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                     for op in node.ops):
                if any(_names_metric(p) for p in [node.left, *node.comparators]):
                    metric_names.append(f"{rel}:{node.lineno}")
    found = {f"files holding {name} code outside its modules": (len(files), sorted(files))
             for name, files in plugin_files.items()}
    found.update({
        "stage modules that decide or run paired tests (not findings/)": (len(deciding), sorted(deciding)),
        "metric names compared": (len(metric_names), metric_names),
        "argparse declarations outside the schema's builder": (len(argparse_calls), argparse_calls),
        "Any-typed settings fields": _any_fields(root),
        "modules editing or walking the flatbuffer tree outside measure/graph.py": (len(flatbuffer), sorted(flatbuffer)),
        "walk returns (settings_flow.py)": _walk_returns(root),
        "upward run-time imports": (len(upward), upward),
    })
    return found


def _any_fields(root: Path) -> tuple[int, list[str]]:
    code = ("import typing, dataclasses\n"
            "from reporter.inputs.settings import RunSettings\nfrom reporter.model.settings import Settings\n"
            "for cls in (RunSettings, Settings):\n"
            "    hints = getattr(cls, '__annotations__', {})\n"
            "    for f in dataclasses.fields(cls):\n"
            "        t = hints.get(f.name, f.type)\n"
            "        if t is typing.Any or t == 'Any':\n"
            "            print(f'{cls.__name__}.{f.name}')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    if run.returncode != 0:
        return -1, [f"could not import the settings classes: {run.stderr.strip().splitlines()[-1:]}"]
    names = run.stdout.split()
    return len(names), names


def _walk_returns(root: Path) -> tuple[int, list[str]]:
    flow = Path(__file__).resolve().parent / "settings_flow.py"
    run = subprocess.run([sys.executable, str(flow), "--src", str(root)], capture_output=True, text=True, timeout=900)
    found = re.search(r"(\d+) returns?", run.stdout)
    if found is None:
        return -1, [f"settings_flow.py printed no returns: {(run.stdout + run.stderr).strip().splitlines()[-1:]}"]
    return int(found.group(1)), []


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve() if args else Path(__file__).resolve().parents[1]
    for what, (n, where) in counts(root).items():
        print(f"{n:4d}  {what}")
        for w in where:
            print(f"        {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
