"""Model Explorer overlays (reporter.debug.overlays) on a real quantized model: the node-data files' format,
their keys against the model's ops and against the graph Model Explorer's own adapters build, the
colour direction, non-finite values and untrusted names.

The tests marked by `pytest.importorskip("model_explorer")` need the optional extra
(`pip install ai-edge-model-explorer`); the others check the same things by hand without it."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from reporter.debug import overlays
from reporter.debug.overlays import Metric

SNR = Metric("snr_db", "SNR (dB)", higher_is_better=True)
RMSE = Metric("rmse_over_scale", "RMSE / scale", higher_is_better=False)

# Model Explorer 0.1.34's node-data schema, read from model_explorer/node_data_builder.py
GRAPH_FIELDS = {"results", "name", "thresholds", "gradient", "hideInAggregatedStatsTable",
                "hideInChildrenStatsTable", "hideAggregatedStats", "showExpandedSummaryOnGroupNode",
                "showLabelCountColumnsInChildrenStatsTable"}
RESULT_FIELDS = {"value", "bgColor", "textColor"}
GRADIENT_FIELDS = {"stop", "bgColor", "textColor"}


# ---------------------------------------------------------------- models


@pytest.fixture(scope="module")
def models(mlp_files, tmp_path_factory):
    """{"float": bytes, "fiq": bytes} of the breast-cancer MLP, and the folder they are saved in."""
    import keras
    import tensorflow as tf

    keras_path, data_path = mlp_files
    x = np.load(data_path)["x_calib"].astype(np.float32)

    def convert(fiq: bool) -> bytes:
        converter = tf.lite.TFLiteConverter.from_keras_model(keras.models.load_model(keras_path))
        if fiq:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = lambda: ([x[i:i + 1]] for i in range(min(len(x), 64)))
        return converter.convert()

    folder = tmp_path_factory.mktemp("overlay_models")
    built = {"float": convert(False), "fiq": convert(True)}
    for name, model in built.items():
        (folder / f"{name}.tflite").write_bytes(model)
    return built, folder


def op_outputs(model: bytes) -> list[tuple[int, str, str]]:
    """(op index, op name, output tensor name) of the model's ops, as the interpreter lists them
    (quant-report keys its per-layer metrics on these names)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model)
    names = {t["index"]: t["name"] for t in it.get_tensor_details()}
    return [(op["index"], op["op_name"], names[t]) for op in it._get_ops_details() for t in op["outputs"] if t >= 0]


def metric_values(model: bytes, seed: int = 0) -> dict[str, float]:
    """A made-up value for every op output of the model, all different."""
    rng = np.random.default_rng(seed)
    return {name: float(v) for (_, _, name), v in zip(op_outputs(model), rng.uniform(1, 40, 10_000))}


def renamed(model: bytes, edit) -> bytes:
    """The model with edit(model_object) applied (subgraph names, signatures, tensor names)."""
    from tensorflow.lite.tools import flatbuffer_utils

    obj = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    edit(obj)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(obj))


def loop_model() -> bytes:
    """A float model with five subgraphs (main, a while's cond and body, an if's two branches)."""
    import tensorflow as tf

    class Loop(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        @tf.autograph.experimental.do_not_convert
        def f(self, x):
            _, y = tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, tf.nn.relu(x * 2.0 - 1.0)),
                                 [tf.constant(0), x])
            return tf.cond(tf.reduce_sum(y) > 0, lambda: y * 3.0, lambda: y - 1.0)

    m = Loop()
    return tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m).convert()


def all_op_outputs(model: bytes) -> dict[str, list[str]]:
    """{subgraph name: output tensor names of its ops}, read with TensorFlow's flatbuffer tools."""
    from tensorflow.lite.tools import flatbuffer_utils

    obj = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    return {(sg.name or b"").decode(): [sg.tensors[t].name.decode() for op in sg.operators for t in op.outputs]
            for sg in obj.subgraphs}


# ---------------------------------------------------------------- by hand (no model_explorer needed)


