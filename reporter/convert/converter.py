"""Conversion: TensorFlow's converter set up for each quantization variant (the registry's TfSettings)."""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from reporter.core import variants
from reporter.core.variants import ALL_VARIANTS, TF

CONVERTER = TF


def representative_dataset(x_calib) -> Callable:
    """A generator factory that yields one sample at a time, as the converter expects: a list with the one
    array of a one-input model, or a dict keyed by signature input name (TensorFlow's recommended form:
    positional lists get the order of several inputs wrong)."""
    from reporter.measure.evaluate import as_inputs

    x = as_inputs(x_calib)
    single = x.single()

    def gen():
        for i in range(len(x)):
            yield [single[i : i + 1]] if single is not None else x.sample(i)

    return gen


def positional_dataset(x_calib, model: bytes) -> Callable:
    """A generator factory for the Quantization Debugger, which feeds inputs by position: each sample's arrays
    in the order of `model`'s input details, matched by name."""
    from reporter.measure.evaluate import positional

    arrays = positional(x_calib, model)

    def gen():
        for i in range(len(arrays[0])):
            yield [a[i : i + 1] for a in arrays]

    return gen


def from_saved_model(folder: str):
    """TensorFlow's converter for the SavedModel in `folder`, as `tf.lite.TFLiteConverter.from_saved_model(folder)`
    makes it, without the two whole `tf.saved_model.load` calls and the graph import that constructor and its
    `convert()` spend only on listing the signatures, reading the debug info and looking up the signature's tensors
    (an EfficientNet-B0's float conversion 5.6 s with TensorFlow's constructor, 2.2 s with this one).

    The signatures, the graph and the debug info are read from the folder's files instead, and the converter is
    TensorFlow's own SavedModel converter, so the bytes are the same (tested on every variant). A SavedModel whose
    signature TensorFlow would choose by its loaded objects (several signatures beyond a Keras export's `serve`)
    goes through TensorFlow's constructor as it is."""
    import tensorflow as tf

    fast = _saved_model_converter_class()
    key = _only_signature(folder) if fast is not None and tf.executing_eagerly() else None
    if key is None:
        return tf.lite.TFLiteConverter.from_saved_model(folder)
    from tensorflow.lite.python import lite

    # What from_saved_model records first: the model's origin, written into the converted model's metadata.
    origin = lite.conversion_metadata_fb.ModelType.TF_SAVED_MODEL
    lite.TFLiteConverterBase._set_original_model_type(origin)  # noqa: SLF001
    return fast(folder, {tf.saved_model.SERVING}, [key])


def _only_signature(folder: str):
    """The one signature TensorFlow's from_saved_model converts in `folder`, read from saved_model.pb: the only
    one, or a Keras export's "serving_default" (beside its "serve" endpoint); None when that needs the loaded
    objects to decide, or the file cannot be read (TensorFlow's own constructor then says why)."""
    from tensorflow.python.saved_model import constants, loader_impl

    try:
        proto = loader_impl.parse_saved_model(folder)
    except Exception:  # noqa: BLE001 - TensorFlow's constructor raises its own error for it
        return None
    graphs = [g for g in proto.meta_graphs if set(g.meta_info_def.tags) == {"serve"}]
    if len(graphs) != 1:
        return None
    keys = set(graphs[0].signature_def) - {constants.INIT_OP_SIGNATURE_KEY}  # not a signature when loaded
    if len(keys) == 1:
        return next(iter(keys))
    nodes = graphs[0].object_graph_def.nodes
    root = {c.local_name for c in nodes[0].children} if nodes else set()
    if keys == {"serve", "serving_default"} and "serve" in root and "_default_save_signature" not in root:
        return "serving_default"  # from_saved_model's rule for a `model.export` artifact
    return None


