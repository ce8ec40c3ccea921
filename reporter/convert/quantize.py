"""Full-integer quantization from one calibration: the FIQ model, the debug models and every
selectively quantized candidate.

This is the only module that uses TensorFlow's private quantization API
(`converter._experimental_calibrate_only` and `tensorflow.lite.python.convert.mlir_quantize`), the
same calls the public QuantizationDebugger makes internally. Calibrating once and quantizing many
times turns each candidate of the search into milliseconds instead of a new conversion. If the
private API is missing (a TensorFlow release may move it), every model is built through the public
QuantizationDebugger instead, slower but equal, and `note` says so for the report.
"""

from __future__ import annotations

import difflib
import traceback
from typing import Callable, Iterable, Optional

import numpy as np

from reporter.convert import contained
from reporter.convert.converter import configure, positional_dataset, representative_dataset
from reporter.core import variants
from reporter.core.errors import QuantReportError

CALIBRATE_ONCE = "calibrate-once"
PUBLIC_DEBUGGER = "public-debugger"


def _private_mlir_quantize():
    """TensorFlow's private quantizer entry point; AttributeError or ImportError if it has moved."""
    from tensorflow.lite.python import convert as _convert

    return _convert.mlir_quantize


def quantize_calibrated(calibrated: bytes, nodes: list, ops: list) -> bytes:
    """The calibrated model quantized to FIQ with `nodes` (op outputs) and `ops` (op types) kept in float."""
    return bytes(_private_mlir_quantize()(calibrated, disable_per_channel=False, fully_quantize=False,
                                          denylisted_ops=ops or None, denylisted_nodes=nodes or None))


def debug_model_of(calibrated: bytes, whole_model: bool) -> bytes:
    """The debugger's model of the calibrated model: NumericVerify ops after each quantized op (`whole_model`: against
    a float copy of the whole model; else each op's float twin fed the quantized input)."""
    return bytes(_private_mlir_quantize()(calibrated, disable_per_channel=False, fully_quantize=False,
                                          enable_numeric_verify=True, enable_whole_model_verify=whole_model))


class UnknownNodeError(QuantReportError):
    """A name asked to stay in float matches no tensor of the model (TF would ignore it silently)."""