def check_schema(data: dict):
    """Model Explorer's ModelNodeData as JSON: {graph id: GraphNodeData}, numbers finite, by hand."""
    assert isinstance(data, dict) and data
    for graph_id, graph in data.items():
        assert isinstance(graph_id, str) and graph_id
        assert set(graph) <= GRAPH_FIELDS and "results" in graph, set(graph) - GRAPH_FIELDS
        assert isinstance(graph["results"], dict) and graph["results"]
        for key, result in graph["results"].items():
            assert isinstance(key, str) and key
            assert set(result) <= RESULT_FIELDS and "value" in result
            assert type(result["value"]) in (int, float) and math.isfinite(result["value"])
        stops = [g["stop"] for g in graph["gradient"]]
        assert 0 in stops and 1 in stops and all(0 <= s <= 1 for s in stops)  # "Stops for 0 and 1 should always be provided"
        for g in graph["gradient"]:
            assert set(g) <= GRADIENT_FIELDS and re.fullmatch(r"#[0-9a-f]{6}", g["bgColor"])
        assert set(graph.get("hideAggregatedStats", [])) <= {"min", "max", "sum", "avg"}
    # The web app takes a file whose "results" has no "results" of its own for one graph's data; ours
    # must read as {graph id: data}.
    assert not (data.get("results") is not None and data["results"].get("results") is None)


def strict_load(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON (JSON.parse refuses it)")

    return json.loads(text, parse_constant=refuse)


def gradient_colour(graph: dict, value: float) -> str:
    """The colour Model Explorer's web app gives a value: the value's place between the graph's smallest
    and largest value, interpolated between the stops (getColorFromGradient in web_app/main-*.js)."""
    values = [r["value"] for r in graph["results"].values()]
    lo, hi = min(values), max(values)
    at = (value - lo) / (hi - lo)
    stops = sorted(graph["gradient"], key=lambda g: g["stop"])
    for a, b in itertools.pairwise(stops):
        if a["stop"] <= at <= b["stop"]:
            f = (at - a["stop"]) / (b["stop"] - a["stop"])
            ca, cb = (tuple(int(c["bgColor"][i:i + 2], 16) for i in (1, 3, 5)) for c in (a, b))
            return "#" + "".join(f"{int(x + (y - x) * f):02x}" for x, y in zip(ca, cb))
    raise AssertionError("no stop")


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["float", "fiq"])
def test_every_op_output_is_a_key_and_every_key_an_op_output(models, variant):
    built, _ = models
    model = built[variant]
    values = metric_values(model)
    data = overlays.node_data(model, values, SNR)
    check_schema(data)
    assert list(data) == ["main"]  # the converter names subgraph 0 "main"; Model Explorer uses the name
    assert list(all_op_outputs(model)) == ["main"]
    results = data["main"]["results"]
    # Every key names the output tensor of exactly one op, and every op output of the model has its value.
    outputs = [name for _, _, name in op_outputs(model)]
    assert sorted(results) == sorted(outputs) and len(set(outputs)) == len(outputs)
    assert {k: r["value"] for k, r in results.items()} == values
    assert list(results) == outputs  # in op order
    assert overlays.adjustments(model, values) == {}
    assert any(";" in k for k in results)  # fused ops' names, e.g. .../MatMul;.../Relu;.../BiasAdd


