"""The candidates checked where they ship (a --target with a check of its own: int8, micro, ethos-u*): each quantized
model is checked as its target's plug-in says (reporter.core.targets: its `check` runs the target tools of
reporter.measure.hardware: LiteRT's reference kernels, TFLite Micro's interpreter, Vela); its quality there is read
from every output the target's run gives exactly as its own run reads its outputs (reporter.measure.measurer: the
task's metrics, the main or the user's metric, the error against float and the targets, every output of several),
paired with float's run, and kept in `VariantResult.on_target`. A tool that fails on a model
is that model's one-line finding; the run goes on."""

from __future__ import annotations

import dataclasses
import traceback
from typing import Optional

from reporter.core import targets, variants
from reporter.core.errors import one_line
from reporter.measure import hardware, structure
from reporter.measure.measurer import Measurer
from reporter.model.report import Recommendation, VariantResult
from reporter.model import hardware as hw
from reporter.model.variant import OnTarget
from reporter.pipeline.context import RunContext


def check_all(ctx: RunContext, m: Measurer, results: dict[str, VariantResult],
              rec: Optional[Recommendation]) -> tuple[dict[str, VariantResult], Optional[Recommendation]]:
    """Every model measured (the variants, their fixes, the recommended model and its lighter schemes) checked on
    the run's target; unchanged for a target without kernels or a tool of its own."""
    target = targets.of(ctx.settings.target)
    if not target.checked:
        return results, rec

    def one(v: Optional[VariantResult]) -> Optional[VariantResult]:
        if v is None or not v.ok or v.name == variants.FLOAT or not targets.quantized(v.tensor_types, v.weight_coverage):
            return v
        fits = target.runs(v.tensor_types, v.ops, v.op_tensor_types)
        if not target.checks(fits):
            return v
        return dataclasses.replace(v, on_target=_check(ctx, m, target, v, fits))

    checked = {}
    for name, v in results.items():
        v = one(v)
        if v.fix is not None and v.fix.model is not None:
            v = dataclasses.replace(v, fix=dataclasses.replace(v.fix, model=one(v.fix.model)))
        checked[name] = v
    if rec is not None:
        rec = dataclasses.replace(rec, selective=one(rec.selective), alternatives=[
            dataclasses.replace(a, model=one(a.model)) for a in rec.alternatives])
    return checked, rec


def _check(ctx: RunContext, m: Measurer, target: targets.Target, v: VariantResult, fits: bool) -> OnTarget:
    """`v` checked as its target's check says, its accuracy on the target's kernels measured like its own."""
    model = (ctx.folder / f"{v.name}.tflite").read_bytes()
    host = structure.host_ops(model) if target.integer_hardware else {}  # what the host CPU runs beside the target
    with ctx.progress.stage("on target", detail=v.name):
        try:
            tools = hardware.Tools.of(ctx.settings)  # the device as the user gave it
            found = target.check.run(model, fits, ctx.data.x, tools, ctx.folder)
            q = m.quality_on(v.name, found.outputs)
            failed = "; ".join(f"{measurement} not measured there: {why}" for measurement, why in q.errors.items())
            on = OnTarget(target.name, target.kernels, found.runs, error=found.error or failed, metrics=q.metrics,
                          output_error=q.output_error, target_error=q.target_error, heads=q.heads, host_ops=host,
                          tools=hw.ToolFigures({target.check.key: found.figures} if found.figures is not None else {}))
        except RuntimeError as exc:  # the runtime's or compiler's own reason (the target tools raise it so)
            traceback.print_exc()  # into run.log
            on = OnTarget(target.name, target.kernels, False, error=str(exc) or one_line(exc), host_ops=host)
        except Exception as exc:  # noqa: BLE001 - quant-report's own failure: the model is not checked there
            traceback.print_exc()  # into run.log
            said = one_line(exc)
            on = OnTarget(target.name, target.kernels, False, error=f"quant-report failed checking it: {said}",
                          host_ops=host, tool_failure=said)
    ctx.progress.say(f"{v.name}: {target.check.said(on)}")
    return on
