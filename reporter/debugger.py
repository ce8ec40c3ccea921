"""The TFLite Quantization Debugger: per-layer error statistics and selectively quantized models."""

from __future__ import annotations

import io
import math
from typing import Callable

import numpy as np

from reporter.convert import configure, representative_dataset
from reporter.errors import QuantReportError
from reporter.report import LayerStat


def _debugger(make_converter: Callable, x_calib: np.ndarray, denylisted_nodes=None):
    import tensorflow as tf

    converter = configure(make_converter(), "fiq", x_calib)
    options = None
    if denylisted_nodes:
        options = tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=list(denylisted_nodes))
    return tf.lite.experimental.QuantizationDebugger(
        converter=converter, debug_dataset=representative_dataset(x_calib), debug_options=options
    )


def layer_statistics(make_converter: Callable, x_calib: np.ndarray) -> tuple[list[LayerStat], str]:
    """Runs the debugger on the FIQ conversion; returns one LayerStat per layer and the raw CSV."""
    import pandas as pd

    debugger = _debugger(make_converter, x_calib)
    debugger.run()
    buf = io.StringIO()
    debugger.layer_statistics_dump(buf)
    csv_text = buf.getvalue()
    frame = pd.read_csv(io.StringIO(csv_text))
    layers = []
    for i, row in enumerate(frame.itertuples(index=False)):
        scale = float(row.scale)
        mse = float(row.mean_squared_error)
        layers.append(
            LayerStat(
                index=i,
                op_name=str(row.op_name),
                tensor_name=str(row.tensor_name),
                tensor_idx=int(row.tensor_idx),
                num_elements=float(row.num_elements),
                stddev=float(row.stddev),
                mean_error=float(row.mean_error),
                max_abs_error=float(row.max_abs_error),
                mean_squared_error=mse,
                scale=scale,
                zero_point=int(row.zero_point),
                range=255.0 * scale,
                rmse_over_scale=math.sqrt(mse) / scale if scale > 0 else 0.0,
            )
        )
    return layers, _with_derived_columns(frame)


def _with_derived_columns(frame) -> str:
    """layer_stats.csv: every column of the debugger's dump plus range and rmse_over_scale."""
    frame = frame.copy()
    frame["range"] = 255.0 * frame["scale"]
    frame["rmse_over_scale"] = np.sqrt(frame["mean_squared_error"]) / frame["scale"]
    return frame.to_csv(index=False)


def selective_model(make_converter: Callable, x_calib: np.ndarray, denylisted_nodes: list[str], all_nodes) -> bytes:
    """The FIQ model with `denylisted_nodes` left in float."""
    if set(all_nodes) <= set(denylisted_nodes):
        raise QuantReportError(
            "every debugged layer is suspect, so nothing would stay quantized; the TF debugger refuses this"
            " ('Please check if the quantized model is in debug mode'): raise --suspect-threshold or lower"
            " --first-layers"
        )
    return bytes(_debugger(make_converter, x_calib, denylisted_nodes).get_nondebug_quantized_model())