@pytest.mark.slow
def test_written_file_is_strict_json_in_the_schema(models, tmp_path):
    built, _ = models
    model = built["fiq"]
    values = metric_values(model)
    paths = overlays.write_overlays(tmp_path, model, "fiq.tflite", {SNR: values, RMSE: values})
    assert [p.name for p in paths] == ["explorer_fiq_snr_db.json", "explorer_fiq_rmse_over_scale.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)  # no temporary left
    for path, metric in zip(paths, (SNR, RMSE)):
        data = strict_load(path.read_text(encoding="utf-8"))
        check_schema(data)
        assert data == overlays.node_data(model, values, metric)
        assert data["main"]["name"] == metric.label


@pytest.mark.slow
def test_colours_follow_the_metric_direction(models):
    built, _ = models
    model = built["fiq"]
    values = metric_values(model)
    best_snr, worst_snr = max(values, key=values.get), min(values, key=values.get)
    for metric, good, bad in ((SNR, best_snr, worst_snr), (RMSE, worst_snr, best_snr)):
        graph = overlays.node_data(model, values, metric)["main"]
        assert gradient_colour(graph, values[good]) == overlays.GREEN, metric
        assert gradient_colour(graph, values[bad]) == overlays.RED, metric
    # The same values, read the other way round: the largest is green for SNR and red for RMSE/scale.
    snr, rmse = (overlays.node_data(model, values, m)["main"]["gradient"] for m in (SNR, RMSE))
    assert [g["bgColor"] for g in snr] == [g["bgColor"] for g in reversed(rmse)]


@pytest.mark.slow
def test_non_finite_values_are_capped_or_left_out(models, tmp_path):
    built, _ = models
    model = built["fiq"]
    names = [name for _, _, name in op_outputs(model)]
    values = {name: float(i + 1) for i, name in enumerate(names)}
    values[names[0]], values[names[1]], values[names[2]] = math.inf, -math.inf, math.nan
    values["not/a/tensor"] = 5.0
    finite = [v for v in values.values() if math.isfinite(v)]

    results = overlays.node_data(model, values, SNR)["main"]["results"]
    assert results[names[0]]["value"] == max(finite)  # +inf: the best SNR's colour, a number it is at least
    assert results[names[1]]["value"] == min(finite)
    assert names[2] not in results and "not/a/tensor" not in results
    notes = overlays.adjustments(model, values)
    assert set(notes) == {names[0], names[1], names[2], "not/a/tensor"}
    assert "NaN" in notes[names[2]] and "shown as" in notes[names[0]] and "shown as" in notes[names[1]]

    (path,) = overlays.write_overlays(tmp_path, model, "fiq.tflite", {SNR: values})
    check_schema(strict_load(path.read_text()))

    # Nothing finite to cap at, nothing on a node: no results, and no file.
    nothing = {names[0]: math.inf, names[1]: math.nan, "elsewhere": 1.0}
    assert overlays.node_data(model, nothing, SNR) == {}
    assert overlays.write_overlays(tmp_path / "none", model, "fiq.tflite", {SNR: nothing}) == []
    with pytest.raises(ValueError):
        overlays.to_json({"main": {"results": {"x": {"value": math.nan}}}})


@pytest.mark.slow
def test_untrusted_names_stay_json_strings(models, tmp_path):
    built, _ = models
    hostile = '</script><img src=x onerror="alert(1)">\n\\u0000"; {}'
    first = op_outputs(built["fiq"])[0][2]

    def rename(obj):
        for t in obj.subgraphs[0].tensors:
            if t.name.decode() == first:
                t.name = hostile.encode()

    model = renamed(built["fiq"], rename)
    values = {hostile: 3.0, "x": 1.0}
    (path,) = overlays.write_overlays(tmp_path, model, "fiq.tflite", {SNR: values})
    text = path.read_text(encoding="utf-8")
    assert strict_load(text)["main"]["results"] == {hostile: {"value": 3.0}}
    # Names and keys in file names never come from the model.
    with pytest.raises(ValueError):
        Metric("../snr", "x", True)
    assert overlays.overlay_name("../../we ird<>.tflite", SNR) == "explorer_we_ird_snr_db.json"


@pytest.mark.slow
def test_subgraph_ids_and_ambiguous_names(models):
    built, _ = models
    model = loop_model()
    per_graph = all_op_outputs(model)
    assert len(per_graph) == 5 and next(iter(per_graph)) == "main"
    values = {name: float(i) for i, name in enumerate(n for names in per_graph.values() for n in names)}
    data = overlays.node_data(model, values, SNR)
    check_schema(data)
    assert set(data) == set(per_graph)
    for graph_id, names in per_graph.items():
        assert sorted(data[graph_id]["results"]) == sorted(set(names))

    # An unnamed subgraph takes its signature's key, else "main" (as Model Explorer's adapter names it).
    fiq = built["fiq"]
    unnamed = renamed(fiq, lambda o: setattr(o.subgraphs[0], "name", None))
    assert list(overlays.node_data(unnamed, metric_values(fiq), SNR)) == ["serving_default"]
    bare = renamed(unnamed, lambda o: setattr(o, "signatureDefs", []))
    assert list(overlays.node_data(bare, metric_values(fiq), SNR)) == ["main"]

    # Two tensors with one name: Model Explorer would colour only one of them, so neither is written.
    a, b = (name for _, _, name in op_outputs(fiq)[1:3])

    def clash(obj):
        for t in obj.subgraphs[0].tensors:
            if t.name.decode() == b:
                t.name = a.encode()

    clashing = renamed(fiq, clash)
    values = metric_values(fiq)
    assert a not in overlays.node_data(clashing, values, SNR)["main"]["results"]
    assert "more than one tensor" in overlays.adjustments(clashing, values)[a]


def test_explorer_command():
    assert overlays.explorer_command("fiq.tflite", ["explorer_fiq_snr_db.json", "explorer_fiq_rmse_over_scale.json"]) \
        == "model-explorer fiq.tflite --node_data_paths=explorer_fiq_snr_db.json,explorer_fiq_rmse_over_scale.json"
    assert shlex.split(overlays.explorer_command("my model.tflite", ["a b.json"])) \
        == ["model-explorer", "my model.tflite", "--node_data_paths=a b.json"]
    with pytest.raises(ValueError):
        overlays.explorer_command("a,b.tflite", [])


# ---------------------------------------------------------------- Model Explorer's own code


def adapter_graphs(path, mlir: bool = False) -> dict[str, dict]:
    """{graph id: graph} as Model Explorer's built-in TFLite adapter builds them (the flatbuffer one is
    the default for .tflite; the MLIR one is the alternative in its UI)."""
    adapter = pytest.importorskip("ai_edge_model_explorer_adapter")
    config = adapter.VisualizeConfig()
    text = (adapter.ConvertFlatbufferToJson(config, str(path), True) if mlir
            else adapter.ConvertFlatbufferDirectlyToJson(config, str(path)))
    (collection,) = json.loads(text)
    return {g["id"]: g for g in collection["subgraphs"]}


def tensor_to_node(graph: dict) -> dict[str, str]:
    """The web app's lookup of a node-data key: an op node's output tensor_name -> the node's id
    (genOutputTensorIdToNodeIdMap in web_app/main-*.js; a key found nowhere is taken as a node id)."""
    found = {}
    for node in graph["nodes"]:
        for out in node.get("outputsMetadata", []):
            for attr in out["attrs"]:
                if attr["key"] == "tensor_name":
                    found[attr["value"]] = node["id"]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["float", "fiq"])
