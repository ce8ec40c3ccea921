"""Rung `split_output_scale`: LiteRT's static int8 (batch 1, the ranges the range rung chose) of a model whose output
a CONCATENATION joins from parts of different float ranges (a YOLO head's pixel boxes and sigmoid scores), with that
concatenation and the ops after it up to the output kept in float. Each part then keeps the int8 scale of its own
range and is dequantized before the concatenation, instead of all of them sharing the output's one scale, which
rounds the small-range part to a few codes (reporter.measure.shared_scale measures that). The output is float32.

Not integer-only: the concatenation runs in float where float ops run (a CPU, TFLite Micro), so integer-only
hardware cannot run this model (the target's check says so). There the same repair is the parts given outputs of
their own, each with its own scale, and joined by the host after the model, as a detector's postprocess is run on
the host."""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Plain, RepairCandidate, Workspace, samples
from reporter.convert.rungs.ranges import ranged
from reporter.core import judgement as jd
from reporter.core.formatting import fmt_number
from reporter.measure import graph, runtime, shared_scale
from reporter.model.shared_scale import SPLIT_RUNG


class SplitOutputScale(Plain):
    code, label = SPLIT_RUNG, ("LiteRT static int8, concatenated output parts quantized"
                                 " apart: the concatenation in float")

    def _found(self, data: Workspace) -> tuple[dict, dict]:
        """(the outputs of the batch-1 float model made by concatenations, by signature key; each one's ratio of
        its parts' widest float span to its narrowest on the selection samples), made once."""
        def make():
            joined = shared_scale.joined_outputs(data.base.batch1()[0])
            reference = data.reference()[0] if joined and samples(data.select) else {}
            ratios = {}
            for key, j in joined.items():
                if key in reference:
                    spans = [s for s in j.spans(reference[key]) if s > 0]
                    ratios[key] = max(spans) / min(spans) if len(spans) > 1 else 1.0
            return joined, ratios
        return data.once(self.code, make)

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        joined, ratios = self._found(data)
        if not joined:
            return "no output of the model is a CONCATENATION of parts"
        if not samples(data.select) or not ratios:
            return "no selection samples to measure the concatenated parts' ranges on"
        widest = max(ratios.values())
        if widest < jd.SHARED_SCALE_RATIO:
            return (f"the concatenated parts' float ranges differ at most {fmt_number(widest)}x on the selection"
                    f" samples (under {jd.SHARED_SCALE_RATIO:g}x): one scale fits them")
        return None

    def measured(self, model: bytes, data: Workspace) -> str:
        _, ratios = self._found(data)
        return ", ".join(f"output {key}: parts' ranges differ {fmt_number(r)}x" for key, r in sorted(ratios.items()))

    def build(self, model: bytes, data: Workspace) -> RepairCandidate:
        from reporter.convert.litert import GRAPH_OUTPUTS, LiteRtQuantizer

        joined, ratios = self._found(data)
        keys = sorted(key for key, r in ratios.items() if r >= jd.SHARED_SCALE_RATIO)
        nodes = list(dict.fromkeys(name for key in keys for name in joined[key].joining))
        _, calibration, words = ranged(data, data.base)
        batch1 = data.base.batch1()[0]
        built = LiteRtQuantizer(batch1, data.base.calib, calibration=lambda: calibration).quantize(
            nodes, (GRAPH_OUTPUTS,))
        scales, floats = _apart(built, set(nodes))
        error = runtime.loads_on_reference(built)
        if not error and not floats:
            error = "the concatenation was kept in float, but the model computes it in int8"
        if error:
            return RepairCandidate(self.code, self.label, error=error)
        said = "; ".join(f"output {key}: {len(joined[key].parts)} parts whose ranges differ {fmt_number(ratios[key])}x"
                         for key in keys)
        return RepairCandidate(self.code, self.label, model=built, detail=(
            f"{said}; the {len(nodes)} op{'s' * (len(nodes) != 1)} from the concatenation to the output kept in float,"
            f" each part dequantized with its own int8 scale ({', '.join(fmt_number(s) for s in scales)}) before it;"
            f" float output, runs where float ops run (not on integer-only hardware); {words}"))


def _apart(model: bytes, joining: set) -> tuple[list[float], bool]:
    """(the int8 scales of the tensors dequantized into the model's float concatenations named in `joining`, in
    order; whether some such concatenation computes in float)."""
    details = {d["index"]: d for d in runtime.load(model).get_tensor_details()}
    ops = graph.op_details(model)
    producer = {t: op for op in ops for t in op["outputs"] if t >= 0}
    scales, floats = [], False
    for op in ops:
        out = op["outputs"][0] if op["outputs"] else -1
        if op["op_name"] != shared_scale.JOIN or out < 0 or details[out]["name"] not in joining:
            continue
        if np.dtype(details[out]["dtype"]) != np.float32:
            continue
        floats = True
        for t in op["inputs"]:
            made = producer.get(t)
            if made is not None and made["op_name"] == "DEQUANTIZE":
                scale = float(details[made["inputs"][0]]["quantization"][0])
                if scale:
                    scales.append(scale)
    return scales, floats


RUNG = SplitOutputScale()
