"""Malformed sweep and batch files: one line naming the file, the key and the fix; exit 2.

Every case runs `tunebench sweep|batch SPEC --dry-run` through the CLI's own entry point
and error boundary (`tunebench.cli.main.main`) in this process, which is fast; the first
case of every category also runs as a real subprocess, as a user runs it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Union

import pytest

GOOD = """
name: t
model: builtin:tiny-llama-random
deployment: {kind: local}
server:
  args: {max-model-len: 512}
  matrix: {max-num-seqs: [2, 8]}
load:
  data: {kind: synthetic, prompt_tokens: 64, output_tokens: 32}
  profiles:
    - {kind: concurrent, streams: [1, 4], max_seconds: 5}
"""

GOOD_BATCH = """
name: b
model: builtin:tiny-llama-random
engine: vllm
dataset: {path: data/records.jsonl, id_field: id}
prompt:
  mode: completion
  template: "Recipe {{ title }}: {{ steps | join(', ') }}"
sampling: {temperature: 0, max_tokens: 32}
engine_args:
  args: {max-model-len: 512}
  matrix: {max-num-seqs: [2, 8]}
"""

RECORDS = (
    '{"id": "r1", "title": "Pie", "steps": ["mix", "bake"]}\n'
    '{"id": "r2", "title": "Tart", "steps": ["roll"]}\n'
)

#: The kinds of bad input issue 7 lists; every one has sweep and batch cases.
CATEGORIES = (
    "yaml-syntax",
    "unknown-key",
    "wrong-type",
    "bad-number",
    "empty-matrix",
    "unknown-kind",
    "missing-model",
    "context",
    "conflicting-args",
    "encoding",
    "huge",
)
#: Sweep or batch specific checks besides those.
OTHER = "other"

Content = Union[str, bytes, Callable[[Path], Path]]


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    content: Content  # YAML text, raw bytes, or a function making the path to pass
    fragments: tuple[str, ...]  # the message contains each
    command: str = "sweep"


def variant(old: str, new: str, base: str = GOOD) -> str:
    assert old in base, old
    return base.replace(old, new)


def bvariant(old: str, new: str) -> str:
    return variant(old, new, GOOD_BATCH)


PROFILE = "{kind: concurrent, streams: [1, 4], max_seconds: 5}"
NO_MATRIX = GOOD.replace("  matrix: {max-num-seqs: [2, 8]}\n", "")


def sweep(id: str, category: str, content: Content, *fragments: str) -> Case:
    return Case(id, category, content, fragments, "sweep")


def batch(id: str, category: str, content: Content, *fragments: str) -> Case:
    return Case(id, category, content, fragments, "batch")


def dev_zero(tmp_path: Path) -> Path:
    return Path("/dev/zero")


def a_directory(tmp_path: Path) -> Path:
    (tmp_path / "dir.yaml").mkdir()
    return tmp_path / "dir.yaml"


def no_file(tmp_path: Path) -> Path:
    return tmp_path / "nope.yaml"


def huge(base: str) -> bytes:
    return (base + "# " + "x" * 1_100_000 + "\n").encode()


ALIAS_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{n}: &a{n} [*a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}, "
    f"*a{n - 1}, *a{n - 1}, *a{n - 1}]\n"
    for n in range(1, 9)
)

SWEEP_CASES = [
    # --- YAML syntax
    sweep(
        "yaml-syntax",
        "yaml-syntax",
        "name: [unclosed\nmodel: x\n",
        "YAML syntax error",
        ".yaml:2:6: YAML syntax error: expected ',' or ']'",
    ),
    sweep(
        "yaml-tab-indent",
        "yaml-syntax",
        variant("  args:", "\targs:"),
        "YAML syntax error",
        "'\\t' that cannot start any token",
    ),
    sweep(
        "yaml-unhashable-key",
        "yaml-syntax",
        GOOD + "? [a, b]\n: c\n",
        "YAML syntax error: a key must be a plain value, not a list or mapping",
    ),
    sweep(
        "yaml-undefined-alias",
        "yaml-syntax",
        variant("name: t", "name: *nope"),
        "YAML syntax error: found undefined alias 'nope'",
    ),
    sweep(
        "yaml-python-tag",
        "yaml-syntax",
        GOOD + "x: !!python/object/apply:os.system [ls]\n",
        "YAML syntax error",
        "could not determine a constructor",
    ),
    sweep(
        "yaml-bad-tagged-value",
        "yaml-syntax",
        variant("max_seconds: 5", "max_seconds: !!float ten"),
        ".yaml:11:56: YAML syntax error: cannot read 'ten' as !!float; remove the tag or fix the value",
    ),
    sweep(
        "yaml-two-documents",
        "yaml-syntax",
        GOOD + "---\nname: u\n",
        "YAML syntax error: expected a single document in the stream, but found another document",
    ),
    sweep(
        "duplicate-key", "yaml-syntax", GOOD + "name: again\n", "key 'name' appears twice; keep one"
    ),
    sweep(
        "top-level-list",
        "yaml-syntax",
        "- name: t\n",
        "top level must be a mapping of keys (name, model, ...), not a list",
    ),
    sweep("empty-file", "yaml-syntax", "", "the file is empty; see sweeps/cpu-demo.yaml"),
    # --- unknown keys
    sweep(
        "unknown-top-key",
        "unknown-key",
        variant("model: builtin", "modle: x\nmodel: builtin"),
        "modle: unknown key; allowed here: name, description, model",
    ),
    sweep(
        "unknown-profile-key",
        "unknown-key",
        variant("streams: [1, 4]", "stream: [1, 4]"),
        "load.profiles[0].stream: unknown key",
        "streams",
    ),
    sweep(
        "unknown-deployment-key",
        "unknown-key",
        variant("{kind: local}", "{kind: local, prot: 8000}"),
        "deployment.prot: unknown key; allowed here: kind, host, port",
    ),
    sweep(
        "unknown-percentile",
        "unknown-key",
        GOOD + "slo: {ttft_ms: {p42: 500}}\n",
        "slo.ttft_ms.p42: 'p42' is not allowed as a key here; use one of 'p50', 'p90', 'p95' or 'p99'",
    ),
    sweep(
        "unknown-tune-param-key",
        "unknown-key",
        NO_MATRIX + "tune: {objective: throughput, space: {max-num-seqs: {lo: 1, high: 8}}}\n",
        "tune.space.max-num-seqs.lo: unknown key; allowed here: type, low, high",
    ),
    sweep(
        "underscore-arg",
        "unknown-key",
        variant("max-num-seqs:", "max_num_seqs:"),
        "server.matrix",
        "write engine args with dashes: 'max-num-seqs'",
    ),
    sweep(
        "dashed-arg",
        "unknown-key",
        variant("max-model-len:", "--max-model-len:"),
        "server.args",
        "without dashes",
    ),
    # --- wrong types
    sweep(
        "streams-wrong-type",
        "wrong-type",
        variant("streams: [1, 4]", "streams: four"),
        "load.profiles[0].streams: text is not allowed here; give a whole number or a list",
    ),
    sweep(
        "streams-item-wrong-type",
        "wrong-type",
        variant("streams: [1, 4]", "streams: [1, four]"),
        "load.profiles[0].streams[1]",
        "valid integer",
        "(got 'four')",
    ),
    sweep(
        "max-seconds-text",
        "wrong-type",
        variant("max_seconds: 5", "max_seconds: ten"),
        "load.profiles[0].max_seconds",
        "valid number",
        "(got 'ten')",
    ),
    sweep(
        "args-as-list",
        "wrong-type",
        variant("args: {max-model-len: 512}", "args: [max-model-len]"),
        "server.args: Input should be a valid dictionary (got a list)",
    ),
    sweep(
        "env-value-number",
        "wrong-type",
        variant("{kind: local}", "{kind: local, env: {A: 1}}"),
        "deployment.env.A",
        "valid string",
        "(got 1)",
    ),
    sweep(
        "date-value",
        "wrong-type",
        variant("name: t", "name: 2024-01-01"),
        "name: YAML read a date here; if you mean text, put it in quotes",
    ),
    sweep(
        "number-key",
        "wrong-type",
        variant("max-model-len: 512", "max-model-len: 512, 8: x"),
        "server.args.8: a key must be text, YAML read it as a number; put the key in quotes",
    ),
    sweep(
        "tune-choice-list",
        "wrong-type",
        NO_MATRIX + "tune: {objective: throughput, space: {max-num-seqs: {choices: [1, [2]]}}}\n",
        "tune.space.max-num-seqs.choices[1]: a list is not allowed here",
    ),
    # --- negative, zero, non-finite and huge numbers
    sweep(
        "zero-streams",
        "bad-number",
        variant("streams: [1, 4]", "streams: [0, 4]"),
        "load.profiles[0].streams",
        "greater than 0",
    ),
    sweep(
        "bad-server-cpus",
        "wrong-type",
        variant("deployment: {kind: local}", "deployment: {kind: local, cpus: 'zero'}"),
        "deployment.cpus",
        "'zero' is not a CPU number or range",
    ),
    sweep(
        "backwards-client-cpus",
        "bad-number",
        variant("load:\n", "load:\n  client_cpus: '3-1'\n"),
        "load.client_cpus",
        "runs backwards",
    ),
    sweep(
        "negative-rate",
        "bad-number",
        variant(PROFILE, "{kind: poisson, rate: -1, max_seconds: 5}"),
        "load.profiles[0].rate",
        "greater than 0",
    ),
    sweep(
        "zero-rate-in-list",
        "bad-number",
        variant(PROFILE, "{kind: poisson, rate: [1, 0], max_seconds: 5}"),
        "load.profiles[0].rate[1]: Input should be greater than 0 (got 0)",
    ),
    sweep(
        "infinite-rate",
        "bad-number",
        variant(PROFILE, "{kind: poisson, rate: .inf, max_seconds: 5}"),
        "load.profiles[0].rate: inf is not allowed; give a finite number",
    ),
    sweep(
        "nan-rate",
        "bad-number",
        variant(PROFILE, "{kind: constant, rate: .nan, max_seconds: 5}"),
        "load.profiles[0].rate: nan is not allowed; give a finite number",
    ),
    sweep(
        "zero-seconds",
        "bad-number",
        variant("max_seconds: 5", "max_seconds: 0"),
        "load.profiles[0].max_seconds",
        "greater than 0",
    ),
    sweep(
        "negative-warmup",
        "bad-number",
        variant("max_seconds: 5", "max_seconds: 5, warmup: -1"),
        "load.profiles[0].warmup",
        "greater than or equal to 0",
    ),
    sweep(
        "huge-integer",
        "bad-number",
        variant("max_seconds: 5", "max_requests: 1" + "0" * 400),
        "load.profiles[0].max_requests: 100000... (401 digits) is too large",
    ),
    sweep(
        "zero-prompt-tokens",
        "bad-number",
        variant("prompt_tokens: 64", "prompt_tokens: 0"),
        "load.data.prompt_tokens",
        "greater than 0",
    ),
    sweep(
        "interval-zero",
        "bad-number",
        GOOD + "metrics: {interval_s: 0}\n",
        "metrics.interval_s",
        "greater than or equal to 0.1",
    ),
    sweep(
        "tolerance-over-one",
        "bad-number",
        GOOD + "client_tolerance: 1.5\n",
        "client_tolerance",
        "less than 1",
    ),
    sweep(
        "zero-max-num-seqs",
        "bad-number",
        variant("[2, 8]", "[0, 8]"),
        "server.matrix.max-num-seqs[0]: 0 is not allowed; give a number greater than 0",
    ),
    sweep(
        "memory-fraction",
        "bad-number",
        variant("max-model-len: 512", "max-model-len: 512, gpu-memory-utilization: 90"),
        "server.args.gpu-memory-utilization: 90 is not allowed; give a fraction in (0, 1]",
    ),
    # --- empty matrix and other empty lists
    sweep(
        "empty-matrix-list",
        "empty-matrix",
        variant("[2, 8]", "[]"),
        "server.matrix",
        "empty list gives no configuration; list ≥ 1 value",
    ),
    sweep(
        "matrix-null",
        "empty-matrix",
        variant("[2, 8]", "null"),
        "server.matrix.max-num-seqs: Input should be a valid list (got null)",
    ),
    sweep(
        "matrix-not-mapping",
        "empty-matrix",
        variant("matrix: {max-num-seqs: [2, 8]}", "matrix: []"),
        "server.matrix: Input should be a valid dictionary (got a list)",
    ),
    sweep("repeated-matrix-value", "empty-matrix", variant("[2, 8]", "[2, 2]"), "values repeat"),
    sweep(
        "no-profiles",
        "empty-matrix",
        variant(f"  profiles:\n    - {PROFILE}", "  profiles: []"),
        "load.profiles",
        "at least 1",
    ),
    # --- unknown kinds
    sweep(
        "unknown-profile-kind",
        "unknown-kind",
        variant("kind: concurrent", "kind: burst"),
        "load.profiles[0].kind: 'burst' is not allowed; use one of",
        "concurrent",
    ),
    sweep(
        "profile-kind-case",
        "unknown-kind",
        variant("kind: concurrent", "kind: Concurrent"),
        "load.profiles[0].kind: 'Concurrent' is not allowed",
    ),
    sweep(
        "unknown-deployment-kind",
        "unknown-kind",
        variant("{kind: local}", "{kind: k8s}"),
        "deployment",
        "'k8s' is not allowed",
        "local",
        "endpoint",
    ),
    sweep(
        "data-kind-missing",
        "unknown-kind",
        variant("{kind: synthetic, ", "{"),
        "load.data",
        "needs a kind",
        "synthetic",
    ),
    sweep(
        "unknown-data-kind",
        "unknown-kind",
        variant("kind: synthetic", "kind: sharegpt"),
        "load.data: 'sharegpt' is not allowed; use one of 'synthetic', 'file'",
    ),
    # --- missing model or model path
    sweep(
        "missing-model",
        "missing-model",
        variant("model: builtin:tiny-llama-random\n", ""),
        "model: required key is missing",
    ),
    sweep(
        "missing-local-model",
        "missing-model",
        variant("builtin:tiny-llama-random", "./no/such/model"),
        "model: local model path",
        "does not exist",
    ),
    sweep(
        "unknown-builtin",
        "missing-model",
        variant("builtin:tiny-llama-random", "builtin:huge-llama"),
        "model: unknown builtin model 'huge-llama'",
        "builtin:tiny-llama-random",
    ),
    sweep(
        "empty-model",
        "missing-model",
        variant("builtin:tiny-llama-random", "''"),
        "model: String should have at least 1 character",
    ),
    sweep(
        "missing-matrix-model",
        "missing-model",
        variant(
            "matrix: {max-num-seqs: [2, 8]}",
            "matrix: {model: [builtin:tiny-llama-random, ../gone]}",
        ),
        "server.matrix.model: local model path",
        "does not exist",
    ),
    sweep(
        "missing-local-tokenizer",
        "missing-model",
        variant(
            "model: builtin:tiny-llama-random", "model: builtin:tiny-llama-random\ntokenizer: ./tok"
        ),
        "tokenizer: local model path",
        "does not exist",
    ),
    # --- max-model-len smaller than prompt + output tokens
    sweep(
        "context-too-small",
        "context",
        variant("max-model-len: 512", "max-model-len: 64"),
        "server.args.max-model-len: max-model-len 64",
        "smaller than",
        "prompt+output tokens (96)",
    ),
    sweep(
        "context-too-small-in-matrix",
        "context",
        variant("matrix: {max-num-seqs: [2, 8]}", "matrix: {max-model-len: [512, 80]}").replace(
            "args: {max-model-len: 512}", "args: {}"
        ),
        "server.matrix.max-model-len: max-model-len 80 (max-model-len=80)",
        "raise max-model-len",
    ),
    sweep(
        "context-with-stdev",
        "context",
        variant("prompt_tokens: 64", "prompt_tokens: 200, prompt_tokens_stdev: 150"),
        "max-model-len 512",
        "prompt+output tokens (532)",
    ),
    sweep(
        "context-human-readable",
        "context",
        variant("max-model-len: 512", "max-model-len: 0.05k"),
        "max-model-len 0.05k",
        "prompt+output tokens (96)",
    ),
    sweep(
        "context-not-a-count",
        "context",
        variant("max-model-len: 512", "max-model-len: lots"),
        "server.args.max-model-len: 'lots' is not a count; give a whole number such as 2048 or 8k",
    ),
    # --- contradictory engine args
    sweep(
        "prefix-caching-both-ways",
        "conflicting-args",
        variant(
            "max-model-len: 512",
            "max-model-len: 512, enable-prefix-caching: true, no-enable-prefix-caching: true",
        ),
        "server.args.no-enable-prefix-caching: contradicts server.args.enable-prefix-caching",
        "enable-prefix-caching: false is the same as no-enable-prefix-caching: true",
    ),
    sweep(
        "negated-false",
        "conflicting-args",
        variant("max-model-len: 512", "max-model-len: 512, no-enforce-eager: false"),
        "server.args.no-enforce-eager: false would mean --no-no-enforce-eager; write enforce-eager: true",
    ),
    sweep(
        "matrix-over-fixed-arg",
        "conflicting-args",
        variant("args: {max-model-len: 512}", "args: {max-model-len: 512, max-num-seqs: 4}"),
        "server.matrix.max-num-seqs: also set in server.args.max-num-seqs (4)",
        "remove one",
    ),
    sweep(
        "matrix-over-variant-arg",
        "conflicting-args",
        variant("  matrix:", "  variants: [{name: a, args: {max-num-seqs: 4}}]\n  matrix:"),
        "server.matrix.max-num-seqs: also set in server.variants[0].args.max-num-seqs (4)",
    ),
    sweep(
        "batched-tokens-below-seqs",
        "conflicting-args",
        variant("max-model-len: 512", "max-model-len: 512, max-num-batched-tokens: 4"),
        "server.args.max-num-batched-tokens: 4 is less than max-num-seqs 8 (server.matrix.max-num-seqs)",
        "raise max-num-batched-tokens or lower max-num-seqs",
    ),
    sweep(
        "batched-tokens-below-context",
        "conflicting-args",
        variant(
            "max-model-len: 512",
            "max-model-len: 512, max-num-batched-tokens: 256, enable-chunked-prefill: false",
        ),
        "server.args.max-num-batched-tokens: 256 is less than max-model-len 512 with "
        "enable-chunked-prefill false",
    ),
    sweep(
        "speculative-config-bad-json",
        "conflicting-args",
        variant(
            "max-model-len: 512", "max-model-len: 512, speculative-config: '{\"method\": ngram}'"
        ),
        "server.args.speculative-config: not valid JSON",
        "write it as a YAML mapping",
    ),
    sweep(
        "speculative-config-number",
        "conflicting-args",
        variant("max-model-len: 512", "max-model-len: 512, speculative-config: 3"),
        "server.args.speculative-config: 3 is not allowed; give a mapping",
    ),
    sweep(
        "compilation-config-list",
        "conflicting-args",
        variant("[2, 8]}", "[2, 8], compilation-config: [[1], [2]]}"),
        "server.matrix.compilation-config[0]: [1] is not allowed; give a mapping",
    ),
    sweep(
        "endpoint-with-matrix",
        "conflicting-args",
        variant("{kind: local}", "{kind: endpoint, url: 'http://127.0.0.1:1'}"),
        "endpoint deployment cannot change server args",
    ),
    sweep(
        "synchronous-with-streams",
        "conflicting-args",
        variant("kind: concurrent", "kind: synchronous"),
        "takes neither streams nor rate",
    ),
    sweep(
        "tune-with-matrix",
        "conflicting-args",
        GOOD + "tune: {space: {max-num-seqs: {low: 1, high: 8}}}\n",
        "server.matrix and server.variants are not used when tuning",
    ),
    # --- encodings
    sweep(
        "latin-1",
        "encoding",
        GOOD.replace("name: t", "name: caf\xe9").encode("latin-1"),
        "not UTF-8 text (byte 0xe9 at offset",
        "save the file as UTF-8",
    ),
    sweep("utf-16", "encoding", GOOD.encode("utf-16"), "not UTF-8 text (byte 0xff at offset 0)"),
    sweep(
        "nul-byte",
        "encoding",
        GOOD.replace("name: t", "name: t\x00").encode(),
        ".yaml:2:8: character 0x0000 is not allowed in YAML; remove it",
    ),
    sweep("binary", "encoding", bytes(range(256)), "not UTF-8 text"),
    # --- huge files and expansions
    sweep(
        "huge-file",
        "huge",
        huge(GOOD),
        "1,100,",
        "bytes is too large for a sweep file (limit 1,000,000 bytes)",
    ),
    sweep(
        "endless-file",
        "huge",
        dev_zero,
        "/dev/zero: more than 1,000,000 bytes is too large for a sweep file (limit 1,000,000 bytes)",
    ),
    sweep(
        "alias-bomb", "huge", ALIAS_BOMB, "more than 100,000 values once YAML aliases are expanded"
    ),
    sweep(
        "deep-nesting",
        "huge",
        GOOD + "description: " + "[" * 5000 + "]" * 5000 + "\n",
        "YAML nested too deeply",
    ),
    sweep(
        "self-alias",
        "huge",
        GOOD + "description: &d [*d]\n",
        "nested more than 64 levels deep (a YAML alias that refers to itself?)",
    ),
    # --- other checks
    sweep("missing-load", OTHER, GOOD.split("load:")[0], "load: required key is missing"),
    sweep("missing-file", OTHER, no_file, "no such sweep file; check the path"),
    sweep("directory", OTHER, a_directory, "is a directory; give the path of a sweep file"),
    sweep("concurrent-without-streams", OTHER, variant("streams: [1, 4], ", ""), "needs streams"),
    sweep(
        "poisson-request-limited",
        OTHER,
        variant(PROFILE, "{kind: poisson, rate: 2, max_requests: 50}"),
        "needs max_seconds",
    ),
    sweep("no-limit", OTHER, variant(", max_seconds: 5", ""), "set max_seconds or max_requests"),
    sweep(
        "endpoint-bad-url",
        OTHER,
        variant("{kind: local}", "{kind: endpoint, url: '127.0.0.1:8000'}").replace(
            "  matrix: {max-num-seqs: [2, 8]}\n", ""
        ),
        "deployment.url",
        "must start with http",
    ),
    sweep("bad-name", OTHER, variant("name: t", "name: my sweep"), "name", "letters, digits"),
    sweep("duplicate-point", OTHER, variant("[1, 4]", "[4, 4.0]"), "concurrent-4 is listed twice"),
    sweep(
        "capacity-without-slo",
        OTHER,
        variant(PROFILE, "{kind: capacity, max_seconds: 5}"),
        "kind capacity needs an slo section",
    ),
    sweep(
        "capacity-with-rate",
        OTHER,
        variant(PROFILE, "{kind: capacity, rate: 2, max_seconds: 5}"),
        "load.profiles[0]",
        "chooses its own rates",
    ),
    sweep(
        "search-field-elsewhere",
        OTHER,
        variant("streams: [1, 4],", "streams: [1, 4], tolerance: 0.1,"),
        "only apply to kind capacity",
    ),
    sweep(
        "tune-bad-range",
        OTHER,
        NO_MATRIX + "tune: {objective: throughput, space: {max-num-seqs: {low: 8, high: 8}}}\n",
        "tune.space.max-num-seqs",
        "set low < high",
    ),
    sweep(
        "tune-when-later",
        OTHER,
        NO_MATRIX
        + "tune: {objective: throughput, space: {a: {choices: [1], when: {b: 1}}, b: {choices: [1]}}}\n",
        "space.a.when",
        "'b' must be a param listed before 'a'",
    ),
    sweep(
        "tune-capacity-needs-profile",
        OTHER,
        NO_MATRIX + "tune: {space: {max-num-seqs: {choices: [1, 2]}}}\n",
        "tune.objective capacity needs a load profile of kind capacity",
    ),
    sweep(
        "recorded-without-run",
        OTHER,
        variant("{kind: local}", "{kind: recorded}"),
        "deployment.run",
        "required",
    ),
    sweep(
        "dataset-suffix",
        OTHER,
        variant(
            "{kind: synthetic, prompt_tokens: 64, output_tokens: 32}",
            "{kind: file, path: data.xlsx}",
        ),
        "load.data.path",
        ".jsonl",
    ),
    sweep("newline-in-key", OTHER, GOOD + '"mo\\ndel": x\n', "'mo\\ndel': unknown key"),
]

BATCH_CASES = [
    # --- YAML syntax
    batch(
        "batch-yaml-syntax",
        "yaml-syntax",
        GOOD_BATCH + "sampling: {max_tokens: 32\n",
        "YAML syntax error",
    ),
    batch(
        "batch-duplicate-key",
        "yaml-syntax",
        GOOD_BATCH + "engine: ray\n",
        "key 'engine' appears twice",
    ),
    batch(
        "batch-empty-file",
        "yaml-syntax",
        "# nothing yet\n",
        "the file is empty; see sweeps/batch-recipes.yaml for an example",
    ),
    batch(
        "batch-top-level-scalar",
        "yaml-syntax",
        "just text\n",
        "the top level must be a mapping of keys (name, model, ...), not text",
    ),
    # --- unknown keys
    batch(
        "batch-unknown-top-key",
        "unknown-key",
        GOOD_BATCH + "engine_arg: {}\n",
        "engine_arg: unknown key; allowed here: name, description, model",
        "engine_args",
    ),
    batch(
        "batch-unknown-sampling-key",
        "unknown-key",
        bvariant("max_tokens: 32", "max-tokens: 32"),
        "sampling.max-tokens: unknown key; allowed here: temperature, top_p, max_tokens",
    ),
    batch(
        "batch-underscore-arg",
        "unknown-key",
        bvariant("max-num-seqs:", "max_num_seqs:"),
        "engine_args.matrix: write engine args with dashes: 'max-num-seqs'",
    ),
    # --- wrong types
    batch(
        "batch-max-tokens-text",
        "wrong-type",
        bvariant("max_tokens: 32", "max_tokens: many"),
        "sampling.max_tokens",
        "valid integer",
        "(got 'many')",
    ),
    batch(
        "batch-setup-not-list",
        "wrong-type",
        GOOD_BATCH + "slurm: {setup: {a: b}}\n",
        "slurm.setup: Input should be a valid list (got a mapping)",
    ),
    batch(
        "batch-choice-date",
        "wrong-type",
        GOOD_BATCH + "structured_output: {choice: [2024-01-01]}\n",
        "structured_output.choice[0]: YAML read a date here; if you mean text, put it in quotes",
    ),
    # --- numbers
    batch(
        "batch-zero-max-tokens",
        "bad-number",
        bvariant("max_tokens: 32", "max_tokens: 0"),
        "sampling.max_tokens",
        "greater than 0",
    ),
    batch(
        "batch-negative-temperature",
        "bad-number",
        bvariant("temperature: 0", "temperature: -0.5"),
        "sampling.temperature",
        "greater than or equal to 0",
    ),
    batch(
        "batch-zero-shards",
        "bad-number",
        GOOD_BATCH + "shards: 0\n",
        "shards",
        "greater than or equal to 1",
    ),
    batch(
        "batch-negative-limit",
        "bad-number",
        bvariant("id_field: id", "id_field: id, limit: -5"),
        "dataset.limit",
        "greater than 0",
    ),
    batch(
        "batch-infinite-timeout",
        "bad-number",
        GOOD_BATCH + "start_timeout_s: .inf\n",
        "start_timeout_s: inf is not allowed; give a finite number",
    ),
    # --- empty matrix
    batch(
        "batch-empty-matrix-list",
        "empty-matrix",
        bvariant("[2, 8]", "[]"),
        "engine_args.matrix",
        "an empty list gives no configuration",
    ),
    batch(
        "batch-empty-choice",
        "empty-matrix",
        GOOD_BATCH + "structured_output: {choice: []}\n",
        "structured_output.choice",
        "at least 1",
    ),
    # --- unknown kinds
    batch(
        "batch-unknown-engine",
        "unknown-kind",
        bvariant("engine: vllm", "engine: tgi"),
        "engine: 'tgi' is not allowed; use one of 'vllm', 'transformers' or 'ray'",
    ),
    batch(
        "batch-unknown-mode",
        "unknown-kind",
        bvariant("mode: completion", "mode: instruct"),
        "prompt.mode: 'instruct' is not allowed; use one of 'completion' or 'chat'",
    ),
    batch(
        "batch-unknown-dtype",
        "unknown-kind",
        GOOD_BATCH + "transformers: {dtype: fp4}\n",
        "transformers.dtype: 'fp4' is not allowed",
    ),
    # --- missing model
    batch(
        "batch-missing-model",
        "missing-model",
        bvariant("model: builtin:tiny-llama-random\n", ""),
        "model: required key is missing",
    ),
    batch(
        "batch-missing-local-model",
        "missing-model",
        bvariant("builtin:tiny-llama-random", "./models/none"),
        "model: local model path",
        "does not exist",
    ),
    batch(
        "batch-transformers-missing-model",
        "missing-model",
        bvariant("builtin:tiny-llama-random", "../none")
        .replace("engine: vllm", "engine: transformers")
        .replace("  matrix: {max-num-seqs: [2, 8]}\n", ""),
        "model: local model path",
        "does not exist",
    ),
    batch(
        "batch-unknown-builtin",
        "missing-model",
        bvariant("builtin:tiny-llama-random", "builtin:nope"),
        "model: unknown builtin model 'nope'",
    ),
    # --- max-model-len against the output tokens
    batch(
        "batch-no-room-for-prompt",
        "context",
        bvariant("max_tokens: 32", "max_tokens: 600"),
        "engine_args.args.max-model-len: max-model-len 512 leaves no room for a prompt besides "
        "sampling.max_tokens 600",
    ),
    batch(
        "batch-no-room-in-matrix",
        "context",
        bvariant("matrix: {max-num-seqs: [2, 8]}", "matrix: {max-model-len: [1k, 32]}").replace(
            "args: {max-model-len: 512}", "args: {}"
        ),
        "engine_args.matrix.max-model-len[1]: max-model-len 32 leaves no room",
    ),
    # --- contradictory engine args and settings
    batch(
        "batch-prefix-caching-both-ways",
        "conflicting-args",
        bvariant(
            "max-model-len: 512", "max-model-len: 512, no-enable-prefix-caching: true"
        ).replace("matrix: {max-num-seqs: [2, 8]}", "matrix: {enable-prefix-caching: [true]}"),
        "engine_args.args.no-enable-prefix-caching: contradicts engine_args.matrix.enable-prefix-caching",
    ),
    batch(
        "batch-batched-tokens-below-seqs",
        "conflicting-args",
        bvariant("[2, 8]}", "[2, 8], max-num-batched-tokens: [4]}"),
        "engine_args.matrix.max-num-batched-tokens: 4 is less than max-num-seqs 8",
    ),
    batch(
        "batch-speculative-bad-json",
        "conflicting-args",
        bvariant("max-model-len: 512", "max-model-len: 512, speculative-config: '{method: ngram}'"),
        "engine_args.args.speculative-config: not valid JSON",
    ),
    batch(
        "batch-matrix-over-fixed-arg",
        "conflicting-args",
        bvariant("max-model-len: 512", "max-model-len: 512, max-num-seqs: 2"),
        "engine_args.matrix.max-num-seqs: also set in engine_args.args.max-num-seqs (2)",
    ),
    batch(
        "batch-two-templates",
        "conflicting-args",
        bvariant("mode: completion", "mode: completion\n  template_file: p.j2"),
        "prompt: give exactly one of template or template_file",
    ),
    batch(
        "batch-system-without-chat",
        "conflicting-args",
        bvariant("mode: completion", "mode: completion\n  system: be brief"),
        "prompt: system only applies to mode chat",
    ),
    batch(
        "batch-two-output-kinds",
        "conflicting-args",
        GOOD_BATCH + "structured_output: {choice: [a], json_schema: {type: object}}\n",
        "structured_output: give exactly one of choice, json_schema or json_schema_file",
    ),
    batch(
        "batch-transformers-matrix",
        "conflicting-args",
        bvariant("engine: vllm", "engine: transformers"),
        "engine transformers has no engine args to vary",
    ),
    # --- encodings and sizes
    batch(
        "batch-latin-1",
        "encoding",
        GOOD_BATCH.replace("Recipe", "Recette \xe0").encode("latin-1"),
        "not UTF-8 text (byte 0xe0 at offset",
    ),
    batch("batch-huge-file", "huge", huge(GOOD_BATCH), "bytes is too large for a batch file"),
    batch("batch-alias-bomb", "huge", ALIAS_BOMB, "more than 100,000 values once YAML aliases"),
    # --- dataset, prompt and schema
    batch(
        "batch-missing-dataset",
        OTHER,
        bvariant("data/records.jsonl", "data/none.jsonl"),
        "dataset.path:",
        "none.jsonl is not a file; the path is relative to the spec file",
    ),
    batch(
        "batch-dataset-suffix",
        OTHER,
        bvariant("data/records.jsonl", "data/records.xlsx"),
        "dataset: path: use a file ending in one of .jsonl",
    ),
    batch(
        "batch-dataset-id-field",
        OTHER,
        bvariant("id_field: id", "id_field: key"),
        "dataset.path:",
        "records.jsonl: record 1 has no 'key'",
    ),
    batch(
        "batch-template-syntax",
        OTHER,
        bvariant("{{ title }}", "{{ title }"),
        "prompt.template: template line 1",
    ),
    batch(
        "batch-template-missing-field",
        OTHER,
        bvariant("{{ title }}", "{{ name }}"),
        "prompt.template: record 'r1': 'name' is undefined",
    ),
    batch(
        "batch-template-fails",
        OTHER,
        bvariant("{{ title }}", "{{ title + 1 }}"),
        "prompt.template: record 'r1': the template fails: TypeError",
    ),
    batch(
        "batch-template-file-missing",
        OTHER,
        bvariant(
            "template: \"Recipe {{ title }}: {{ steps | join(', ') }}\"", "template_file: none.j2"
        ),
        "prompt.template_file: No such file or directory",
    ),
    batch(
        "batch-empty-template-file",
        OTHER,
        bvariant("template: \"Recipe {{ title }}: {{ steps | join(', ') }}\"", "template_file: ''"),
        "prompt.template_file: Is a directory",
    ),
    batch(
        "batch-invalid-schema",
        OTHER,
        GOOD_BATCH + "structured_output: {json_schema: {type: objekt}}\n",
        "structured_output.json_schema: not a valid JSON Schema at type:",
    ),
    batch("batch-missing-file", OTHER, no_file, "no such batch file; check the path"),
]

CASES = SWEEP_CASES + BATCH_CASES


def write_case(tmp_path: Path, case: Case) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "records.jsonl").write_text(RECORDS)
    if callable(case.content):
        return case.content(tmp_path)
    spec = tmp_path / f"{case.id}.yaml"
    if isinstance(case.content, bytes):
        spec.write_bytes(case.content)
    else:
        spec.write_text(textwrap.dedent(case.content), encoding="utf-8")
    return spec


def run_in_process(capsys, *args: str) -> SimpleNamespace:
    from tests.conftest import invoke

    result = invoke(*args, cwd=Path.cwd())
    return SimpleNamespace(returncode=result.returncode, stdout=result.stdout, stderr=result.stderr)


def assert_one_line_error(result, spec: Path, fragments: tuple[str, ...]) -> None:
    message = result.stderr.strip()
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == "", result.stdout
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"error: {spec}"), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_spec_gives_one_line_and_exit_2(tmp_path, capsys, case):
    spec = write_case(tmp_path, case)
    result = run_in_process(capsys, case.command, str(spec), "--dry-run")
    assert_one_line_error(result, spec, case.fragments)


FIRST_OF_EACH = list({(c.command, c.category): c for c in reversed(CASES)}.values())[::-1]


@pytest.mark.parametrize("case", FIRST_OF_EACH, ids=[c.id for c in FIRST_OF_EACH])
def test_bad_spec_as_a_user_runs_it(tmp_path, cli, case):
    """The same through a real `python -m tunebench.cli.main` process: one per category."""
    spec = write_case(tmp_path, case)
    result = cli(case.command, str(spec), "--dry-run")
    assert_one_line_error(result, spec, case.fragments)


def test_corpus_covers_every_category():
    for command, cases in (("sweep", SWEEP_CASES), ("batch", BATCH_CASES)):
        covered = {c.category for c in cases}
        assert set(CATEGORIES) <= covered, (command, set(CATEGORIES) - covered)
        assert all(c.category in (*CATEGORIES, OTHER) for c in cases)
        assert all(c.command == command for c in cases)
    assert len({c.id for c in CASES}) == len(CASES)
    assert len(SWEEP_CASES) >= 40 and len(BATCH_CASES) >= 12
    assert len(FIRST_OF_EACH) == 2 * (len(CATEGORIES) + 1)


def test_good_spec_dry_run_prints_plan(tmp_path, cli):
    spec = tmp_path / "good.yaml"
    spec.write_text(GOOD)
    result = cli("sweep", str(spec), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "2 configurations x 2 points" in result.stdout
    assert "--max-model-len 512 --max-num-seqs 8" in result.stdout
    assert "estimated time" in result.stdout


def test_good_batch_dry_run_prints_plan_and_starts_nothing(tmp_path, capsys):
    spec = write_case(tmp_path, batch("good", OTHER, GOOD_BATCH))
    result = run_in_process(capsys, "batch", str(spec), "--dry-run", "-o", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    assert "2 configurations x 2 records, engine vllm" in result.stdout
    assert "--max-model-len 512 --max-num-seqs 8" in result.stdout
    assert "dry run: nothing started" in result.stdout
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "args",
    [
        {"max-model-len": -1},
        {"max-model-len": "auto"},
        {"max-model-len": "8k"},
        {"max-num-batched-tokens": "2K"},
        {"enable-prefix-caching": False},
        {"no-enable-prefix-caching": True},
        {"speculative-config": '{"method": "ngram", "num_speculative_tokens": 3}'},
        {"compilation-config": {"level": 3}},
        {"generation-config": "vllm"},
        {"max-num-batched-tokens": 256, "enable-chunked-prefill": True},
    ],
    ids=str,
)
def test_allowed_engine_args_pass(tmp_path, args):
    """The engine-arg checks refuse only what vLLM refuses."""
    import yaml

    from tunebench.spec.loading import load_spec
    from tunebench.spec.plan import build_plan

    spec_path = tmp_path / "ok.yaml"
    document = yaml.safe_load(GOOD)
    document["server"]["args"].update(args)
    spec_path.write_text(yaml.safe_dump(document))
    build_plan(load_spec(spec_path), spec_path)
