"""A Keras 3 recurrent model converted through its tf_keras twin.

Keras 3 LSTM/GRU/SimpleRNN layers do not convert to TFLite (TensorListReserve with a dynamic batch, a WHILE loop
over READ_VARIABLE with a fixed one); the same layers built with tf_keras and a fixed batch of 1 do (fused
UNIDIRECTIONAL_SEQUENCE_LSTM ops). The twin is built from the Keras 3 model's own layers (their configs, the
graph between them) for the standard layers below, its weights copied one layer at a time, and then proved on
the user's data (`prove`: the largest output difference against the Keras 3 model); a twin that differs is
refused, as is a model with a layer not listed here, in one line naming it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Optional

import numpy as np

SUPPORTED = (
    "InputLayer", "Embedding", "LSTM", "GRU", "SimpleRNN", "Bidirectional", "Dense", "Dropout", "Flatten",
    "GlobalAveragePooling1D", "GlobalMaxPooling1D", "Conv1D", "MaxPooling1D", "AveragePooling1D", "Activation",
    "Reshape", "Concatenate", "Add", "Multiply", "Average", "LayerNormalization", "BatchNormalization",
    "SpatialDropout1D", "GaussianNoise", "Masking", "TimeDistributed", "RepeatVector", "Permute",
)
RECURRENT = ("LSTM", "GRU", "SimpleRNN")
PROOF_SAMPLES = 64  # evaluation samples the twin is proved on
TOLERANCE = 1e-4  # largest output difference, relative to the largest output (at least 1), a twin may show
# Keys of a Keras 3 layer config that do not change what a layer computes from its weights, or that tf_keras
# spells differently: dropped (the weights are copied, so initializers, regularizers and constraints never run).
_DROPPED_SUFFIXES = ("_initializer", "_regularizer", "_constraint")
_DROPPED = {"dtype", "seed", "build_config", "quantization_config", "zero_output_for_mask", "use_cudnn",
            "lora_rank", "lora_alpha", "synchronized", "embeddings_lora_rank", "input_dim_lora", "sparse",
            "ragged", "batch_shape", "optional", "registered_name"}


class TwinError(Exception):
    """The twin cannot be built (a layer it does not know) or does not compute what the Keras 3 model does."""


@dataclass(frozen=True)
class TwinProof:
    """The largest absolute output difference between the twin and the Keras 3 model, on `samples` samples."""

    max_abs_difference: float
    samples: int


def recurrent_layers(model) -> list[str]:
    """The class names of the Keras 3 recurrent layers in `model` (a Bidirectional's wrapped layer included)."""
    import keras

    found = []
    for layer in _layers(model):
        if isinstance(layer, keras.layers.RNN):
            found.append(type(layer).__name__)
    return found


def _layers(layer):
    """Every layer inside `layer`, depth first, through the public attributes that hold layers: a model's or
    Sequential's `layers`, a wrapper's `layer` (TimeDistributed), a Bidirectional's `forward_layer` and
    `backward_layer`."""
    children = list(getattr(layer, "layers", None) or [])
    children += [getattr(layer, name, None) for name in ("layer", "forward_layer", "backward_layer")]
    seen = set()
    for child in children:
        if child is None or id(child) in seen or child is layer:
            continue
        seen.add(id(child))
        yield child
        yield from _layers(child)


def build_twin(model, shapes: Optional[dict] = None):
    """The tf_keras twin of the Keras 3 `model` with a batch of 1 and its weights; TwinError naming the layer
    when a layer is not one it knows. `shapes` (input name -> per-sample shape) fixes the dimensions the model
    leaves unknown (a sequence length), which the twin otherwise keeps unknown."""
    import tf_keras

    if type(model).__name__ == "Sequential":
        return _sequential(model, tf_keras, shapes or {})
    if type(model).__name__ in ("Functional", "Model") and hasattr(model, "get_config"):
        return _functional(model, tf_keras, shapes or {})
    raise TwinError(f"the model is a subclassed {type(model).__name__}, not a Sequential or functional model")


def unknown_dims(twin) -> bool:
    """Whether an input of the twin has a dimension of unknown size besides the batch (a sequence length)."""
    return any(d is None for t in twin.inputs for d in tuple(t.shape)[1:])


def data_shapes(model, x) -> dict:
    """The per-sample shape of each input of `model` in the data `x` (an array, or arrays by input name)."""
    names = _input_names(model)
    arrays = getattr(x, "arrays", x)
    if not isinstance(arrays, dict):
        return {names[0]: tuple(np.shape(arrays)[1:])} if len(names) == 1 else {}
    if len(arrays) == 1 and len(names) == 1:
        return {names[0]: tuple(np.shape(next(iter(arrays.values())))[1:])}
    return {name: tuple(np.shape(arrays[name])[1:]) for name in names if name in arrays}


def prove(original, twin, x) -> TwinProof:
    """Runs both on up to PROOF_SAMPLES samples of `x` (an array, or arrays by input name); TwinError when they
    differ by more than TOLERANCE."""
    n = min(PROOF_SAMPLES, _count(x))
    if n == 0:
        raise TwinError("no samples to prove it on")
    feed = _by_input(original, x, n)
    want = _outputs(original.predict(feed, batch_size=n, verbose=0))
    got = _outputs(twin.predict(feed, batch_size=1, verbose=0))
    if len(want) != len(got) or any(a.shape != b.shape for a, b in zip(want, got)):
        raise TwinError("its outputs are not shaped like the Keras 3 model's")
    diff = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) for a, b in zip(want, got))
    scale = max([1.0] + [float(np.max(np.abs(a))) for a in want if a.size])
    if not np.isfinite(diff) or diff > TOLERANCE * scale:
        raise TwinError(f"its outputs differ from the Keras 3 model's by up to {diff:.3g} on {n} samples")
    return TwinProof(diff, n)