def test_every_key_names_its_op_in_model_explorers_graph(models, variant):
    pytest.importorskip("model_explorer")
    built, folder = models
    model = built[variant]
    data = overlays.node_data(model, metric_values(model), SNR)
    ops = {name: (index, op_name) for index, op_name, name in op_outputs(model)}
    for mlir in (False, True):
        graphs = adapter_graphs(folder / f"{variant}.tflite", mlir)
        assert set(data) <= set(graphs)
        for graph_id, graph_data in data.items():
            graph = graphs[graph_id]
            lookup = tensor_to_node(graph)
            nodes = {n["id"]: n for n in graph["nodes"]}
            node_ids = [lookup[key] for key in graph_data["results"]]  # KeyError: a key that names no node
            assert len(set(node_ids)) == len(node_ids)
            for key, node_id in zip(graph_data["results"], node_ids):
                index, op_name = ops[key]
                assert nodes[node_id]["label"] == op_name.lower(), (key, nodes[node_id]["label"])
                if not mlir:  # the flatbuffer adapter numbers ops by their index in the model
                    assert node_id == str(index)


@pytest.mark.slow
def test_graph_ids_match_model_explorers_adapter(models, tmp_path):
    pytest.importorskip("model_explorer")
    built, _ = models
    fiq = built["fiq"]
    unnamed = renamed(fiq, lambda o: setattr(o.subgraphs[0], "name", None))
    cases = {"loop": loop_model(), "unnamed": unnamed,
             "bare": renamed(unnamed, lambda o: setattr(o, "signatureDefs", []))}
    for name, model in cases.items():
        path = tmp_path / f"{name}.tflite"
        path.write_bytes(model)
        graphs = adapter_graphs(path)  # the default adapter (the MLIR one crashes on unnamed subgraphs)
        values = {k: float(i) for i, k in enumerate(n for names in all_op_outputs(model).values() for n in names)}
        data = overlays.node_data(model, values, SNR)
        assert set(data) == set(graphs), name
        for graph_id, graph_data in data.items():
            lookup = tensor_to_node(graphs[graph_id])
            assert all(key in lookup for key in graph_data["results"]), (name, graph_id)


