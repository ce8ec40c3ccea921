"""The culprit rule: which op of a quantized model to blame for its error against float, and which layers to
try in float after it, from the comparison reporter.debug.layer_error measured (infinities and NaN kept).

One score ranks them all (`culprit_score`): the SNR an op loses, with SNRs capped at SNR_CEILING_DB (60 dB).
The culprit is the op that loses the most among the ops quantization changed; the layers to blame are the
culprit, then the other ops that lose SNR, most first.
"""

from __future__ import annotations

import math

from reporter.debug.layer_error import FLOAT_DTYPES, RawLayerError, RawLayerErrors

SNR_CEILING_DB = 60.0  # SNR treated as clean when ranking culprits: an error under 1/1000 of the signal's RMS


def culprit_score(e: RawLayerError) -> float | None:
    """The SNR this op loses, with both its input's and its output's SNR capped at SNR_CEILING_DB:
    min(input SNR, cap) - min(output SNR, cap), the input SNR being the lowest among its matched
    activation inputs (+inf, i.e. the cap, when they are exact or none is matched). +inf for an op whose
    output overflows (infinite error) from finite inputs. None when the op cannot be blamed: its output
    has no error, holds NaN, or its float tensor is all zero (no signal to lose; a small error there
    shows in the ops after it)."""
    if e.snr_db == math.inf or math.isnan(e.snr_db) or e.snr_drop_db is not None and math.isnan(e.snr_drop_db):
        return None
    if e.snr_drop_db is None or e.snr_drop_db == math.inf:
        inputs = math.inf
    else:
        inputs = e.snr_db + e.snr_drop_db
    if e.snr_db == -math.inf:
        overflow = not math.isfinite(e.mse) and inputs > -math.inf
        return math.inf if overflow else None
    return min(inputs, SNR_CEILING_DB) - min(e.snr_db, SNR_CEILING_DB)


def _quantized(e: RawLayerError) -> bool:
    """Whether quantization changed this op: an integer output, quantized weights, or error that starts
    here (a float op fed exact inputs computes exactly what float computes; this catches weights whose
    error could not be measured, e.g. blockwise ones)."""
    return e.quantized_dtype not in FLOAT_DTYPES or e.weight_snr_db is not None or e.snr_drop_db == math.inf


def _losing(c: RawLayerErrors) -> list[tuple[float, RawLayerError]]:
    """(score, op) of every op that loses SNR below the cap, in model order."""
    scored = [(culprit_score(e), e) for e in c.layers]
    return [(s, e) for s, e in scored if s is not None and s > 0]


def culprit(c: RawLayerErrors) -> RawLayerError | None:
    """The layer to blame: the op that loses the most SNR (`culprit_score`: snr_drop_db with both SNRs
    capped at SNR_CEILING_DB), among the ops that quantization changed (an integer output, quantized
    weights, or error that starts at the op; only if there are none, among all ops); ties go to the
    worse quantized weights (lower weight_snr_db), then to the earliest op. None when no op loses SNR
    below the cap (an exact model, or a float16 one whose error stays above 60 dB).

    Why capped: the first quantized op of a dynamic-range, weight-only or float16 model has exact inputs,
    so its snr_drop_db is +inf however small its error; uncapped, it would be blamed in every such model.
    With the cap it loses (60 dB - its SNR), comparable with the dB lost by ops further on, and an op
    whose output stays above 60 dB is never blamed. Float ops (a DRQ model's SOFTMAX, layers kept in
    float) only pass on the error they receive: keeping them in float changes nothing, so they are not
    blamed while a quantized op loses SNR."""
    scored = _losing(c)
    pool = [(s, e) for s, e in scored if _quantized(e)] or scored
    if not pool:
        return None
    return min(pool, key=lambda se: (-se[0], se[1].weight_snr_db if se[1].weight_snr_db is not None else math.inf,
                                     se[1].index))[1]


def blamed(c: RawLayerErrors, limit: int) -> list[str]:
    """The float model's names of the layers to try in float, most to blame first, at most `limit`: the
    culprit, then the ops that lose the most SNR (`culprit_score`, so blame and the culprit agree; ties go
    to the earlier op)."""
    first = culprit(c)
    losing = [e for _, e in sorted(_losing(c), key=lambda se: (-se[0], se[1].index))]
    return list(dict.fromkeys(e.float_tensor_name for e in ([first] if first is not None else []) + losing))[:limit]
