"""The words of what the search measured beyond its compact sets on a large model: the chains of wide-range ops and
the regions along the graph's order it tried before calling FIQ's loss spread across the network, and what the best
of them won back (the record reporter.search.engine.look_beyond wrote; nothing is decided here)."""

from __future__ import annotations

from reporter.core import judgement as jd
from reporter.core.formatting import fmt_percent
from reporter.model.report import BeyondCompact, TriedSet

FOUND = ("chain", "region")  # outcomes where a set beyond the compact ones is kept
NOT_FOUND = ("spread", "unmeasured")  # outcomes where the search stopped with no layer kept


def beyond_text(beyond: BeyondCompact) -> str:
    """What the search measured before it would call FIQ's loss spread across the network, and what the best set
    beyond the compact ones won back, e.g. "No set of at most 13 ops (10 % of 135) reaches the target or wins back
    50 % of the way to it (9 measured); beyond them, keeping the first 34 ops in float cuts FIQ's error on the
    selection samples by 67 % but misses the target". No final full stop."""
    compact = (f"no set of at most {beyond.compact_limit} ops ({fmt_percent(jd.SPREAD_MAX_SHARE, 0)} of"
               f" {beyond.layers}) reaches the target or wins back {fmt_percent(jd.SPREAD_RECOVER_SHARE, 0)} of the"
               f" way to it ({beyond.compact_sets} measured)")
    best = beyond.best
    if beyond.outcome in FOUND and best is not None:
        verdict = "and meets the target" if best.meets_target else "but misses the target"
        return (f"{_capital(compact)}; beyond them, keeping {_tried_words(best)} in float cuts FIQ's error on the"
                f" selection samples by {fmt_percent(best.error_cut, 0)} {verdict}")
    if beyond.outcome == "unmeasured":
        return (f"{_capital(compact)}, and the search's budget ran out before the chains of wide-range ops and the"
                f" regions along the graph's order were measured ({beyond.chains} of {beyond.chains_found} chains,"
                f" {beyond.regions} regions): whether FIQ's loss is spread across the network was not measured")
    chains = ("the debugger shows no chain of wide-range ops" if not beyond.chains_found else
              f"nor do {_count(beyond.chains, 'chain')} of wide-range ops measured as units")
    regions = f"nor {_count(beyond.regions, 'region')} along the graph's order (the first or the last ops)"
    text = f"FIQ's loss is spread across the network: {compact}, {chains}, {regions}"
    if best is not None:
        text += (f"; the best of these, keeping {_tried_words(best)} in float, cuts FIQ's error on the selection"
                 f" samples by {fmt_percent(max(best.error_cut, 0.0), 0)}")
    return text


def _tried_words(tried: TriedSet) -> str:
    """A set measured beyond the compact ones: "the first 34 ops", "the chain of wide-range ops with their consumers
    (38 ops, … to …)"."""
    if tried.kind == "prefix":
        return f"the first {tried.ops} ops"
    if tried.kind == "suffix":
        return f"the last {tried.ops} ops"
    return (f"the chain of wide-range ops with their consumers ({tried.ops} ops, {_short(tried.first)} to"
            f" {_short(tried.last)})")


def _count(n: int, noun: str) -> str:
    return f"the one {noun}" if n == 1 else f"the {n} {noun}s"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _short(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else name[: limit // 2 - 1] + "…" + name[-(limit // 2):]
