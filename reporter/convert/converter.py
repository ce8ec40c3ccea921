"""Conversion: TensorFlow's converter set up for each quantization variant (the registry's TfSettings)."""

from __future__ import annotations

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