@pytest.mark.slow
def test_file_loads_in_model_explorers_classes(models, tmp_path):
    pytest.importorskip("model_explorer")
    import dacite
    from model_explorer import node_data_builder as ndb

    built, _ = models
    model = built["fiq"]
    values = metric_values(model)
    values[next(iter(values))] = math.inf
    for metric in (SNR, RMSE):
        (path,) = overlays.write_overlays(tmp_path, model, "fiq.tflite", {metric: values})
        on_disk = strict_load(path.read_text())
        loaded = ndb.ModelNodeData(graphsData={
            graph_id: dacite.from_dict(ndb.GraphNodeData, graph, config=dacite.Config(strict=True))
            for graph_id, graph in on_disk.items()})
        # Model Explorer's own writer gives back the same JSON, plus its defaults for the fields we leave out.
        defaults = dataclasses.asdict(ndb.GraphNodeData(results={}))
        for graph_id, graph in json.loads(loaded.to_json_string()).items():
            assert graph == {**{k: v for k, v in defaults.items() if v is not None}, **on_disk[graph_id]}
        # And the same data built with its classes from scratch is what we wrote.
        graph = on_disk["main"]
        built_by_it = ndb.ModelNodeData(graphsData={"main": ndb.GraphNodeData(
            name=metric.label,
            results={k: ndb.NodeDataResult(value=r["value"]) for k, r in graph["results"].items()},
            gradient=[ndb.GradientItem(stop=g["stop"], bgColor=g["bgColor"]) for g in graph["gradient"]],
            hideAggregatedStats=["sum"])})
        assert json.loads(built_by_it.to_json_string()) == json.loads(loaded.to_json_string())


@pytest.mark.slow
def test_command_line_is_model_explorers(models, tmp_path, monkeypatch):
    """The command, parsed by model-explorer's own argument parser and main(), opens the model with
    every overlay (the server start is replaced, so nothing listens)."""
    pytest.importorskip("model_explorer")
    built, folder = models
    paths = overlays.write_overlays(tmp_path, built["fiq"], "fiq.tflite",
                                    {SNR: metric_values(built["fiq"]), RMSE: metric_values(built["fiq"])})
    command = overlays.explorer_command(str(folder / "fiq.tflite"), [str(p) for p in paths])
    monkeypatch.setattr(sys, "argv", ["model-explorer"])  # model_explorer.cmdline parses argv on import
    from model_explorer import cmdline

    started = {}
    monkeypatch.setattr(cmdline.server, "start", lambda **kw: started.update(kw))
    argv = shlex.split(command)
    assert argv[0] == "model-explorer"
    cmdline.main(cmdline.parser.parse_args(argv[1:]))
    config = started["config"]
    assert [s["url"] for s in config.model_sources] == [str(folder / "fiq.tflite")]
    assert config.node_data_sources == [str(p) for p in paths]


