"""Per-layer metrics as Model Explorer overlays: one "node data" JSON per metric, which colours the
quantized .tflite's graph in Google's Model Explorer (`pip install ai-edge-model-explorer`).

The format is Model Explorer's own (model_explorer/node_data_builder.py, ai-edge-model-explorer 0.1.34):
a `ModelNodeData`, i.e. {graph id: GraphNodeData}, where GraphNodeData is
{"name", "results": {key: {"value": number}}, "gradient": [{"stop": 0..1, "bgColor"}], ...}.

Keys are output tensor names, not node ids. Model Explorer looks each key up among the output tensor
names of the graph's nodes (their `tensor_name` output metadata) before it tries it as a node id, so a
tensor name finds its op whichever TFLite adapter built the graph: the default flatbuffer adapter
numbers ops by their index, the MLIR one numbers every node (constants too) in order, and both give
each op's outputs their tensor names. Only names that are the output of exactly one op of a subgraph
(and the name of no other tensor there) are written; anything else is left out rather than risk
colouring the wrong node or being taken as a node id.

Graph ids are the subgraph ids of Model Explorer's default TFLite adapter (builtin_tflite_flatbuffer):
the subgraph's name, else the key of the first signature on it, else "main" for subgraph 0 and
"subgraph_<i>" for the others. Converters name subgraph 0 "main", which the MLIR adapter uses too.

Values are written as JSON numbers only: NaN is left out (no value to show) and +inf/-inf are capped
at the largest/smallest finite value of the same metric in the same graph, so that such a node gets
the colour of the end it belongs to and shows a number that it is at least (or at most); a graph
whose values are all non-finite gets no results. `adjustments()` says which keys were left out or
capped, and why. Names from models are untrusted: they only ever appear as JSON strings.

Colours are relative, as Model Explorer's gradient is: green at the best value in the graph, red at the
worst (by the metric's direction), amber between; when every value is the same it colours no node.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from reporter.core import variants
from reporter.core.files import write_atomic
from reporter.measure import graph

_SAFE_KEY = re.compile(r"[A-Za-z0-9_.-]+")

# Model Explorer interpolates between the stops (0 = the smallest value in the graph, 1 = the largest).
RED, AMBER, GREEN = "#d93025", "#f9ab00", "#1e8e3e"


@dataclass(frozen=True)
class Metric:
    key: str  # file-name-safe, e.g. "rmse_over_scale", "propagated_error", "snr_db"
    label: str  # shown to the user
    higher_is_better: bool

    def __post_init__(self):
        if not _SAFE_KEY.fullmatch(self.key) or self.key in (".", ".."):
            raise ValueError(f"metric key {self.key!r} is not file-name-safe (letters, digits, _ . -)")


@dataclass(frozen=True)
class _Subgraph:
    graph_id: str
    op_outputs: tuple[str, ...]  # in op order: names that one op outputs and no other tensor bears
    ambiguous: frozenset[str]  # op output names that another op output or tensor bears as well


def _text(raw) -> str:
    if raw is None:
        return ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _subgraphs(model: bytes) -> list[_Subgraph]:
    """Each subgraph's graph id, as Model Explorer's flatbuffer adapter names it, and the output tensor
    names of its ops that name one node unambiguously."""
    if len(model) < 8 or bytes(model[4:8]) != b"TFL3":
        raise ValueError("not a TFLite model (no TFL3 flatbuffer identifier)")
    result = []
    for s, (name, key, tensor_names, op_outputs) in enumerate(graph.subgraph_names(model)):
        graph_id = _text(name) or _text(key) or ("main" if s == 0 else f"subgraph_{s}")
        names = [_text(n) for n in tensor_names]
        outputs = [names[t] for t in op_outputs if 0 <= t < len(names)]
        per_op, per_tensor = Counter(outputs), Counter(names)
        unique = tuple(n for n in outputs if n and per_op[n] == 1 and per_tensor[n] == 1)
        result.append(_Subgraph(graph_id, unique, frozenset(outputs) - set(unique)))
    return result


def _place(model: bytes, values: dict[str, float]) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """{graph id: {tensor name: finite value}}, in op order, and {key: why} for every key left out or
    capped."""
    numbers = {str(k): float(v) for k, v in values.items()}
    notes: dict[str, str] = {}
    graphs: dict[str, dict[str, float]] = {}
    placed, ambiguous = set(), set()
    for sg in _subgraphs(model):
        ambiguous |= sg.ambiguous
        results = {n: numbers[n] for n in sg.op_outputs if n in numbers and not math.isnan(numbers[n])}
        placed |= set(results)
        finite = [v for v in results.values() if math.isfinite(v)]
        for name, v in list(results.items()):
            if math.isfinite(v):
                continue
            if finite:
                results[name] = max(finite) if v > 0 else min(finite)
                end = "largest" if v > 0 else "smallest"
                notes[name] = f"{v} shown as {results[name]!r}, the {end} finite value in graph {sg.graph_id!r}"
            else:
                del results[name]
                notes[name] = f"{v} left out: no finite value in graph {sg.graph_id!r} to cap it at"
        if results:
            graphs.setdefault(sg.graph_id, {}).update(results)
    for key, v in numbers.items():
        if key in placed or key in notes:
            continue
        if math.isnan(v):
            notes[key] = "NaN left out"
        elif key in ambiguous:
            notes[key] = "left out: more than one tensor of the model bears this name"
        else:
            notes[key] = "left out: not the output tensor of an op in the model"
    return graphs, notes


def _gradient(metric: Metric) -> list[dict]:
    """Green at the good end, red at the bad one: stop 0 is the smallest value, stop 1 the largest."""
    colours = (RED, AMBER, GREEN) if metric.higher_is_better else (GREEN, AMBER, RED)
    return [{"stop": stop, "bgColor": c} for stop, c in zip((0, 0.5, 1), colours)]


def node_data(model: bytes, values: dict[str, float], metric: Metric) -> dict:
    """Model Explorer's node-data JSON (as a dict) for one metric, keyed so that nodes of `model` (the
    .tflite bytes) match: {graph id: {"name", "results": {output tensor name: {"value"}}, "gradient",
    "hideAggregatedStats"}}. Keys that name no single op output are left out, NaN is left out and
    +/-inf capped (see the module's docstring and `adjustments`). Empty when nothing matched."""
    graphs, _ = _place(model, values)
    return {
        graph_id: {
            "name": metric.label,
            "results": {name: {"value": v} for name, v in results.items()},
            "gradient": _gradient(metric),
            # a sum of SNRs or of RMSE/scale over a layer's ops means nothing; min, max, mean do
            "hideAggregatedStats": ["sum"],
        }
        for graph_id, results in graphs.items()
    }


def adjustments(model: bytes, values: dict[str, float]) -> dict[str, str]:
    """{key: what node_data did with it} for every key it left out or capped; keys it wrote as they
    are do not appear."""
    return _place(model, values)[1]


def to_json(data: dict) -> str:
    """Strict JSON (no NaN or Infinity, which JavaScript's JSON.parse refuses)."""
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


def overlay_name(model_file_name: str, metric: Metric) -> str:
    """explorer_<model file's stem>_<metric key>.json, e.g. explorer_fiq_snr_db.json."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(model_file_name).stem).strip("._") or "model"
    return f"explorer_{stem}_{metric.key}.json"


def write_overlays(folder: Path, model: bytes, model_file_name: str,
                   per_metric: dict[Metric, dict[str, float]]) -> list[Path]:
    """One JSON per metric in folder (e.g. explorer_fiq_snr_db.json), written atomically; returns paths.
    A metric none of whose values lands on a node gets no file (Model Explorer would list it for no
    graph)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for metric, values in per_metric.items():
        data = node_data(model, values, metric)
        if not data:
            continue
        path = folder / overlay_name(model_file_name, metric)
        write_atomic(path, to_json(data))
        paths.append(path)
    return paths


def explorer_command(model_file: str, overlay_files: list[str]) -> str:
    """The `model-explorer` command line that opens the model with these overlays (as documented by
    Model Explorer: `model-explorer model.tflite --node_data_paths=a.json,b.json`), quoted for a POSIX
    shell. Model Explorer splits both on commas, so a path with a comma is refused."""
    paths = [str(model_file), *(str(p) for p in overlay_files)]
    bad = [p for p in paths if "," in p]
    if bad:
        raise ValueError(f"model-explorer splits paths on commas; cannot pass {bad[0]!r}")
    model_path = paths[0] if not paths[0].startswith("-") else f"./{paths[0]}"  # not an option
    command = f"model-explorer {shlex.quote(model_path)}"
    if overlay_files:
        command += " " + shlex.quote("--node_data_paths=" + ",".join(paths[1:]))
    return command


def write_variant_overlays(folder: Path, results: dict, layers: list) -> None:
    """Model Explorer overlays for each quantized variant in `results` (updated in place): one node-data file
    per metric, keyed by the op output tensor names of <variant>.tflite: SNR against float and SNR lost at
    each op for every variant, and the debugger's local and propagated RMSE/scale (`layers`) for FIQ.
    A failure costs the overlays only."""
    import dataclasses
    import traceback

    snr = Metric("snr_db", "SNR against float (dB)", higher_is_better=True)
    lost = Metric("snr_lost_db", "SNR lost at this op (dB)", higher_is_better=False)
    local = Metric("rmse_over_scale", "RMSE/scale (debugger, per layer)", higher_is_better=False)
    propagated = Metric("propagated_rmse_over_scale", "RMSE/scale accumulated from the input", higher_is_better=False)
    for name, v in list(results.items()):
        if name == variants.FLOAT or not v.ok:
            continue
        per_metric = {}
        errors = v.layer_errors
        if errors is not None and errors.layers:
            per_metric[snr] = {e.tensor_name: math.inf if e.snr_db is None else e.snr_db for e in errors.layers}
            per_metric[lost] = {e.tensor_name: e.snr_drop_db for e in errors.layers if e.snr_drop_db is not None}
        if name == variants.FIQ and layers:
            per_metric[local] = {layer.tensor_name: layer.rmse_over_scale for layer in layers}
            per_metric[propagated] = {layer.tensor_name: layer.propagated_rmse_over_scale for layer in layers
                                      if layer.propagated_rmse_over_scale is not None}
        if not per_metric:
            continue
        try:
            written = write_overlays(folder, (folder / f"{name}.tflite").read_bytes(), f"{name}.tflite", per_metric)
        except Exception:  # noqa: BLE001 - the report stands without its overlays
            traceback.print_exc()
            continue
        results[name] = dataclasses.replace(v, overlays=[p.name for p in written])
