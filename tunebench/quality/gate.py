"""The quality gate: thresholds on a configuration's divergence from its reference.

A speculative configuration is held to its non-speculative twin: with greedy sampling
speculative decoding must not change a single token (`speculative_min_exact_match`, 1.0
by default). Every other configuration is held to the reference on the model
(`max_mean_kl`, `min_top1_agreement`) and on its answers (`min_token_agreement`, and
`min_exact_match` when set). Failed requests fail the gate: a configuration that cannot
answer is not fast.

The defaults are coarse, meant to catch a broken configuration, not to rank sound ones:
mean KL 0.1 nats and 90% top-1 agreement sit where weight quantization is known to have
degraded a model badly (8-bit formats typically measure KL near 0.001 and top-1 agreement
near 99%, 4-bit around 0.01-0.05 and 95%). The answer thresholds count a parting at a
near-tie as agreeing, and were chosen on the trained embedded model's real answers
(tests/fixtures/quality-cpu-trained, docs/quality.md): INT8, INT4, FP8 and an fp8 KV cache
agree beyond near-ties 0.89-1.00 (median 1.00), a planted repetition penalty 0.62 (median
0.73); 75% and a median of 90% sit between them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.quality.divergence import Divergence


@dataclass(frozen=True)
class Thresholds:
    max_mean_kl: float | None = 0.1
    max_mean_tv: float | None = 0.1
    min_top1_agreement: float | None = 0.9
    min_token_agreement: float | None = 0.75
    min_median_agreement: float | None = 0.9
    min_exact_match: float | None = None
    speculative_min_exact_match: float = 1.0


def judge(found: Divergence, thresholds: Thresholds, speculative: bool) -> list[str]:
    """Why the configuration fails the gate ([] when it passes)."""
    reasons: list[str] = []
    if found.failed_requests:
        reasons.append(f"{found.failed_requests} quality request(s) failed")
    if found.prompts == 0:
        return reasons + ["no prompt answered by both this configuration and its reference"]
    if speculative:
        if found.exact_match < thresholds.speculative_min_exact_match:
            diff = found.first_difference
            where = (
                f"; first difference: prompt {diff.prompt_index + 1} {diff.prompt[:40]!r} at "
                f"token {diff.position}"
                if diff
                else ""
            )
            reasons.append(
                f"speculative decoding changed the output: exact match {found.exact_match:.0%} "
                f"< {thresholds.speculative_min_exact_match:.0%} vs its non-speculative twin"
                + where
            )
        return reasons
    checks = (
        ("mean KL", found.mean_kl, thresholds.max_mean_kl, False, " nats"),
        ("mean total variation", found.mean_tv, thresholds.max_mean_tv, False, ""),
        ("top-1 agreement", found.top1_agreement, thresholds.min_top1_agreement, True, ""),
        # near-ties count as agreeing (divergence.py)
        ("token agreement", found.agreement_beyond_ties, thresholds.min_token_agreement, True, ""),
        ("median agreement", found.median_beyond_ties, thresholds.min_median_agreement, True, ""),
        ("exact match", found.exact_match, thresholds.min_exact_match, True, ""),
    )
    ties = f" ({found.near_ties} near-tie(s) counted as agreeing)" if found.near_ties else ""
    for name, value, limit, at_least, unit in checks:
        if limit is None:
            continue
        if value is None:
            # a threshold that could not be checked is not passed (no logprobs came back)
            reasons.append(f"{name} not measured (the answers carried no logprobs)")
            continue
        if at_least and value < limit:
            tied = ties if name in ("token agreement", "median agreement") else ""
            reasons.append(f"{name} {_below(value, limit)}{tied}")
        if not at_least and value > limit:
            reasons.append(f"{name} {value:.3g}{unit} > {limit:g}")
    return reasons


def _below(value: float, limit: float) -> str:
    """ "61% < 90%"; with a decimal where whole percents would read "90% < 90%" (89.96%)."""
    for digits in (0, 1, 2):
        shown = f"{value:.{digits}%}"
        if shown != f"{limit:.{digits}%}":
            return f"{shown} < {limit:.{digits}%}"
    return f"{value:.4%} < {limit:.4%}"