class FiqQuantizer:
    """Calibrates the model once, then quantizes it with any denylist.

    `quantize([])` is the FIQ model; `quantize(nodes, ops)` keeps those op outputs (tensor names, as
    the debugger's `tensor_name` column spells them) or op types in float.
    """

    converter = variants.TF

    def __init__(self, make_converter: Callable, x_calib: np.ndarray, force_public: bool = False,
                 float_model: Optional[bytes] = None, child: Optional[contained.Child] = None):
        self._make_converter = make_converter
        self._x_calib = x_calib
        self.float_model = float_model  # the float variant it calibrates from (None: through the converter)
        self.method = PUBLIC_DEBUGGER
        self.note = ""
        self.calibrated: Optional[bytes] = None
        self.calibrated_from = ""  # "float model" (no conversion of its own) or "converter"
        self._mlir_quantize = None
        self._child = child  # where the calibration runs (None: in this process); a crash there raises NativeCrash
        if not force_public:
            try:
                mlir_quantize = _private_mlir_quantize()
                self.calibrated = self._calibrate_float_model(float_model) if float_model is not None else None
                self.calibrated_from = "float model" if self.calibrated is not None else "converter"
                if self.calibrated is None:
                    converter = configure(make_converter(), variants.FIQ, x_calib)
                    if not hasattr(converter, "_experimental_calibrate_only"):
                        raise AttributeError("_experimental_calibrate_only")
                    converter.experimental_mlir_quantizer = True
                    converter._experimental_calibrate_only = True
                    self.calibrated = bytes(converter.convert())
                self._mlir_quantize = mlir_quantize
                self.method = CALIBRATE_ONCE
            except (ImportError, AttributeError) as exc:
                self.note = (
                    f"TensorFlow's private calibrate-once API is not available ({exc}); every quantized model"
                    " was built through the public QuantizationDebugger instead (same models, slower)."
                )
        if force_public and not self.note:
            self.note = "Built through the public QuantizationDebugger (calibrate-once switched off)."
        self._names: Optional[set] = None
        self._fiq: Optional[bytes] = None  # quantize() with nothing kept in float

    def _calibrate_float_model(self, float_model: bytes) -> Optional[bytes]:
        """What the converter's calibrate-only path does after its own float conversion (lite.py:
        `add_intermediate_tensors`, then `Calibrator.calibrate`), done on the float variant already
        converted: the same calibrated model (tested on every demo and test model, LSTM included)
        without a third conversion (3.5 s of a MobileNetV2's run). None if it fails: the caller
        then calibrates through the converter.

        In `child` (a contained.Child), when given: a native crash there raises contained.NativeCrash (the
        caller records FIQ as failed); an ordinary error there falls back as above (its traceback is in run.log).
        """
        try:
            if self._child is not None:
                return bytes(self._child.call(contained.CALIBRATE, contained.calibrate, bytes(float_model),
                                              self._x_calib))
            return contained.calibrate(float_model, self._x_calib)
        except contained.NativeCrash:
            raise
        except Exception:  # noqa: BLE001 - a private API that may move; the converter's path still works
            traceback.print_exc()  # into run.log
            return None

    @property
    def child(self) -> Optional[contained.Child]:
        """The contained child the calibration ran in (None: this process); the debugger runs there too."""
        return self._child if self._child is not None and self._child.crashed is None else None

    # --- models --------------------------------------------------------------------------------
    def quantize(self, denylisted_nodes: Iterable[str] = (), denylisted_ops: Iterable[str] = ()) -> bytes:
        """The FIQ model with the given op outputs and op types kept in float (FIQ itself built once: the measured
        variant and the search's first candidate are the same bytes)."""
        nodes, ops = list(denylisted_nodes), list(denylisted_ops)
        if not nodes and not ops and self._fiq is not None:
            return self._fiq
        self.check_nodes(nodes)
        if self._mlir_quantize is not None:
            built = quantize_calibrated(self.calibrated, nodes, ops)
        else:
            built = bytes(self._public_debugger(nodes, ops).get_nondebug_quantized_model())
        if not nodes and not ops:
            self._fiq = built
        return built

    def portable(self, denylisted_nodes: Iterable[str] = (), denylisted_ops: Iterable[str] = ()) -> Optional[tuple]:
        """`quantize(nodes, ops)` as (module-level function, arguments) that another process with TensorFlow can
        run and that gives the same bytes; None on the public debugger's path (its converter stays here)."""
        nodes, ops = list(denylisted_nodes), list(denylisted_ops)
        if self._mlir_quantize is None:
            return None
        self.check_nodes(nodes)
        return quantize_calibrated, (self.calibrated, nodes, ops)

    def portable_debug(self, whole_model: bool = False) -> Optional[tuple]:
        """`debug_model(whole_model)` as (module-level function, arguments) that another process with TensorFlow can
        run (the process that runs the view builds its model); None on the public debugger's path."""
        return (debug_model_of, (self.calibrated, whole_model)) if self._mlir_quantize is not None else None

    def debug_model(self, whole_model: bool = False) -> Optional[bytes]:
        """The model the QuantizationDebugger reads: NumericVerify ops after each quantized op.

        Per-layer (local) verify feeds each float twin the quantized input; whole-model verify runs a
        float copy of the model beside the quantized one, so errors accumulate. None when the
        whole-model view needs the private API and it is missing.
        """
        if self._mlir_quantize is not None:
            return debug_model_of(self.calibrated, whole_model)
        if whole_model:
            return None
        return bytes(self._public_debugger([], []).quant_model)

    def _public_debugger(self, nodes, ops):
        import tensorflow as tf

        converter = configure(self._make_converter(), variants.FIQ, self._x_calib)
        options = tf.lite.experimental.QuantizationDebugOptions(
            denylisted_nodes=nodes or None, denylisted_ops=ops or None)
        return tf.lite.experimental.QuantizationDebugger(
            converter=converter, debug_options=options,
            debug_dataset=positional_dataset(self._x_calib, self.float_model) if self.float_model is not None
            else representative_dataset(self._x_calib))

    # --- names ---------------------------------------------------------------------------------
    @property
    def tensor_names(self) -> set:
        """Every tensor name of the calibrated (float) model, where denylisted names must come from."""
        if self._names is None:
            from reporter.measure.structure import tensor_names

            model = self.calibrated if self.calibrated is not None else self.debug_model()
            self._names = set(tensor_names(model))
        return self._names

    def check_nodes(self, nodes: Iterable[str]):
        check_names(list(nodes), self.tensor_names)


def check_names(nodes: list, names: set):
    """Raises UnknownNodeError for a name that is no tensor of the model, with the closest names
    (TF and LiteRT Quantizer would silently ignore it)."""
    unknown = [n for n in nodes if n not in names]
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.5)
    hint = f"; closest: {', '.join(repr(c) for c in close)}" if close else ""
    more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
    raise UnknownNodeError(f"no tensor named {name!r} in the model{more}{hint}")