WEB_APP_METHODS = ("getNodeDataProviderData", "processNodeDataProviderDataForGraph", "genOutputTensorIdToNodeIdMap",
                   "getBgColor", "getTextColor", "getColorFromGradient", "getRgbFromColor", "numToHex", "hexStrToInt")

HARNESS = """
const OP = "op";
const tt = (n) => n?.nodeType === OP;  // the bundle's "is an op node"
const $ = (a, b) => Object.assign(a, b || {});  // its object-spread helpers
const Qe = (a, b) => Object.assign(a, b);
const Ww = {};  // its colour names (we write hex colours)
class NodeData {
%s
}
const [graphs, fileText] = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = {};
for (const g of graphs) {
  // A graph as the web app holds it: output metadata as {output id: {attribute: value}}.
  const graph = {id: g.id, nodes: g.nodes.map((n) => ({id: n.id, nodeType: OP, outputsMetadata: Object.fromEntries(
      (n.outputsMetadata || []).map((o) => [o.id, Object.fromEntries(o.attrs.map((a) => [a.key, a.value]))]))}))};
  const it = new NodeData();
  const data = it.getNodeDataProviderData(fileText, graph);
  out[g.id] = data[g.id] ? it.processNodeDataProviderDataForGraph(graph, data) : null;
}
process.stdout.write(JSON.stringify(out));
"""


def web_app_harness(tmp_path) -> str:
    """A node.js script running the web app's own node-data code, cut from Model Explorer's bundle."""
    import shutil

    import model_explorer

    if shutil.which("node") is None:
        pytest.skip("no node.js to run Model Explorer's web app code")
    (bundle,) = (Path(model_explorer.__file__).parent / "web_app").glob("main-*.js")
    text = bundle.read_text(encoding="utf-8")
    methods = []
    for name in WEB_APP_METHODS:
        m = re.search(r"(?<![\w.])" + name + r"\([\w,=!]*\)\{", text)
        if m is None:
            pytest.skip(f"{name} is not in this Model Explorer's web app")
        depth = 0
        for end in range(m.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        methods.append(text[m.start():end + 1])
    path = tmp_path / "harness.js"
    path.write_text(HARNESS % "\n".join(methods), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_model_explorers_web_app_colours_each_op(models, tmp_path):
    """The overlay file and the adapter's graph through the web app's own code (the bundle's
    getNodeDataProviderData and processNodeDataProviderDataForGraph, run by node.js): every value lands
    on the node of the op that outputs the tensor, the best value green and the worst red."""
    import subprocess

    pytest.importorskip("model_explorer")
    harness = web_app_harness(tmp_path)
    built, folder = models
    model = built["fiq"]
    values = {name: float(index) for index, _, name in op_outputs(model)}  # op i has value i
    op_names = {index: op_name for index, op_name, _ in op_outputs(model)}
    ops = len(values)
    assert sorted(op_names) == list(range(ops))  # one output per op
    for metric in (SNR, RMSE):
        (path,) = overlays.write_overlays(tmp_path, model, "fiq.tflite", {metric: values})
        for mlir in (False, True):
            graphs = list(adapter_graphs(folder / "fiq.tflite", mlir).values())
            run = subprocess.run(["node", harness], input=json.dumps([graphs, path.read_text()]),
                                 capture_output=True, text=True, check=True)
            (coloured,) = [g for g in json.loads(run.stdout).values() if g]
            labels = {n["id"]: n["label"] for g in graphs for n in g["nodes"]}
            assert sorted(r["value"] for r in coloured.values()) == list(range(ops))
            for node_id, result in coloured.items():
                index = int(result["value"])
                assert labels[node_id] == op_names[index].lower()
                if not mlir:
                    assert node_id == str(index)
            by_value = {r["value"]: r["bgColor"] for r in coloured.values()}
            best, worst = (ops - 1, 0) if metric.higher_is_better else (0, ops - 1)
            assert (by_value[best], by_value[worst]) == (overlays.GREEN, overlays.RED), (metric, mlir)
