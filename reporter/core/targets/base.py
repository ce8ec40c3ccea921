"""The target protocol: what every --target answers (what runs there, how accuracy is measured there, the cost, the
on-target record, the words); each family module registered in reporter.core.targets fills it in.

Pure: a check's running part is the target tools reporter.measure.hardware implements (`Tools`), handed in by the
run, so that findings and render read a target without TensorFlow and core imports nothing above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Protocol, Sequence

from reporter.core import judgement as jd
from reporter.core.targets.rules import anything, on_host

# Reference-kernel agreement: the evaluation samples a model is run on with both kernel sets (reference kernels are
# slow: a convolution runs without SIMD).
REFERENCE_SAMPLES = 256
REFERENCE_KERNELS, DEFAULT_KERNELS = "LiteRT's reference kernels", "LiteRT's default kernels"
COST_SAME = 0.1  # costs this close (a tenth of a doubling) are a tie: the more accurate model is preferred


class Tools(Protocol):
    """The target tools a check runs, each over the evaluation inputs `x` (reporter.measure.hardware's `Tools` is
    one: the run hands it in); a target with a tool of its own declares that tool's call in its module. Each raises
    RuntimeError with the tool's own reason when it cannot run the model."""

    def reference_outputs(self, model: bytes, x) -> dict:
        """The model's outputs on LiteRT's reference kernels, by signature key."""


@dataclass(frozen=True)
class Checked:
    """What a target's check found of one model: its outputs on the target's kernels (by signature key; its accuracy
    there is measured from them like its own), whether it runs there or why not in the tool's words, and the tool's
    figures as report.json keeps them (`OnTarget.tools[check.key]`)."""

    outputs: Mapping[str, object]
    runs: bool = True
    error: str = ""
    figures: Optional[object] = None  # the tool's figures record (registered in reporter.model.hardware)


@dataclass(frozen=True)
class Check:
    """How a target measures a model's accuracy where it ships, and what its tool decides. This one runs LiteRT's
    reference kernels (what microcontroller runtimes and many NPUs implement); a family with a tool of its own
    subclasses it."""

    kernels: str = REFERENCE_KERNELS  # what the accuracy is measured on, as OnTarget.kernels and the words say
    key: str = ""  # the tool's name: its figures' key in OnTarget.tools ("": no figures of its own)
    tool: str = "LiteRT's reference kernels"  # what checks it, as the report names it
    heading: str = ""  # the tool's column in the report's "On the target" table ("": no figures of its own)
    distributions: tuple = ()  # the tool's installed distributions, whose versions report.json records
    decides_runs: bool = False  # a model runs there only when the tool ran or compiled it
    checks_unfit: bool = False  # a model the target's tensor-type rule refuses is checked too

    def run(self, model: bytes, fits: bool, x, tools: Tools, workdir: Path) -> Checked:
        """The model (`fits`: its tensor types fit the target) checked over the evaluation inputs `x`."""
        return Checked(tools.reference_outputs(model, x))

    def figures(self, on) -> Optional[object]:
        """The tool's figures of a model checked (`on`, its OnTarget record), None when it has none."""
        return on.tools.get(self.key) if self.key and on is not None else None

    def prices(self, on) -> dict:
        """The figures the target prices a model by (Priced's own: none here), read from its OnTarget record."""
        return {}

    def said(self, on) -> str:
        """The progress line of a model checked (`on`, its OnTarget record): quant-report's own failure is no
        reason of the target's (the model was not checked there)."""
        if getattr(on, "tool_failure", ""):
            return f"not checked on {self.tool}: {on.error}"
        host = on_host(getattr(on, "host_ops", {}))
        return (f"runs on {self.tool}" + (f"; {host}" if host else "")) if on.runs else \
            f"does not run there: {on.error}"


REFERENCE = Check()


class Priced(Protocol):
    """What a target prices a model by (reporter.model.findings.Option)."""

    name: str
    size_bytes: int
    latency_ms: Optional[float]
    latency_p90_ms: Optional[float]


