"""The candidates checked where they ship (--target int8, micro, ethos-u*): each quantized model the target's
tensor-type rule admits is run on the target's kernels over the evaluation data (LiteRT's reference kernels, or
TFLite Micro's interpreter) and, for an Ethos-U NPU, compiled by Vela; its accuracy there is measured like its own
(paired with float's run) and kept in `VariantResult.on_target`. A tool that fails on a model is that model's
one-line finding; the run goes on."""

from __future__ import annotations

import dataclasses
import traceback
from typing import Optional

from reporter.core import targets, variants
from reporter.core.errors import one_line
from reporter.measure import evaluate, hardware
from reporter.measure.measurer import Measurer
from reporter.model.report import Recommendation, VariantResult
from reporter.model.variant import OnTarget
from reporter.run.context import RunContext


def check_all(ctx: RunContext, m: Measurer, results: dict[str, VariantResult],
              rec: Optional[Recommendation]) -> tuple[dict[str, VariantResult], Optional[Recommendation]]:
    """Every model measured (the variants, their fixes, the recommended model and its lighter schemes) checked on
    the run's target; unchanged for a target without kernels or a tool of its own."""
    target = targets.of(ctx.settings.target)
    if target.check == targets.NO_CHECK:
        return results, rec

    def one(v: Optional[VariantResult]) -> Optional[VariantResult]:
        if v is None or not v.ok or v.name == variants.FLOAT or not targets.quantized(v.tensor_types, v.weight_coverage):
            return v
        fits = target.runs(v.tensor_types, v.ops, v.op_tensor_types)
        if not fits and target.check != targets.VELA:  # Vela still compiles it: it names the ops it leaves on the CPU
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
    model = (ctx.folder / f"{v.name}.tflite").read_bytes()
    with ctx.progress.stage("on target", detail=v.name):
        try:
            if target.check == targets.MICRO:
                found = _micro(ctx, model)
                outputs, figures = found
                metrics, error = m.quality_on(v.name, outputs)
                on = OnTarget(target.name, target.kernels, True, metrics=metrics, output_error=error, micro=figures)
            else:
                outputs = evaluate.predict_all(model, ctx.data.x, reference=True)
                metrics, error = m.quality_on(v.name, outputs)
                on = OnTarget(target.name, target.kernels, True, metrics=metrics, output_error=error)
                if target.check == targets.VELA:
                    on = _vela(ctx, target, model, on, fits)
        except Exception as exc:  # noqa: BLE001 - the tool's failure is this model's finding
            traceback.print_exc()  # into run.log
            on = OnTarget(target.name, target.kernels, False,
                          error=str(exc) if isinstance(exc, RuntimeError) and str(exc) else one_line(exc))
    said = (f"runs on {target.tool}" if on.runs else f"does not run there: {on.error}")
    if on.vela is not None and on.runs:
        said = f"compiled by Vela: {on.vela.npu_ops} of {on.vela.npu_ops + on.vela.cpu_ops} ops on the NPU"
    ctx.progress.say(f"{v.name}: {said}")
    return on


def _micro(ctx: RunContext, model: bytes):
    """The model through TFLite Micro over the evaluation data, and its parity with LiteRT's reference kernels."""
    outputs, arena = hardware.micro_outputs(model, ctx.data.x, evaluate.signature(model))
    part = evaluate.as_inputs(ctx.data.x)[:targets.REFERENCE_SAMPLES]
    reference = evaluate.predict_all(model, part, reference=True)
    figures = hardware.micro_figures(len(next(iter(outputs.values()))), arena, reference,
                                     {k: v[:targets.REFERENCE_SAMPLES] for k, v in outputs.items()}, model)
    return outputs, dataclasses.replace(figures, reference_samples=len(next(iter(reference.values()))))


def _vela(ctx: RunContext, target: targets.Target, model: bytes, on: OnTarget, fits: bool) -> OnTarget:
    """Vela's compilation for the Ethos-U configuration. A model Vela cannot compile, one it puts no op of on the NPU,
    and one that is not integer-only (`fits`: its float ops stay on the CPU) do not run there, with the ops Vela
    leaves on the CPU named as Vela names them."""
    try:
        figures = hardware.vela(model, target.name, ctx.folder)
    except RuntimeError as exc:
        return dataclasses.replace(on, runs=False, error=one_line(exc))
    on = dataclasses.replace(on, vela=figures)
    if fits and figures.npu_ops:
        return on
    named = ", ".join(c.op for c in figures.cpu) or "none named"
    why = "float ops" if not fits else "Vela put no op on the NPU"
    return dataclasses.replace(on, runs=False, error=f"{why}: Vela leaves {figures.cpu_ops} of"
                                                    f" {figures.npu_ops + figures.cpu_ops} ops on the CPU ({named})")
