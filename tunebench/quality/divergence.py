"""How far a configuration's answers are from a reference's, and the figures the gate reads.

Two views of the same prompts:

- *the model* (teacher-forced): at every position of every prompt both configurations
  were shown the same text, so their next-token distributions are directly comparable.
  `top1_agreement` is the share of positions where their most likely token agrees;
  `mean_kl` (nats) is the mean KL divergence of the candidate's distribution from the
  reference's, both restricted to the reference's top-k tokens and renormalised, a token
  missing from the candidate's top-k getting the candidate's k-th logprob (the most it can
  have). With k = 5 it understates the full-vocabulary KL. This is the usual measure of
  what quantization does to a model.
- *the answers* (greedy generation): the two token sequences agree up to the first
  diverging position, after which their contexts differ. `exact_match` is the share of
  prompts answered identically token for token; `token_agreement` the mean share of the
  reference's tokens reproduced before the first divergence. This catches what the model
  view cannot: settings that change decoding, not the model (a generation-config
  override, a penalty, a broken speculative path).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from tunebench.quality.collect import Completion


@dataclass(frozen=True)
class FirstDifference:
    prompt_index: int
    prompt: str
    position: int
    reference: list[int]  # a few tokens from the diverging position on
    candidate: list[int]


@dataclass
class Divergence:
    prompts: int  # compared (both answered)
    exact_match: float
    token_agreement: float
    top1_agreement: float | None  # teacher-forced, over prompt positions
    mean_kl: float | None  # teacher-forced, over prompt positions
    # teacher-forced: mean lower bound of the total variation distance over both top-k lists
    mean_tv: float | None
    median_divergence: float | None  # position of the first differing token (diverged only)
    # over every prompt: the median share of the reference answer reproduced before the first
    # difference (1 for an identical answer); the mean (`token_agreement`) lets a few
    # identical answers hide that all the others part early
    median_agreement: float | None
    failed_requests: int  # the candidate's requests that failed
    first_difference: FirstDifference | None = None
    per_prompt: list[int | None] = field(default_factory=list)  # first differing position


def _divergence_at(a: list[int], b: list[int]) -> int | None:
    for position, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return position
    return None if len(a) == len(b) else min(len(a), len(b))


def _kl(reference: list[list[float]], candidate: list[list[float]]) -> float | None:
    if not reference or not candidate:
        return None
    ref = {int(t): lp for t, lp in reference}
    cand = {int(t): lp for t, lp in candidate}
    floor = min(cand.values())
    q_log = {t: cand.get(t, floor) for t in ref}
    p_norm = math.log(sum(math.exp(v) for v in ref.values()))
    q_norm = math.log(sum(math.exp(v) for v in q_log.values()))
    return max(
        0.0,
        sum(math.exp(lp - p_norm) * ((lp - p_norm) - (q_log[t] - q_norm)) for t, lp in ref.items()),
    )


def _total_variation(reference: list[list[float]], candidate: list[list[float]]) -> float | None:
    """A lower bound of the total variation distance between the two next-token
    distributions, from their top-k lists alone: over the union of both lists, a token
    missing from one side's list has there at most that side's k-th probability, and is
    given the value in [0, k-th] closest to the other side's (so the bound never
    overstates). Unlike `_kl`, which renormalises over the reference's top-k, it sees mass
    the candidate moved onto a token outside the reference's list."""
    if not reference or not candidate:
        return None
    ref = {int(t): math.exp(lp) for t, lp in reference}
    cand = {int(t): math.exp(lp) for t, lp in candidate}
    ref_cap, cand_cap = min(ref.values()), min(cand.values())
    total = 0.0
    for token in set(ref) | set(cand):
        p = ref.get(token)
        q = cand.get(token)
        if p is None:
            p = min(ref_cap, q or 0.0)
        if q is None:
            q = min(cand_cap, p)
        total += abs(p - q)
    return total / 2


def compare(reference: list[Completion], candidate: list[Completion]) -> Divergence:
    """The candidate's completions against the reference's, prompt by prompt (by index)."""
    by_index = {c.index: c for c in candidate}
    exact, agreement, kls, tvs, top1, diverged, per_prompt = [], [], [], [], [], [], []
    failed = sum(1 for c in candidate if c.error)
    first: FirstDifference | None = None
    for ref in reference:
        cand = by_index.get(ref.index)
        if ref.error or cand is None or cand.error or cand.prompt != ref.prompt:
            continue
        at = _divergence_at(ref.tokens, cand.tokens)
        per_prompt.append(at)
        exact.append(at is None)
        length = max(len(ref.tokens), 1)
        agreement.append((length if at is None else at) / length)
        for mine, theirs in zip(ref.prompt_top, cand.prompt_top):
            value = _kl(mine, theirs)
            if value is not None:
                kls.append(value)
                top1.append(int(mine[0][0]) == int(theirs[0][0]))
                tvs.append(_total_variation(mine, theirs))
        if at is not None:
            diverged.append(at)
            if first is None:
                first = FirstDifference(
                    ref.index, ref.prompt, at, ref.tokens[at : at + 5], cand.tokens[at : at + 5]
                )
    count = len(exact)

    def share(values: list[bool] | list[float]) -> float:
        return float(sum(values)) / count if count else 0.0

    return Divergence(
        prompts=count,
        exact_match=share(exact),
        token_agreement=share(agreement),
        top1_agreement=statistics.fmean(top1) if top1 else None,
        mean_kl=statistics.fmean(kls) if kls else None,
        mean_tv=statistics.fmean(tvs) if tvs else None,
        median_divergence=statistics.median(diverged) if diverged else None,
        median_agreement=statistics.median(agreement) if agreement else None,
        failed_requests=failed,
        first_difference=first,
        per_prompt=per_prompt,
    )