@dataclass(frozen=True)
class Target:
    """One place a model can ship to: what it runs (read from the measured model's tensor types and ops, then
    checked with the target's own kernels or tool where it has a `check`), what the decision weighs there (`costs`),
    and how the report names it."""

    name: str
    words: str  # in a sentence: "on a CPU"
    hardware: str  # after "Runs on" in a table header: "a CPU"
    runs: Callable[..., bool] = anything  # (tensor_types, ops, op_types): whether a model with these runs there
    runs_not: str = ""  # why a model that meets the accuracy target elsewhere does not run here
    adds: tuple = ()  # variants a run for this target builds besides those asked for
    timed: bool = True  # the latency measured here is the target's (a CPU's): it counts beside size
    check: Optional[Check] = None  # how accuracy is measured there; None: as measured (LiteRT's default kernels)
    reference_kernels: bool = False  # each candidate's default kernels are also compared with the reference ones
    integer_hardware: bool = False  # integer-only hardware: the repair ladder climbs when no model meets the target
    int16_activations: bool = False  # its tool runs 16x8 (int16 activations): the repair ladder's last rung tries it
    inline_buffers: bool = False  # its tool reads a buffer's bytes inline only: every model measured is written so
    static_batch: bool = False  # its runtime runs one sample at a time: a Keras model is converted with a batch of 1

    @property
    def checked(self) -> bool:
        """A quantized model's accuracy is the one measured there (its OnTarget record), not LiteRT's default
        kernels'."""
        return self.check is not None

    @property
    def kernels(self) -> str:
        return self.check.kernels if self.check is not None else DEFAULT_KERNELS

    @property
    def tool_says_runs(self) -> bool:
        """Whether a model runs here is a runtime's or compiler's of its own to say (TFLite Micro, Vela): a model it
        never ran is "not tried". The int8 target's spec is read from a model's tensor types, so every model has its
        answer."""
        return self.check is not None and self.check.kernels != REFERENCE_KERNELS

    @property
    def tool(self) -> str:
        return self.check.tool if self.check is not None else ""

    @property
    def tool_heading(self) -> str:
        return self.check.heading if self.check is not None else ""

    @property
    def distributions(self) -> tuple:
        return self.check.distributions if self.check is not None else ()

    @property
    def tool_decides(self) -> bool:
        """A model runs there only when the target's tool ran or compiled it (float, never checked, does not)."""
        return self.check is not None and self.check.decides_runs

    def prices(self, on) -> dict:
        """What a model checked here (`on`, its OnTarget record or None) is priced by beside its size and latency
        (Priced's tool figures), by field name."""
        return self.check.prices(on) if self.check is not None and on is not None else {}

    def checks(self, fits: bool) -> bool:
        """A quantized model whose tensor types fit the target (`fits`) or not is checked there."""
        return self.check is not None and (fits or self.check.checks_unfit)

    def why_not(self, tensor_types: Mapping[str, int], ops: Mapping[str, int] = {},  # noqa: B006 - read only
                op_types: Optional[Mapping[str, int]] = None) -> str:
        """"" when a model with these tensor types and ops runs there, else why not."""
        return "" if self.runs(tensor_types, ops, op_types) else (self.runs_not or "it does not run there")

    def costs(self, pool: Sequence[Priced]) -> dict[str, float]:
        """What each model of `pool` (each meets the accuracy target) costs here against the cheapest: size in
        doublings over the smallest and, where the target is timed, latency in doublings over the fastest when it
        is slower beyond timing noise (judgement.faster). Lower is better."""
        if not pool:
            return {}
        small = min(o.size_bytes for o in pool)
        timed = [o for o in pool if o.latency_ms]
        fastest = min(timed, key=lambda o: o.latency_ms) if len(timed) == len(pool) else None
        out = {}
        for o in pool:
            slower = o.latency_ms / fastest.latency_ms if fastest is not None and jd.faster(
                fastest.latency_ms, fastest.latency_p90_ms, o.latency_ms, o.latency_p90_ms) else None
            out[o.name] = self.cost(o.size_bytes / small, slower)
        return out

    def cost(self, size_ratio: float, slower_ratio: Optional[float]) -> float:
        """One model's cost: size in doublings over the smallest, plus latency in doublings over the fastest where
        the target is timed and it is slower beyond noise (`slower_ratio`; None when not)."""
        size = math.log2(max(size_ratio, 1.0))
        if not self.timed or not slower_ratio:
            return size
        return size + math.log2(max(slower_ratio, 1.0))
