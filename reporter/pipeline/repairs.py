"""The integer-only repair ladder (issue 45): for an integer-only target (int8, micro, ethos-u*) on which no
integer-only model meets the accuracy target, each rung reporter.convert.rungs builds (cheapest first) is measured
like every model (on the evaluation data, then on the target's kernels and tool: reporter.pipeline.on_target) and
becomes an option of the decision; the ladder stops at the first rung whose model meets the target (the one rule,
read from the decision's judged options). Every rung's outcome is kept in `Report.repairs`."""

from __future__ import annotations

import dataclasses
import time
import traceback

from reporter.core import targets, variants
from reporter.core.errors import one_line
from reporter.findings import decision as choice
from reporter.measure.measurer import Measurer
from reporter.model import repair as rp
from reporter.model.data import Inputs
from reporter.model.report import Report, VariantResult
from reporter.pipeline import on_target
from reporter.pipeline.context import RunContext
from reporter.search import recommend


def needed(report: Report) -> bool:
    """The run's target is integer-only hardware and no quantized model that runs there meets the accuracy target."""
    target = targets.of(report.settings.target)
    if not target.integer_hardware:
        return False
    found = choice.meets_on_target(report)
    return found is not None and not found.meets


def climb(ctx: RunContext, m: Measurer, report: Report) -> Report:
    """`report` with the ladder's rungs measured, up to the first whose model meets the accuracy target there."""
    if not needed(report):
        return report
    try:
        return _climb(ctx, m, report)
    except Exception as exc:  # noqa: BLE001 - the ladder adds options; its failure must not lose the report
        traceback.print_exc()
        ctx.progress.say(f"the repair ladder failed: {one_line(exc)}")
        return dataclasses.replace(report, repairs=[*report.repairs, rp.RepairRung(
            "ladder", "The integer-only repair ladder", rp.FAILED, error=one_line(exc))])


def _climb(ctx: RunContext, m: Measurer, report: Report) -> Report:
    sel = recommend.selection(ctx.data, ctx.settings.calibration_samples, ctx.settings.selection_samples,
                              m.task.classification)
    found: list[rp.RepairRung] = []
    stopped = False
    t0 = time.perf_counter()
    with ctx.progress.stage("repair", detail="integer-only ladder"):
        for candidate in _candidates(ctx, report, sel.x):
            rung = _measured(ctx, m, candidate)
            found.append(rung)
            report = dataclasses.replace(report, repairs=list(found))
            if rung.model is not None:
                option = _option(report, rung.model.name)
                met = option is not None and option.meets and option.runs
                found[-1] = dataclasses.replace(rung, status=rp.MEETS if met else (
                    rp.MISSES if option is None or option.runs else rp.NOT_ON_TARGET))
                report = dataclasses.replace(report, repairs=list(found))
                stopped = met
            ctx.progress.say(f"repair {candidate.rung}: {found[-1].status.replace('_', ' ')}"
                             + (f" ({found[-1].error})" if found[-1].error else ""))
            if stopped:  # the rungs after it are listed, never built
                tried = {r.rung for r in found}
                found += [rp.RepairRung(name, label, rp.NOT_TRIED) for name, label in _plan(report)
                          if name not in tried]
                report = dataclasses.replace(report, repairs=list(found))
                break
    seconds = time.perf_counter() - t0
    tried = sum(r.model is not None for r in found)
    ctx.progress.say(f"integer-only repair ladder: {tried} rung{'s' if tried != 1 else ''} built and measured"
                     f" ({seconds:.1f} s)")
    return dataclasses.replace(report, timings_s={**report.timings_s, "repair": round(seconds, 3)})


def _plan(report: Report) -> list[tuple[str, str]]:
    """Every rung of the ladder for this run's target, (code, label), in the order they are tried."""
    from reporter.convert import rungs

    return [(rung.code, rung.label) for rung in rungs.plan(targets.of(report.settings.target))]


def _candidates(ctx: RunContext, report: Report, x_select):
    """The ladder's rungs (reporter.convert.rungs.REGISTRY), cheapest first, each built when asked for; 16x8 builds
    the run's own variant (where the run measured it already, it says so)."""
    from reporter.convert import rungs

    measured = frozenset(v.name for v in report.variants)  # the run's own 16x8 is not built again
    yield from rungs.candidates(ctx.float_model, ctx.data.x_calib, x_select, target=targets.of(report.settings.target),
                                run=rungs.RunVariants(measured, ctx.litert_models.build))


def _option(report: Report, name: str):
    return choice.meets_on_target(report, name)


def _measured(ctx: RunContext, m: Measurer, candidate) -> rp.RepairRung:
    """The rung's model measured like every model, then checked on the target."""
    base = dict(rung=candidate.rung, label=candidate.label, detail=candidate.detail, seconds=candidate.seconds)
    if candidate.model is None:
        status = rp.FAILED if candidate.applies else rp.DOES_NOT_APPLY
        return rp.RepairRung(status=status, error=candidate.error, **base)
    transform = candidate.input_transform
    name = variants.repair(candidate.rung)
    try:
        measurer = _with_transform(m, transform)
        result: VariantResult = measurer.build_and_measure(name, lambda: candidate.model, variants.LITERT)
        if result.ok:
            checked, _ = on_target.check_all(dataclasses.replace(ctx, data=measurer.data), measurer,
                                             {name: result}, None)
            result = checked[name]
    except Exception as exc:  # noqa: BLE001 - one rung's failure is its finding, never the run's
        traceback.print_exc()
        return rp.RepairRung(status=rp.FAILED, error=one_line(exc), input_transform=transform, **base)
    if not result.ok:
        return rp.RepairRung(status=rp.FAILED, error=result.error or "", model=result, input_transform=transform,
                             **base)
    return rp.RepairRung(status=rp.MISSES, model=result, input_transform=transform, **base)


def _with_transform(m: Measurer, transform) -> Measurer:
    """The measurer reading the evaluation data as the host would feed it: standardized by `transform` (its outputs
    and float's stay shared, so the rung's model is paired with float's run on the same samples)."""
    if transform is None:
        return m
    x = m.data.x.arrays if hasattr(m.data.x, "arrays") else {"": m.data.x}
    return dataclasses.replace(m, data=dataclasses.replace(m.data, x=Inputs(transform.apply(x))))