# --- building ----------------------------------------------------------------------------------------------
def _sequential(model, tfk, shapes: dict):
    inputs = list(model.inputs)
    if len(inputs) != 1:
        raise TwinError("a Sequential model without one known input shape")
    inp = _input(tfk, inputs[0], getattr(inputs[0], "name", None), shapes)
    h, pairs = inp, []
    for layer in model.layers:
        if type(layer).__name__ == "InputLayer":
            continue
        twin_layer = _layer(layer, tfk)
        h = twin_layer(h)
        pairs.append((layer, twin_layer))
    twin = tfk.Model(inp, h, name=model.name)
    _copy_weights(pairs)
    return twin


def _functional(model, tfk, shapes: dict):
    config = model.get_config()
    tensors: dict = {}  # (layer name, node index, tensor index) -> tf_keras tensor
    pairs, made = [], {}
    for entry in config["layers"]:
        name, cls = entry["name"], entry["class_name"]
        layer = model.get_layer(name)
        if cls == "InputLayer":
            tensors[(name, 0, 0)] = _input(tfk, layer.output, name, shapes)
            continue
        twin_layer = made.get(name) or _layer(layer, tfk)
        if name not in made:
            made[name] = twin_layer
            pairs.append((layer, twin_layer))
        for node_index, node in enumerate(entry.get("inbound_nodes", [])):
            args = _resolve(node.get("args", []), tensors)
            kwargs = _resolve(node.get("kwargs", {}), tensors)
            out = twin_layer(*args, **kwargs)
            for i, t in enumerate(out if isinstance(out, (list, tuple)) else [out]):
                tensors[(name, node_index, i)] = t
    ins = [tensors[tuple(h)] for h in _histories(config["input_layers"])]
    outs = [tensors[tuple(h)] for h in _histories(config["output_layers"])]
    twin = tfk.Model(ins if len(ins) > 1 else ins[0], outs if len(outs) > 1 else outs[0], name=model.name)
    _copy_weights(pairs)
    return twin


def _histories(spec) -> list:
    """[[name, node, tensor], ...] from Keras 3's input_layers/output_layers (one triple for a single one)."""
    return [spec] if spec and isinstance(spec[0], str) else list(spec)


