"""Rung `float_detection_outputs`: LiteRT's static int8 of a detector (batch 1) with the QUANTIZE ops after its
postprocess (TFLite_Detection_PostProcess) removed, so its boxes, classes and scores stay float. LiteRT Quantizer
gives those int8 outputs their calibration ranges, which clip (class ids beyond the range read as the last one);
the postprocess runs on the host CPU in float anyway, so dropping the outputs' quantization is exact for the
network."""

from __future__ import annotations

from typing import Optional

from reporter.convert.rungs.base import Plain, Workspace, candidate
from reporter.measure import graph, structure


class FloatDetectionOutputs(Plain):
    code, label = "float_detection_outputs", "LiteRT static int8, float detection outputs"

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        if not structure.host_ops(model):
            return "the model has no detection postprocess (TFLite_Detection_PostProcess)"
        if not graph.output_quantize_count(data.base.plain()):
            return "LiteRT's static int8 leaves the postprocess outputs float already"
        return None

    def build(self, model: bytes, data: Workspace):
        plain = data.base.plain()
        dropped = graph.output_quantize_count(plain)
        return candidate(self, model=graph.without_output_quantize(plain), detail=(
            f"LiteRT's static int8 (batch 1, moving-average ranges) with the {dropped} QUANTIZE ops after the"
            " postprocess removed: its outputs stay float, unclipped"))


RUNG = FloatDetectionOutputs()
