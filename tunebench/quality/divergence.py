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

The two views meet at near-ties. A configuration that perturbs the model a little (an fp8
KV cache) flips a greedy choice wherever the reference's top two tokens were almost tied,
and the answers then part early although nothing is wrong. `margin_noise` measures, from
the teacher-forced positions, how much the configuration moves the gap between the
reference's favourite and each other listed token (the 99th percentile of those changes);
a first difference where the reference preferred its token by no more than that is a
*near-tie*, explained by the measured perturbation, provided the candidate chose its own
most likely token there (greedy decoding always does; a penalty or bias does not, and the
server's logprobs are the model's, before them). `agreement_beyond_ties` (mean) and
`median_beyond_ties` count a near-tie prompt as agreeing; the gate reads them. A decoding
change is never a near-tie: alone it leaves the model view untouched (noise 0), and beside a
perturbation (an fp8 KV cache with a penalty) its partings are not its model's favourites.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

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
    # the 99th percentile of how much the configuration moved the reference's logprob gaps,
    # teacher-forced (nats; None without logprobs)
    failed_requests: int  # the candidate's requests that failed
    margin_noise: float | None = None
    near_ties: int = 0  # prompts whose first difference lies within margin_noise
    agreement_beyond_ties: float | None = None  # mean, a near-tie prompt counting as agreeing
    median_beyond_ties: float | None = None
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


def _gap_changes(reference: list[list[float]], candidate: list[list[float]]) -> list[float]:
    """|change| of the logprob gap between the reference's favourite and each other token
    that both top-k lists hold, at one teacher-forced position."""
    if not reference or not candidate:
        return []
    ref = {int(t): lp for t, lp in reference}
    cand = {int(t): lp for t, lp in candidate}
    top = int(reference[0][0])
    if top not in cand:
        return []
    return [abs((ref[top] - ref[t]) - (cand[top] - cand[t])) for t in ref if t != top and t in cand]


def _reference_margin(ref: Completion, at: int, other: int) -> float | None:
    """How much the reference preferred its own token over the candidate's at the first
    difference (nats, from its generated top-k); None when the candidate's token is not in
    its list (then the gap is at least the k-th's, not a tie by any measure we have)."""
    if at >= len(ref.top) or at >= len(ref.tokens):
        return None
    ranked = {int(t): lp for t, lp in ref.top[at]}
    mine, theirs = ranked.get(ref.tokens[at]), ranked.get(other)
    if mine is None or theirs is None:
        return None
    return mine - theirs


def _chose_its_favourite(cand: Completion, at: int) -> bool:
    """Did the candidate pick, at position `at`, the token its own model ranked first? Greedy
    decoding does, whatever perturbs the model; the server reports the model's logprobs
    before any penalty or bias, so a token ranked below its favourite was chosen by a
    decoding change (a penalty, a generation-config override), never by numerical noise.
    Unknown (no logprobs there) counts as no."""
    if at >= len(cand.tokens) or at >= len(cand.top) or not cand.top[at]:
        return False
    ranked = {int(t): lp for t, lp in cand.top[at]}
    chosen = ranked.get(cand.tokens[at])
    return chosen is not None and chosen >= max(ranked.values()) - 1e-6


def compare(reference: list[Completion], candidate: list[Completion]) -> Divergence:
    """The candidate's completions against the reference's, prompt by prompt (by index)."""
    by_index = {c.index: c for c in candidate}
    exact, agreement, kls, top1, diverged, per_prompt = [], [], [], [], [], []
    tvs: list[float] = []
    gap_changes: list[float] = []
    # per compared prompt: (its agreement's index, the reference, where they part, the
    # candidate's token there, whether that token was the candidate's own favourite)
    partings: list[tuple[int, Completion, int, int | None, bool]] = []
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
                # both lists are non-empty here (`_kl` read them), so the bound exists
                tv = _total_variation(mine, theirs)
                if tv is not None:
                    tvs.append(tv)
                gap_changes += _gap_changes(mine, theirs)
        if at is not None:
            diverged.append(at)
            other = cand.tokens[at] if at < len(cand.tokens) else None
            partings.append((len(agreement) - 1, ref, at, other, _chose_its_favourite(cand, at)))
            if first is None:
                first = FirstDifference(
                    ref.index, ref.prompt, at, ref.tokens[at : at + 5], cand.tokens[at : at + 5]
                )
    count = len(exact)
    noise = float(np.percentile(gap_changes, 99)) if gap_changes else None
    beyond = list(agreement)
    ties = 0
    for index, ref, at, other, favourite in partings:
        margin = None if other is None else _reference_margin(ref, at, other)
        if favourite and noise is not None and margin is not None and margin <= noise:
            beyond[index] = 1.0
            ties += 1

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
        margin_noise=noise,
        near_ties=ties,
        agreement_beyond_ties=share(beyond) if count else None,
        median_beyond_ties=statistics.median(beyond) if beyond else None,
    )
