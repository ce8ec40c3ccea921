"""A float .tflite as the field ships it, made into the model the rest of quant-report reads.

Three things a bundled .tflite (MediaPipe's, an old converter's) commonly has that stop the quantizers:

- no SignatureDef: LiteRT Quantizer and the calibration both need one; one is built from subgraph 0's inputs
  and outputs (key `serving_default`, each named by its tensor).
- sparse weights (TFLite's sparsity format: a constant with `sparsity` parameters, behind a DENSIFY op, or read
  sparse by FULLY_CONNECTED), as MediaPipe's pose detector ships 38 of its float16 weights: each is made dense by
  TFLite's own DENSIFY kernel (a one-op interpreter per model, so every format it reads, block maps and CSR
  segments alike, is read as LiteRT reads it); the DENSIFY output becomes that dense constant and the op goes.
  The model with them dense is run beside the given one on seeded random inputs and the largest output
  difference is said (0: identical).
- float16 weights behind DEQUANTIZE ops (a float16 export): each float16 constant is widened to float32 in
  place of the DEQUANTIZE output and the DEQUANTIZE op removed, so the model is the float model it computes
  (float16 -> float32 is exact).
- operator codes in the old field only (`deprecated_builtin_code`, `builtin_code` 0): LiteRT Quantizer reads
  `builtin_code` and sees every op as ADD; the code is copied into `builtin_code`.

`prepare(data)` returns the bytes to use and one sentence per change (empty when nothing changed: the bytes
are the given ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SIGNATURE_KEY = "serving_default"


@dataclass
class Prepared:
    data: bytes
    changes: list[str] = field(default_factory=list)  # what was changed, one sentence each


def prepare(data: bytes) -> Prepared:
    """The model with old op codes normalized, sparse constants made dense, float16 constants widened and a
    signature added, as needed (the edits are reporter.measure.graph_edits.fix_shipped's)."""
    from reporter.measure import graph_edits

    fixed = graph_edits.fix_shipped(data, SIGNATURE_KEY)
    changes = []
    if fixed.op_codes:
        changes.append(f"{fixed.op_codes} operator codes were stored in the old field only (deprecated_builtin_code);"
                       " copied to builtin_code so LiteRT Quantizer reads the ops")
    if fixed.densified:
        changes.append(_densified_sentence(fixed.densified, data, fixed.model))
    if fixed.widened:
        changes.append(f"{fixed.widened} float16 constants (behind DEQUANTIZE ops) widened to float32 and the"
                       " DEQUANTIZE ops removed: measured as the float model they compute")
    if fixed.signature:
        inputs, outputs = fixed.signature
        changes.append(f"the file has no signature; one was built from the graph's inputs"
                       f" ({', '.join(inputs)}) and outputs ({', '.join(outputs)})")
    return Prepared(fixed.model, changes)


PROOF_SAMPLES = 8  # seeded random samples the densified model is run on beside the given one
PROOF_SEED = 46


def _densified_sentence(names: list[str], given: bytes, dense: bytes) -> str:
    difference = output_difference(given, dense)
    proof = ("its outputs are identical to the given file's" if difference == 0.0 else
             f"largest output difference against the given file {difference:.3g}" if difference is not None else
             "its outputs could not be compared with the given file's (inputs that are not numbers)")
    return (f"{len(names)} sparse weights (TFLite sparsity, behind DENSIFY ops) made dense by TFLite's DENSIFY"
            f" kernel and the DENSIFY ops removed ({proof}: LiteRT, {PROOF_SAMPLES} seeded random samples):"
            f" {', '.join(names)}")


def output_difference(given: bytes, changed: bytes) -> "float | None":
    """The largest absolute difference between the outputs of two models with the same inputs and outputs, run
    by LiteRT on PROOF_SAMPLES seeded random samples (standard normal for float inputs, zeros for integer ones,
    dynamic dimensions as 1); None when an input is neither."""
    import numpy as np

    from reporter.measure import runtime

    runs = []
    for data in (given, changed):
        interpreter = runtime.load(data)
        rng = np.random.default_rng(PROOF_SEED)
        outputs = []
        for _ in range(PROOF_SAMPLES):
            for d in interpreter.get_input_details():
                shape = [max(1, int(s)) for s in d["shape_signature"]] if len(d["shape_signature"]) else []
                interpreter.resize_tensor_input(d["index"], shape)
            interpreter.allocate_tensors()
            for d in interpreter.get_input_details():
                if np.issubdtype(d["dtype"], np.floating):
                    interpreter.set_tensor(d["index"], rng.standard_normal(d["shape"]).astype(d["dtype"]))
                elif np.issubdtype(d["dtype"], np.integer) or d["dtype"] == np.bool_:
                    interpreter.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
                else:
                    return None
            interpreter.invoke()
            outputs += [interpreter.get_tensor(d["index"]).astype(np.float64) for d in interpreter.get_output_details()]
        runs.append(outputs)
    gaps = [np.where(np.isnan(a) & np.isnan(b), 0.0, np.abs(a - b)) for a, b in zip(*runs)]
    return max((float(np.max(g)) if g.size else 0.0 for g in gaps), default=0.0)
