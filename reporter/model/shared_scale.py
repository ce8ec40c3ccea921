"""One integer output shared by values of different ranges, as report.json stores it: the parts a CONCATENATION
joins into the output (a YOLO head's pixel boxes and sigmoid scores), each part's float range, and the share of
each part's values that the output's one scale rounds to zero."""

from __future__ import annotations

from dataclasses import dataclass, field

from reporter.model.bounds import COUNT, NON_NEGATIVE, SHARE, figure


@dataclass(frozen=True)
class ScalePart:
    """One part of a concatenated output: the float model's tensor its values come from (moved only by reshapes,
    transposes and concatenations on the way to the output), what it holds of the output and its float values on the
    evaluation data."""

    name: str  # the float model's tensor name (its first name where the converter joined several with ';')
    op: str  # the op that computes it ("LOGISTIC", "MUL"; "" for a constant or a model input)
    values: int = figure(COUNT)  # the output values per sample it holds
    low: float = 0.0  # its float values' smallest and largest on the evaluation data
    high: float = 0.0
    zero_share: float = figure(SHARE, 0.0)  # of its nonzero float values, the share the shared grid rounds to 0

    @property
    def span(self) -> float:
        return self.high - self.low


@dataclass(frozen=True)
class SharedScale:
    """An output made by an integer tensor (int8 or int16) whose values a CONCATENATION joins from parts: the one
    scale and zero point every part is quantized with (read from the variant's file), and the parts, in the order
    they appear in the concatenation."""

    concatenation: str  # the float model's CONCATENATION nearest the output (its output tensor's name)
    dtype: str  # "int8" or "int16"
    scale: float = figure(NON_NEGATIVE)
    zero_point: int = 0
    parts: list[ScalePart] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """The widest part's float span over the narrowest's (parts whose values never vary left out); 1 when
        fewer than two parts vary."""
        spans = [p.span for p in self.parts if p.span > 0]
        return max(spans) / min(spans) if len(spans) > 1 else 1.0


# The repair rung that builds the model with the parts quantized apart (reporter.convert.rungs.split_output_scale):
# its code in report.json's `repairs`, where the findings look for its measured model.
SPLIT_RUNG = "split_output_scale"