def _resolve(value, tensors):
    """A node's args/kwargs with every serialized Keras tensor replaced by the twin's tensor."""
    if isinstance(value, dict) and value.get("class_name") == "__keras_tensor__":
        return tensors[tuple(value["config"]["keras_history"])]
    if isinstance(value, dict):
        return {k: _resolve(v, tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_resolve(v, tensors) for v in value)
    return value


def _input(tfk, tensor, name: Optional[str], shapes: dict):
    shape = tuple(tensor.shape[1:])
    given = shapes.get(name)
    if given is not None and len(given) == len(shape):  # the data's size where the model leaves it unknown
        shape = tuple(g if d is None else d for d, g in zip(shape, given))
    return tfk.Input(shape, batch_size=1, dtype=str(getattr(tensor.dtype, "name", tensor.dtype)), name=name)


def _layer(layer, tfk):
    """The tf_keras layer computing what the Keras 3 `layer` does."""
    cls = type(layer).__name__
    if cls not in SUPPORTED:
        raise TwinError(f"layer {layer.name} ({cls}) is not one it can rebuild")
    config = layer.get_config()
    if cls == "Bidirectional":
        forward = _from_config(tfk, config["layer"]["class_name"], config["layer"]["config"], layer.name)
        backward = config.get("backward_layer")
        kwargs = {"merge_mode": config.get("merge_mode", "concat"), "name": layer.name}
        if backward:
            kwargs["backward_layer"] = _from_config(tfk, backward["class_name"], backward["config"], layer.name)
        return tfk.layers.Bidirectional(forward, **kwargs)
    if cls == "TimeDistributed":
        inner = config["layer"]
        return tfk.layers.TimeDistributed(_from_config(tfk, inner["class_name"], inner["config"], layer.name),
                                          name=layer.name)
    return _from_config(tfk, cls, config, layer.name)


def _from_config(tfk, cls: str, config: dict, where: str):
    if cls not in SUPPORTED or cls in ("Bidirectional", "TimeDistributed"):
        raise TwinError(f"layer {where} ({cls}) is not one it can rebuild")
    if config.get("stateful"):
        raise TwinError(f"layer {where} ({cls}) is stateful")
    target = getattr(tfk.layers, cls)
    accepted = set(inspect.signature(target.__init__).parameters) | {"name", "trainable"}
    kept = {}
    for key, value in config.items():
        if key in _DROPPED or key.endswith(_DROPPED_SUFFIXES):
            continue
        if key not in accepted:
            continue  # not a tf_keras argument: the proof on the data says whether it mattered
        if key.endswith("activation") and not isinstance(value, (str, type(None))):
            raise TwinError(f"layer {where} ({cls}) uses a custom activation")
        kept[key] = value
    try:
        return target(**kept)
    except Exception as exc:  # noqa: BLE001 - a config tf_keras does not read
        raise TwinError(f"layer {where} ({cls}) cannot be rebuilt: {str(exc).splitlines()[0] if str(exc) else exc}")


def _copy_weights(pairs) -> None:
    for layer, twin_layer in pairs:
        weights = layer.get_weights()
        expected = [tuple(w.shape) for w in twin_layer.get_weights()]
        if [tuple(w.shape) for w in weights] != expected:
            raise TwinError(f"layer {layer.name} ({type(layer).__name__}) holds weights shaped"
                            f" {[tuple(w.shape) for w in weights]}, its twin {expected}")
        twin_layer.set_weights(weights)


# --- proving -----------------------------------------------------------------------------------------------
def _count(x) -> int:
    return len(x) if not isinstance(x, dict) else len(next(iter(x.values()))) if x else 0


def _by_input(model, x, n: int):
    """The first `n` samples, as the model's input list (arrays by name, or one array)."""
    arrays = getattr(x, "arrays", x)  # reporter.model.data.Inputs holds its arrays by name
    if not isinstance(arrays, dict):
        return np.asarray(arrays[:n])
    names = _input_names(model)
    if len(arrays) == 1 and len(names) == 1:
        return np.asarray(next(iter(arrays.values()))[:n])
    missing = [name for name in names if name not in arrays]
    if missing:
        raise TwinError(f"the data have no input named {missing[0]}")
    return [np.asarray(arrays[name][:n]) for name in names]


def _input_names(model) -> list[str]:
    return [t.name.split(":")[0] for t in model.inputs]


def _outputs(result) -> list:
    if isinstance(result, dict):
        return [np.asarray(v) for v in result.values()]
    return [np.asarray(r) for r in (result if isinstance(result, (list, tuple)) else [result])]
