"""The integer-only repair ladder's rungs (issue 45) as plug-ins: one module per rung, each a
reporter.convert.rungs.base.Rung, and the one registry below listing them cheapest first (the order they are tried
and reported). Adding a rung is one module and one line here: `<module>.RUNG,`."""

from __future__ import annotations

import time
from typing import Iterator

from reporter.convert.rungs import (bias_correction, cross_layer_equalization, float_detection_outputs,
                                    host_normalization, int16x8, layernorm_without_neg, ranges, smoothquant,
                                    split_output_scale, static_batch1)
from reporter.convert.rungs.base import RepairCandidate, RepairOptions, Rung, RunVariants, Workspace, timed

REGISTRY: tuple[Rung, ...] = (
    static_batch1.RUNG,
    float_detection_outputs.RUNG,
    ranges.RUNG,
    split_output_scale.RUNG,
    bias_correction.RUNG,
    host_normalization.RUNG,
    layernorm_without_neg.RUNG,
    smoothquant.RUNG,
    cross_layer_equalization.RUNG,
    int16x8.RUNG,
)


def plan(target=None, options: RepairOptions = RepairOptions()) -> list[Rung]:
    """The rungs on the ladder for `target` (a reporter.core.targets.Target), in the order they are tried."""
    return [rung for rung in REGISTRY if rung.offered(target) and options.wants(rung.code)]


def candidates(float_model: bytes, x_calib, x_select, options: RepairOptions = RepairOptions(), target=None,
               run: RunVariants = RunVariants()) -> Iterator[RepairCandidate]:
    """The repair candidates of `plan(target, options)`, each built when asked for (stop iterating to build no more).

    `x_calib`, `x_select`: reporter.measure.signature.Inputs, a dict input name -> array, or the one array of a
    one-input model; `run`: the run's own variants (RunVariants). A rung that does not apply yields a candidate saying
    why; one that fails yields its error instead of raising."""
    data = Workspace(float_model, x_calib, x_select, options, run)
    ladder = plan(target, options)
    for k, rung in enumerate(ladder):
        if k == 1:  # the first rung missed: the later rungs start what another process can make meanwhile
            _prefetch(ladder[1:], data)
        started = time.perf_counter()
        try:
            why = rung.applies(data.float_model, data)
            if why is None:
                found = rung.build(data.float_model, data)
            else:
                found = RepairCandidate(rung.code, rung.label, detail=rung.measured(data.float_model, data),
                                        error=why, applies=False)
        except (ValueError, RuntimeError, KeyError, IndexError) as exc:
            line = (str(exc).strip().splitlines() or [""])[0]
            found = RepairCandidate(rung.code, rung.label, error=f"{type(exc).__name__}: {line}")
        yield timed(found, started)


def _prefetch(later: list, data: Workspace) -> None:
    """Each later rung's `prefetch` (where `data` has a process for it); one that fails only loses the head start."""
    if data.behind is None:
        return
    for rung in later:
        try:
            getattr(rung, "prefetch", lambda model, data: None)(data.float_model, data)
        except (ValueError, RuntimeError, KeyError, IndexError):
            import traceback

            traceback.print_exc()  # into run.log; the rung's own build says it again, in its place
