"""The TFLite Quantization Debugger: per-layer error statistics, in two views.

Local (per-layer verify): each quantized op's float twin gets the same quantized input, so the error
is what that op makes. Propagated (whole-model verify): a float copy of the model runs beside the
quantized one, so the error is what has piled up by that op. Both debug models come from the one
calibration in `reporter.convert.quantize`.
"""

from __future__ import annotations

import io
import math
import traceback
from typing import Callable, NamedTuple, Optional

import numpy as np

from reporter.convert import contained
from reporter.convert.converter import positional_dataset
from reporter.convert.quantize import FiqQuantizer
from reporter.model.report import LayerStat, VariantResult


def _statistics(debug_model: bytes, x_calib: np.ndarray, child: Optional[contained.Child] = None):
    """The debugger's CSV dump of one debug model, as a pandas frame, from what this returns: run in `child` (a
    contained.Child) when given, started at once (what this returns waits for it), where a native crash raises
    contained.NativeCrash ("debugger crashed (SIGSEGV)") instead of ending the run."""
    import pandas as pd

    if child is not None:
        pending = child.submit(contained.DEBUG, _statistics_csv, bytes(debug_model), x_calib)
        return lambda: pd.read_csv(io.StringIO(pending()))
    text = _statistics_csv(debug_model, x_calib)
    return lambda: pd.read_csv(io.StringIO(text))


def _statistics_csv(debug_model: bytes, x_calib: np.ndarray) -> str:
    """The debugger's CSV dump of one debug model."""
    import tensorflow as tf

    debugger = tf.lite.experimental.QuantizationDebugger(
        quant_debug_model_content=debug_model, debug_dataset=positional_dataset(x_calib, debug_model))
    debugger.run()
    buf = io.StringIO()
    debugger.layer_statistics_dump(buf)
    return buf.getvalue()


def _built_statistics_csv(build: Callable, args: tuple, x_calib: np.ndarray) -> str:
    """The debugger's CSV dump of the debug model `build(*args)` makes, built where the view runs."""
    return _statistics_csv(build(*args), x_calib)


def _view(quantizer: FiqQuantizer, whole_model: bool, x_calib: np.ndarray, child: Optional[contained.Child],
          helper=None, build_here: bool = False):
    """One view's statistics (as `_statistics` returns them; None: the whole-model view cannot be had), its debug
    model built by the process that runs it (`helper`, else `child`) where the quantizer can hand its build over,
    unless `build_here`: the local view's model is built in the child while this process builds the whole-model
    view's (or the helper builds that one too)."""
    import pandas as pd

    job = quantizer.portable_debug(whole_model) if hasattr(quantizer, "portable_debug") else None
    if job is None or build_here or (helper is None and child is None):
        model = quantizer.debug_model(whole_model=whole_model)
        if model is None:
            return None
        return _statistics_beside(helper, model, x_calib, child) if helper is not None \
            else _statistics(model, x_calib, child)
    if helper is None:
        pending = child.submit(contained.DEBUG, _built_statistics_csv, *job, x_calib)
        return lambda: pd.read_csv(io.StringIO(pending()))
    running = helper.call(_built_statistics_csv, *job, x_calib)

    def frame():
        try:
            return pd.read_csv(io.StringIO(running.result()))
        except Exception:  # noqa: BLE001 - run again where it is contained; a genuine error is raised there
            traceback.print_exc()
            return _statistics(quantizer.debug_model(whole_model=whole_model), x_calib, child)()

    return frame


def _rmse_over_scale(mse: float, scale: float) -> float:
    return math.sqrt(mse) / scale if scale > 0 else 0.0


def _statistics_beside(helper, debug_model: bytes, x_calib: np.ndarray, child: Optional[contained.Child]):
    """`_statistics` run by `helper` (another process with TensorFlow whose `call(fn, *args)` gives a Future: the
    run's side process) while `child` runs the other view; when the helper fails (its traceback goes to run.log)
    the view runs in `child` after all, so a crash still names the debugger."""
    import pandas as pd

    pending = helper.call(_statistics_csv, bytes(debug_model), x_calib)

    def frame():
        try:
            return pd.read_csv(io.StringIO(pending.result()))
        except Exception:  # noqa: BLE001 - run again where it is contained; a genuine error is raised there
            traceback.print_exc()
            return _statistics(debug_model, x_calib, child)()

    return frame


class Beside(NamedTuple):
    """Where the whole-model view runs beside the local one: `helper`, another process with TensorFlow whose
    `call(fn, *args)` gives a Future (the run's side process; None: the quantizer's child runs both views, one after
    the other), and `started`, called once both views are under way (the helper's next work queues behind them);
    `views`: the two views started already (`start_views`), else started when the table is asked for."""

    helper: object = None
    started: Callable[[], None] = lambda: None
    views: Optional["Views"] = None


