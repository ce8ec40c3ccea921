"""The run context: what the pipeline's stages read, typed and frozen, instead of long parameter lists.

`RunStart` is a run as it starts (its settings, folder, progress and side process); `RunContext` adds what the
run has read once its model and data are loaded: the float model, its signature, the data bound to it, the
task and the metrics. A stage that adds to the context (the calibration's quantizer) returns a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from reporter.convert.litert import LiteRtModels, LiteRtQuantizer
from reporter.convert.quantize import FiqQuantizer
from reporter.convert.contained import Background
from reporter.convert.side import SideConverter
from reporter.core import variants
from reporter.core.progress import Progress
from reporter.measure.measurer import HeadSpec
from reporter.measure.scoring import Score
from reporter.measure.signature import Signature
from reporter.measure.task import Task
from reporter.model.data import Dataset
from reporter.inputs.model_loading import LoadedModel
from reporter.inputs.settings import RunSettings
from reporter.inputs.task_reading import TaskReading

Quantizer = Union[FiqQuantizer, LiteRtQuantizer]  # builds FIQ with chosen layers in float from one calibration


@dataclass(frozen=True)
class RunStart:
    """A run as it starts, before its model is loaded."""

    settings: RunSettings
    folder: Path  # the staging folder the report is written into
    progress: Progress
    side: Optional[SideConverter]  # the second process converting beside this one (None: none)
    background: Optional[Background]  # work in the contained child the timing lock waits for (None: none)
    charts_ahead: dict  # per-layer charts a helper process draws before the report is done (render.formats.charts)

    @property
    def variants(self) -> tuple:
        """The variants to build (those --target adds too): float first, then the rest in the registry's order."""
        return variants.ordered(self.settings.built_variants)


@dataclass(frozen=True)
class RunContext(RunStart):
    """A run once its model and data are loaded: the float model converted, the data bound to its inputs,
    the primary output's labels read as its task says."""

    model: LoadedModel
    float_model: bytes
    signature: Signature
    data: Dataset
    reading: TaskReading  # the primary output's task, and why
    heads: tuple[HeadSpec, ...]  # a model with several outputs: each output's task and labels (else empty)
    score: Optional[Score]  # the main metric every verdict reads: the user's --metric, else the task's own
    task_score: Optional[Score]  # the task's own main metric (None: a regression), when the user's fails
    litert_models: LiteRtModels
    quantizer: Optional[Quantizer] = None  # set by the calibration (FIQ asked for and calibrated)
    base: Optional[tuple] = None  # --base-model: (LoadedModel, its float .tflite), checked before any other work

    @property
    def task(self) -> Task:
        return self.reading.task