@functools.lru_cache(maxsize=None)
def _saved_model_converter_class():
    """TensorFlow's SavedModel converter with the graph and the debug info read from the folder's files (what its
    `convert()` imports and loads the whole SavedModel for); None if this TensorFlow lacks the parts it is made of."""
    try:
        from tensorflow.lite.python import lite

        base, wrap = lite.TFLiteSavedModelConverterV2, lite._export_metrics  # noqa: SLF001
        read, as_func, debug = (lite._parse_saved_model_with_debug_info, lite._convert_debug_info_func,  # noqa: SLF001
                                lite._get_debug_info)  # noqa: SLF001
    except (ImportError, AttributeError):
        return None

    class SavedModelConverter(base):
        @wrap
        def convert(self):
            if self.saved_model_dir is None or not self.experimental_new_converter:
                return base.convert.__wrapped__(self)  # TensorFlow's frozen-graph path, as it is
            # The graph as saved_model.pb holds it (what TensorFlow's `_load_saved_model` returns after importing it
            # into a Python graph only to look up the signature's tensors, which the conversion does not read).
            proto, debug_info = read(self.saved_model_dir)
            tags = set(self._saved_model_tags)
            graph_def = next(g for g in proto.meta_graphs if set(g.meta_info_def.tags) == tags).graph_def
            self._debug_info = debug(as_func(debug_info), graph_def)
            return self._convert_from_saved_model(graph_def)

    return SavedModelConverter


def configure(converter, variant: str, x_calib: np.ndarray):
    """Applies the settings that make `variant` (the registry's `TfSettings`) to a fresh converter and returns
    it; a calibrated variant is given `x_calib` as its representative data."""
    import tensorflow as tf

    known = variants.BY_NAME.get(variant)
    settings = known.tf if known is not None else None
    if settings is None:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(ALL_VARIANTS)}")
    if not settings.optimize:
        return converter
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if settings.supported_types:
        converter.target_spec.supported_types = [getattr(tf, t) for t in settings.supported_types]
    if known.calibrated:
        converter.representative_dataset = representative_dataset(x_calib)
    if settings.supported_ops:
        converter.target_spec.supported_ops = [getattr(tf.lite.OpsSet, o) for o in settings.supported_ops]
    if settings.io_type is not None:
        converter.inference_input_type = getattr(tf, settings.io_type)
        converter.inference_output_type = getattr(tf, settings.io_type)
    if not settings.per_channel:
        converter._experimental_disable_per_channel = True  # noqa: SLF001 - the converter's only per-tensor switch
    return converter


def convert(make_converter: Callable, variant: str, x_calib: np.ndarray) -> bytes:
    """Converts the model into `variant` and returns the TFLite flatbuffer."""
    return bytes(configure(make_converter(), variant, x_calib).convert())


def reproduction_code(denylisted_nodes: list[str], denylisted_ops: list[str] = (), calibration_samples: int = 0) -> str:
    """The Python a user runs to build the selectively quantized model themselves.

    It uses the public QuantizationDebugger; quant-report's calibrate-once path gives the same bytes
    for the same calibration samples (tested).
    """
    nodes = ",\n".join(f"        {n!r}" for n in denylisted_nodes)
    ops = ", ".join(repr(o) for o in denylisted_ops)
    calib = f"the same {calibration_samples} calibration samples" if calibration_samples else "calibration samples"
    return (
        "import tensorflow as tf\n"
        "\n"
        "converter = tf.lite.TFLiteConverter.from_keras_model(model)  # or .from_saved_model(path)\n"
        "converter.optimizations = [tf.lite.Optimize.DEFAULT]\n"
        f"converter.representative_dataset = representative_dataset  # yields [x[i:i+1]] over {calib}\n"
        "debug_options = tf.lite.experimental.QuantizationDebugOptions(\n"
        "    denylisted_nodes=[\n"
        f"{nodes}\n"
        "    ]"
        + (f",\n    denylisted_ops=[{ops}])\n" if denylisted_ops else ")\n")
        + "debugger = tf.lite.experimental.QuantizationDebugger(\n"
        "    converter=converter,\n"
        "    debug_dataset=representative_dataset,\n"
        "    debug_options=debug_options)\n"
        "selective_model = debugger.get_nondebug_quantized_model()\n"
        "open('selective.tflite', 'wb').write(selective_model)\n"
    )