class Views(NamedTuple):
    """The two views under way: each gives its statistics frame when called (once run; the same frame again), the
    whole-model one None when it cannot be had."""

    local: Callable
    whole: Optional[Callable]


def start_views(quantizer: FiqQuantizer, x_calib: np.ndarray, helper=None) -> Views:
    """Starts both views (the local one in the quantizer's child, the whole-model one in `helper` when given, each
    building its own debug model): the run starts them once FIQ is measured, so that they run while it measures the
    layers' errors and blames them, and the debug stage finds them done."""
    child = getattr(quantizer, "child", None)
    local = _view(quantizer, False, x_calib, child)
    whole = _view(quantizer, True, x_calib, child, helper, build_here=helper is None)
    return Views(_once(local), _once(whole) if whole is not None else None)


def _once(frame: Callable) -> Callable:
    """`frame()` run once: later calls give its result (or raise its error) again."""
    done: list = []

    def result():
        if not done:
            try:
                done.append((True, frame()))
            except Exception as exc:  # noqa: BLE001 - raised again below, to each caller
                done.append((False, exc))
        ok, value = done[0]
        if ok:
            return value
        raise value

    return result


def layer_statistics(quantizer: FiqQuantizer, x_calib: np.ndarray,
                     beside: Beside = Beside()) -> tuple[list[LayerStat], str]:
    """One LayerStat per quantized layer (local and propagated error) and the CSV for layer_stats.csv. The two
    views run at once when `beside` has a helper: the local one in the quantizer's child, the whole-model one in the
    helper, each building its own debug model (each view invokes every calibration sample through its debug model:
    on EfficientNet-B0 a second each, and each debug model takes 0.2 s to build)."""
    local, whole = beside.views if beside.views is not None else start_views(quantizer, x_calib, beside.helper)
    beside.started()
    frame = local()
    propagated: dict[str, tuple[float, float]] = {}
    if whole is not None:
        for row in whole().itertuples(index=False):
            propagated[str(row.tensor_name)] = (float(row.mean_squared_error), float(row.scale))
    layers = []
    for i, row in enumerate(frame.itertuples(index=False)):
        scale, mse = float(row.scale), float(row.mean_squared_error)
        prop = propagated.get(str(row.tensor_name))
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
                rmse_over_scale=_rmse_over_scale(mse, scale),
                propagated_mean_squared_error=prop[0] if prop else None,
                propagated_rmse_over_scale=_rmse_over_scale(prop[0], scale) if prop else None,
            )
        )
    return layers, _csv(frame, propagated)


def _csv(frame, propagated: dict) -> str:
    """layer_stats.csv: every column of the debugger's dump, range, both rmse/scale views."""
    frame = frame.copy()
    frame["range"] = 255.0 * frame["scale"]
    frame["rmse_over_scale"] = np.sqrt(frame["mean_squared_error"]) / frame["scale"]
    if propagated:
        frame["propagated_mean_squared_error"] = [propagated.get(str(n), (np.nan, 0))[0] for n in frame["tensor_name"]]
        frame["propagated_rmse_over_scale"] = np.sqrt(frame["propagated_mean_squared_error"]) / frame["scale"]
    return frame.to_csv(index=False)


def check_not_everything(nodes: list[str], all_nodes: list[str]) -> Optional[str]:
    """Why a denylist cannot be built (every debugged layer in it), or None."""
    if all_nodes and set(all_nodes) <= set(nodes):
        return ("every debugged layer would stay in float, so nothing would stay quantized; the TF debugger"
                " refuses this ('Please check if the quantized model is in debug mode')")
    return None


def fiq_layers(quantizer, fiq: "VariantResult", folder, x_calib: np.ndarray, progress,
               beside: Beside = Beside()) -> list[LayerStat]:
    """The per-layer table of the FIQ model: the TFLite debugger's local and propagated error for a model of
    TF's converter (layer_stats.csv written into `folder`; `beside` as in layer_statistics), or for LiteRT
    Quantizer's FIQ, which that debugger cannot read, the comparison with float (reporter.debug.blame). Raises when
    neither can be had."""
    from reporter.convert import litert
    from reporter.debug.blame import layer_stats

    if quantizer.method == litert.METHOD:
        errors = fiq.layer_errors
        if errors is None or errors.error:
            raise RuntimeError(f"the per-layer comparison of FIQ with float failed: {errors.error if errors else 'not run'}")
        return layer_stats(errors, (folder / "fiq.tflite").read_bytes())
    with progress.stage("debug", "quantization debugger run on FIQ (local and propagated error)"):
        layers, csv_text = layer_statistics(quantizer, x_calib, beside)
        (folder / "layer_stats.csv").write_text(csv_text, encoding="utf-8")
    return layers
