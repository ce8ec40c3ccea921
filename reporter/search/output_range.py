"""A loss no float layer inside the model fixes: FIQ's output is an int8 tensor whose range, set by the
calibration data, cannot hold float's values on the evaluation data, so they clip. The fix is the output's own:
the op that makes it kept in float, so that its output is float, with no int8 range. Built from the one
calibration on either engine (TF's converter: that node denylisted, its output float as FIQ's are; LiteRT
Quantizer: a no_quantize entry for that op's scope and float graph outputs, since its FIQ recipe makes them int8),
checked float32 in the written file, and measured like every variant, so that the report can call it a fix only
when it measured one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from reporter.core import judgement as jd
from reporter.core import variants
from reporter.measure import evaluate

if TYPE_CHECKING:  # pragma: no cover
    from reporter.measure.measurer import Measurer
    from reporter.model.report import VariantResult
    from reporter.search.recommend import Quantizer


def clipped_keys(m: "Measurer", fiq: "VariantResult") -> list[str]:
    """The signature keys of FIQ's outputs that clip a notable share of float's values (judgement)."""
    notable = {name for name, c in fiq.clipped_outputs.items() if jd.clipping_notable(c.share)}
    if not m.heads:
        return sorted(notable)
    return sorted(h.key for h in m.heads if h.name in notable)


def output_float_fix(m: "Measurer", quantizer: "Quantizer", fiq: "VariantResult",
                     fiq_model: bytes) -> Optional["VariantResult"]:
    """FIQ with the ops that make its clipped outputs in float, measured; None when no output clips notably or
    the op making one cannot be told (a failed build is recorded as a failed variant, as for every variant)."""
    keys = clipped_keys(m, fiq)
    if not keys:
        return None
    float_model = _float_model(m, quantizer)
    nodes = []
    for key in keys:  # each clipped output's own op: never another output's
        node = output_node(quantizer, key, fiq_model, float_model)
        if node is None:
            return None
        if node not in nodes:
            nodes.append(node)

    def build() -> bytes:
        model = _quantized(quantizer, nodes)
        not_float = {key: dtype for key, dtype in output_dtypes(model).items() if key in keys and dtype != "float32"}
        if not_float:  # not what the variant is called: say so rather than measure it as the fix
            raise ValueError("the output op was kept in float but the output is not float32: "
                             + ", ".join(f"{k} {d}" for k, d in sorted(not_float.items())))
        return model

    return m.build_and_measure(variants.OUTPUT_FLOAT, build, quantizer.converter)


def output_node(quantizer: "Quantizer", key: str, fiq_model: bytes, float_model: Optional[bytes]) -> Optional[str]:
    """The name by which `quantizer` knows the op that makes output `key` (a signature key): the float model's
    output tensor (the quantizer calibrated that model), else the names FIQ's file gives it (the DEQUANTIZE's
    float output keeps the float model's name, then the integer tensor's); None when none is known."""
    names = [] if float_model is None else [_output_tensor(float_model, key)]
    names += evaluate.integer_output_names(fiq_model, [key])
    return next((n for n in names if n and _known(quantizer, n)), None)


def output_dtypes(model: bytes) -> dict[str, str]:
    """Each output's tensor type in the model's file, by signature key."""
    return {port.key: port.dtype for port in evaluate.signature(model).outputs}


def _output_tensor(model: bytes, key: str) -> Optional[str]:
    from reporter.measure import runtime

    port = next((p for p in evaluate.signature(model).outputs if p.key == key), None)
    if port is None:
        return None
    names = {t["index"]: t["name"] for t in runtime.load(model).get_tensor_details()}
    return names.get(port.index)


def _float_model(m: "Measurer", quantizer: "Quantizer") -> Optional[bytes]:
    """The float model the quantizer calibrated (its own, else the float variant's file)."""
    own = getattr(quantizer, "float_model", None)
    if own is not None:
        return bytes(own)
    path = m.folder / f"{variants.FLOAT}.tflite"
    return path.read_bytes() if path.is_file() else None


def _quantized(quantizer: "Quantizer", nodes: list[str]) -> bytes:
    """FIQ with `nodes` in float and its outputs float: TF's FIQ has float outputs already; LiteRT Quantizer's
    FIQ recipe quantizes the graph's outputs too, so they are kept float by a no_quantize entry of their own."""
    if quantizer.converter == variants.LITERT:
        from reporter.convert.litert import GRAPH_OUTPUTS

        return quantizer.quantize(nodes, (GRAPH_OUTPUTS,))
    return quantizer.quantize(nodes)


def _known(quantizer: "Quantizer", name: str) -> bool:
    """The quantizer can keep the op called `name` in float (its name is a tensor of the model it calibrated)."""
    from reporter.convert.quantize import UnknownNodeError

    try:
        quantizer.check_nodes([name])
    except UnknownNodeError:
        return False
    return True
