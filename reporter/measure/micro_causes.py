"""Why TFLite Micro's outputs disagree with LiteRT's reference kernels' (reporter.model.hardware.MicroFigures keeps
the cause found): weight buffers stored after the flatbuffer, which TFLite Micro does not read, or else the first op
whose TFLite Micro kernel computes other values than the reference kernel on the same model and inputs."""

from __future__ import annotations

from typing import Callable

import numpy as np

from reporter.measure import graph, runtime
from reporter.measure.micro_child import measuring_arena
from reporter.model.hardware import FEW_STEPS

DIAGNOSED_SAMPLES = 8  # samples each op's outputs are compared on (every op's output kept: the arena grows)
ARENA_SLACK = 64 * 1024  # TFLite Micro's own records and alignment beside the tensors


def found(model: bytes, feeds: list, run: Callable[[bytes, list, int, int], dict]) -> dict:
    """The cause, as MicroFigures' fields: {"offset_buffers": n} when the file stores buffers after the flatbuffer;
    else the first op (execution order) whose output differs by more than FEW_STEPS quantization steps between
    TFLite Micro and the reference kernels on the first samples of `feeds` (one array per input, in the model's input
    order and dtype), {"kernel_op", "kernel_op_position", "kernel_op_steps"}; {} when no op does. `run` is TFLite
    Micro's run (reporter.measure.hardware.micro_raw: raw outputs in graph-output order, in an arena of the size
    given)."""
    stored_after = graph.offset_buffers(model)
    if stored_after:
        return {"offset_buffers": stored_after}
    probe, ops = graph.with_op_outputs(model)
    part = [np.asarray(f)[:DIAGNOSED_SAMPLES] for f in feeds]
    reference = _reference(probe, part, [t for _, t in ops])
    # every op's output kept to the end: room for all of them beside the arena models are measured in
    arena = measuring_arena(probe) + sum(r.nbytes // max(1, len(r)) for r in reference) + ARENA_SLACK
    micro = run(probe, part, len(ops), arena)["outputs"]
    for position, ((name, _), ours, ref) in enumerate(zip(ops, micro, reference), start=1):
        if not np.issubdtype(ref.dtype, np.integer) or not ref.size:  # steps of a quantized tensor only
            continue
        n = len(part[0]) if part else 1
        diff = np.abs(np.asarray(ours).reshape(n, -1).astype(np.int64) - ref.reshape(n, -1).astype(np.int64))
        steps = float(diff.max())
        if steps > FEW_STEPS:
            return {"kernel_op": name, "kernel_op_position": position, "kernel_op_steps": steps}
    return {}


def _reference(model: bytes, feeds: list, tensors: list[int]) -> list[np.ndarray]:
    """Each of `tensors` (raw, one row per sample) over the samples of `feeds`, one invoke per sample on LiteRT's
    reference kernels, variables reset between samples (as TFLite Micro's run resets them)."""
    it = runtime.load(model, reference=True)
    it.allocate_tensors()
    inputs = it.get_input_details()
    rows: dict[int, list] = {t: [] for t in tensors}
    for i in range(len(feeds[0]) if feeds else 0):
        it.reset_all_variables()
        for d, f in zip(inputs, feeds):
            it.set_tensor(d["index"], f[i:i + 1])
        it.invoke()
        for t in tensors:
            rows[t].append(np.array(it.get_tensor(t)))
    return [np.concatenate(rows[t]) if rows[t] else np.zeros((0,)) for t in tensors]
