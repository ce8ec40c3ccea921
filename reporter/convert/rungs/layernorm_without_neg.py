"""Rung `layernorm_without_neg`: Keras 3's LayerNormalization exports the mean subtracted as x * g + NEG(mean) * g
(+ beta), and the int8 recipes leave that NEG in float (DEQUANTIZE -> NEG -> QUANTIZE). Each float NEG is folded into
the ADD its negated value reaches through MULs (the ADD becomes a SUB: a + (-v) * g = a - v * g), or else becomes a
MUL by -1; the rewrite, exact in float, is then quantized like static_batch1."""

from __future__ import annotations

from typing import Optional

import numpy as np

from reporter.convert.rungs.base import Plain, Workspace, candidate, exact
from reporter.measure import graph

ACTIVATIONS_OK = (0, 1)  # fused activation NONE, RELU


def _fold_neg(g: graph.Graph, n: int) -> str:
    """Removes NEG op `n` (its output read un-negated): the ADD its value reaches through single-consumer MULs becomes
    a SUB (or a SUB an ADD); else the NEG becomes a MUL by -1. Returns how, in words."""
    source, value = g.ins(n)[0], g.out(n)
    t, chain = value, []
    while len(g.consumers.get(t, [])) == 1 and t not in g.outputs():
        user, pos = g.consumers[t][0]
        kind = g.kind(user)
        if kind == "MUL":
            chain.append(user)
            t = g.out(user)
            continue
        if kind in ("ADD", "SUB") and (kind == "ADD" or pos == 1) and g.activation(user) in ACTIVATIONS_OK:
            a = g.ins(user)[1 - pos]
            flipped = "SUB" if kind == "ADD" else "ADD"
            activation = g.activation(user)
            g.set_op(user, flipped, f"{flipped[0]}{flipped[1:].lower()}Options", [a, t])
            g.set_option(user, "fusedActivationFunction", activation)
            for user_op, pos_in in g.consumers[value]:
                g.set_input(user_op, pos_in, source)
            g.remove_op(n)
            g.index()
            return f"NEG->{'MUL->' * len(chain)}{kind} as {flipped}"
        break
    g.set_op(n, "MUL", "MulOptions", [source, source])
    g.replace_input(n, 1, np.array([-1.0], np.float32), "/minus_one")
    g.index()
    return "NEG as MUL by -1"


def without_neg(float_model: bytes) -> tuple[bytes, list[str]]:
    """The float model with every NEG folded away (the same function in float), and how each went."""
    g = graph.Graph(float_model)
    done = []  # float NEGs only: an integer NEG (shape arithmetic) is no float island
    while True:
        negs = [n for n in range(len(g)) if g.kind(n) == "NEG" and g.is_float(g.out(n))]
        if not negs:
            break
        done.append(_fold_neg(g, negs[0]))
    return (g.bytes() if done else bytes(float_model)), done


def folded(data: Workspace) -> tuple[bytes, list[str]]:
    """`without_neg` of the workspace's float model, made once (SmoothQuant starts from it too)."""
    return data.once("without_neg", lambda: without_neg(data.float_model))


def folded_words(done: list[str]) -> str:
    return f"{len(done)} NEG op{'s' * (len(done) != 1)} folded"


class LayerNormWithoutNeg(Plain):
    code, label = "layernorm_without_neg", "LiteRT static int8, LayerNormalization without NEG"
    exact = True

    def applies(self, model: bytes, data: Workspace) -> Optional[str]:
        return None if folded(data)[1] else "no NEG in the model"

    def build(self, model: bytes, data: Workspace):
        rewritten, done = folded(data)
        kinds = sorted(set(done))
        error, words = exact(model, rewritten, data.select,
                             f"{folded_words(done)} ({'; '.join(f'{done.count(k)} {k}' for k in kinds)})")
        if error:
            return candidate(self, detail=words, error=error)
        return candidate(self, model=data.rewrite(rewritten).plain(), rewritten=rewritten,
                         detail=f"{words}; LiteRT static int8 (batch fixed to 1)")


RUNG = LayerNormWithoutNeg()
