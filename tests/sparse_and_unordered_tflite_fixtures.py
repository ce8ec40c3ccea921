"""Float .tflite files as the field ships them, round 3 (issue 46), for tests/test_sparse_weights_output_order_custom_objects.py.

Cached under `cache_root/issue46-tflite-vN/`:

* `ensure_sparse`: a digits conv model (conv 8, conv 16, dense 10) whose second conv kernel keeps 40 % of its
  1x4 blocks and whose dense kernel keeps 30 % of its values (pruned, then fine-tuned with the masks held),
  converted by TensorFlow's converter with `Optimize.EXPERIMENTAL_SPARSITY`: sparse32.tflite holds those two
  weights as sparse float32 tensors (SPARSE_CSR) behind DENSIFY ops (checked in the test). sparse16.tflite is
  the same file rewritten as MediaPipe ships its pose detector: the sparse values stored as float16, DENSIFY
  giving float16 and a DEQUANTIZE widening it to float32 before the op that reads it.
  data.npz: x, y (evaluation), x_calib.
* `ensure_two_outputs`: a digits model with two outputs (class softmax, and a 3-unit regression head),
  converted, its SignatureDef stripped and its subgraph outputs list reversed so that it is not in tensor-index
  order: two_out.tflite; data.npz with x, x_calib and y_<the class output's tensor name> (labels by output name).

The rewrites use tensorflow.lite.tools.flatbuffer_utils directly, none of quant-report's code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import model_fixtures as M

VERSION = 1


def _digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype(np.float32), y.astype(np.int64)


def _masks(model) -> list:
    """One 0/1 mask per kernel: the second conv's kernel (3, 3, 8, 16) keeps 40 % of its 1x4 blocks along the input
    channels (TFLite's OHWI layout: 1x4 blocks of its rows), the smallest zeroed; the dense kernel keeps its largest
    30 % of values, unstructured."""
    conv, dense = model.layers[1].get_weights()[0], model.layers[3].get_weights()[0]
    blocks = np.abs(conv.reshape(3, 3, 2, 4, 16)).sum(axis=3, keepdims=True)
    conv_mask = np.broadcast_to(blocks > np.quantile(blocks, 0.6), (3, 3, 2, 4, 16)).reshape(conv.shape)
    dense_mask = np.abs(dense) > np.quantile(np.abs(dense), 0.7)
    return [conv_mask.astype(np.float32), dense_mask.astype(np.float32)]


def _build_sparse(folder: Path):
    import keras
    import tensorflow as tf

    M.seed()
    x, y = _digits()
    x = x.reshape(-1, 8, 8, 1)
    x_tr, x_te, y_tr, y_te = M.split(x, y)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(8, 3, activation="relu"),
                              keras.layers.Conv2D(16, 3, activation="relu"), keras.layers.Flatten(),
                              keras.layers.Dense(10, activation="softmax")])
    M.train(model, x_tr, y_tr, "sparse_categorical_crossentropy", 1e-2, epochs=15)
    masks = _masks(model)

    def prune(*_, **__):
        for layer, mask in zip((model.layers[1], model.layers[3]), masks):
            kernel, bias = layer.get_weights()
            layer.set_weights([kernel * mask, bias])

    prune()
    model.fit(x_tr, y_tr, epochs=5, verbose=0, callbacks=[keras.callbacks.LambdaCallback(on_batch_end=prune)])
    prune()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    sparse32 = converter.convert()
    (folder / "sparse32.tflite").write_bytes(sparse32)
    (folder / "sparse16.tflite").write_bytes(as_float16_sparse(sparse32))
    np.savez(folder / "data.npz", x=x_te, y=y_te, x_calib=x_tr)


def as_float16_sparse(data: bytes) -> bytes:
    """Each sparse float32 constant's values stored as float16, its DENSIFY giving float16 and a new DEQUANTIZE
    op widening that to the float32 tensor the consumer reads (the layout of MediaPipe's sparse weights)."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils as fb

    model = fb.convert_bytearray_to_object(bytearray(data))
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.DEQUANTIZE
    code.version = 1
    model.operatorCodes.append(code)
    dequantize = len(model.operatorCodes) - 1
    sg = model.subgraphs[0]
    ops = []
    for op in sg.operators:
        ops.append(op)
        code = model.operatorCodes[op.opcodeIndex]
        if max(code.builtinCode, code.deprecatedBuiltinCode) != schema.BuiltinOperator.DENSIFY:
            continue
        source, dense = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
        buffer = model.buffers[source.buffer]
        values = np.frombuffer(bytes(bytearray(buffer.data)), "<f4").astype("<f2")
        buffer.data = np.frombuffer(values.tobytes(), np.uint8)
        source.type = schema.TensorType.FLOAT16
        half = schema.TensorT()
        half.name, half.shape, half.type, half.buffer = dense.name + b"_fp16", dense.shape, schema.TensorType.FLOAT16, 0
        sg.tensors.append(half)
        widen = schema.OperatorT()
        widen.opcodeIndex, widen.inputs, widen.outputs = dequantize, [len(sg.tensors) - 1], [op.outputs[0]]
        op.outputs = [len(sg.tensors) - 1]
        ops.append(widen)
    sg.operators = ops
    return bytes(fb.convert_object_to_bytearray(model))


def ensure_sparse(cache_root) -> Path:
    """The folder holding sparse32.tflite, sparse16.tflite and data.npz, built first if needed."""
    from reporter.pipeline.demo import cached

    final = Path(cache_root) / f"issue46-tflite-v{VERSION}" / "sparse_mlp"
    cached(final, lambda tmp: (_build_sparse(tmp), "ok\n")[1])
    return final


def _build_two_outputs(folder: Path):
    import keras
    import tensorflow as tf
    from tensorflow.lite.tools import flatbuffer_utils as fb

    M.seed()
    x, y = _digits()
    aux = np.stack([x[:, :32].mean(axis=1), x[:, 32:].mean(axis=1), x.std(axis=1)], axis=1).astype(np.float32)
    train, test, y_tr, y_te = M.split(np.arange(len(x)), y)
    x_tr, x_te = x[train], x[test]
    inp = keras.Input((64,))
    hidden = keras.layers.Dense(32, activation="relu")(inp)
    classes = keras.layers.Dense(10, activation="softmax", name="classes")(hidden)
    stats = keras.layers.Dense(3, name="stats")(hidden)
    model = keras.Model(inp, [classes, stats])
    model.compile(keras.optimizers.Adam(1e-2), ["sparse_categorical_crossentropy", "mse"])
    model.fit(x_tr, [y_tr, aux[train]], epochs=15, verbose=0)
    obj = fb.convert_bytearray_to_object(bytearray(tf.lite.TFLiteConverter.from_keras_model(model).convert()))
    obj.signatureDefs = None
    sg = obj.subgraphs[0]
    sg.outputs = sorted((int(i) for i in sg.outputs), reverse=True)  # not in tensor-index order
    (folder / "two_out.tflite").write_bytes(bytes(fb.convert_object_to_bytearray(obj)))
    classes_name = next(sg.tensors[i].name.decode() for i in sg.outputs if sg.tensors[i].shape[-1] == 10)
    np.savez(folder / "data.npz", x=x_te, x_calib=x_tr, **{f"y_{classes_name}": y_te})


def ensure_two_outputs(cache_root) -> Path:
    """The folder holding two_out.tflite and data.npz, built first if needed."""
    from reporter.pipeline.demo import cached

    final = Path(cache_root) / f"issue46-tflite-v{VERSION}" / "two_outputs"
    cached(final, lambda tmp: (_build_two_outputs(tmp), "ok\n")[1])
    return final
