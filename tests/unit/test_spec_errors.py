"""Every malformed sweep file gets one line naming the file, the key and what is allowed; exit 2."""

from __future__ import annotations

import textwrap

import pytest

GOOD = """
name: t
model: builtin:tiny-llama
deployment: {kind: local}
server:
  args: {max-model-len: 512}
  matrix: {max-num-seqs: [2, 8]}
load:
  data: {kind: synthetic, prompt_tokens: 64, output_tokens: 32}
  profiles:
    - {kind: concurrent, streams: [1, 4], max_seconds: 5}
"""


def variant(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


# (id, file text, fragments the one-line message must contain)
CASES = [
    ("yaml-syntax", "name: [unclosed\nmodel: x\n", ["YAML syntax error", ":"]),
    ("top-level-list", "- name: t\n", ["top level must be a mapping"]),
    ("empty-file", "", ["empty"]),
    ("unknown-top-key", variant("model: builtin", "modle: x\nmodel: builtin"),
     ["modle: unknown key; allowed here: name, description, model"]),
    ("unknown-profile-key", variant("streams: [1, 4]", "stream: [1, 4]"),
     ["load.profiles[0].stream: unknown key", "streams"]),
    ("streams-wrong-type", variant("streams: [1, 4]", "streams: four"), ["load.profiles[0].streams"]),
    ("zero-streams", variant("streams: [1, 4]", "streams: [0, 4]"),
     ["load.profiles[0].streams", "greater than 0"]),
    ("negative-rate", variant("{kind: concurrent, streams: [1, 4], max_seconds: 5}",
                              "{kind: poisson, rate: -1, max_seconds: 5}"),
     ["load.profiles[0].rate", "greater than 0"]),
    ("unknown-profile-kind", variant("kind: concurrent", "kind: burst"),
     ["load.profiles[0].kind: 'burst' is not allowed; use one of", "concurrent"]),
    ("unknown-deployment-kind", variant("{kind: local}", "{kind: k8s}"),
     ["deployment", "'k8s' is not allowed", "local", "endpoint"]),
    ("missing-model", variant("model: builtin:tiny-llama\n", ""), ["model: required key is missing"]),
    ("missing-load", GOOD.split("load:")[0], ["load: required key is missing"]),
    ("empty-matrix-list", variant("[2, 8]", "[]"),
     ["server.matrix", "empty list gives no configuration"]),
    ("underscore-arg", variant("max-num-seqs:", "max_num_seqs:"),
     ["server.matrix", "write engine args with dashes: 'max-num-seqs'"]),
    ("dashed-arg", variant("max-model-len:", "--max-model-len:"),
     ["server.args", "without dashes"]),
    ("repeated-matrix-value", variant("[2, 8]", "[2, 2]"), ["values repeat"]),
    ("concurrent-without-streams", variant("streams: [1, 4], ", ""), ["needs streams"]),
    ("poisson-request-limited", variant("{kind: concurrent, streams: [1, 4], max_seconds: 5}",
                                        "{kind: poisson, rate: 2, max_requests: 50}"),
     ["needs max_seconds"]),
    ("no-limit", variant(", max_seconds: 5", ""), ["set max_seconds or max_requests"]),
    ("synchronous-with-streams", variant("kind: concurrent", "kind: synchronous"),
     ["takes neither streams nor rate"]),
    ("context-too-small", variant("max-model-len: 512", "max-model-len: 64"),
     ["max-model-len 64", "smaller than", "prompt+output tokens (96)"]),
    ("missing-local-model", variant("builtin:tiny-llama", "./no/such/model"),
     ["model: local model path", "does not exist"]),
    ("unknown-builtin", variant("builtin:tiny-llama", "builtin:huge-llama"),
     ["unknown builtin model 'huge-llama'", "builtin:tiny-llama"]),
    ("endpoint-with-matrix", variant("{kind: local}", "{kind: endpoint, url: 'http://127.0.0.1:1'}"),
     ["endpoint deployment cannot change server args"]),
    ("endpoint-bad-url", variant("{kind: local}", "{kind: endpoint, url: '127.0.0.1:8000'}")
     .replace("  matrix: {max-num-seqs: [2, 8]}\n", ""),
     ["deployment.url", "must start with http"]),
    ("no-profiles", variant("  profiles:\n    - {kind: concurrent, streams: [1, 4], max_seconds: 5}", "  profiles: []"),
     ["load.profiles", "at least 1"]),
    ("bad-name", variant("name: t", "name: my sweep"), ["name", "letters, digits"]),
    ("interval-zero", GOOD + "metrics: {interval_s: 0}\n", ["metrics.interval_s", "greater than or equal to 0.1"]),
    ("duplicate-key", GOOD + "name: again\n", ["key 'name' appears twice"]),
    ("duplicate-point", variant("[1, 4]", "[4, 4.0]"), ["concurrent-4 is listed twice"]),
    ("data-kind-missing", variant("{kind: synthetic, ", "{"), ["load.data", "needs a kind", "synthetic"]),
    ("capacity-without-slo", variant("{kind: concurrent, streams: [1, 4], max_seconds: 5}",
                                     "{kind: capacity, max_seconds: 5}"),
     ["kind capacity needs an slo section"]),
    ("capacity-with-rate", variant("{kind: concurrent, streams: [1, 4], max_seconds: 5}",
                                   "{kind: capacity, rate: 2, max_seconds: 5}"),
     ["load.profiles[0]", "chooses its own rates"]),
    ("search-field-elsewhere", variant("streams: [1, 4],", "streams: [1, 4], tolerance: 0.1,"),
     ["only apply to kind capacity"]),
    ("tune-with-matrix", GOOD + "tune: {space: {max-num-seqs: {low: 1, high: 8}}}\n",
     ["server.matrix and server.variants are not used when tuning"]),
    ("tune-bad-range", GOOD.replace("  matrix: {max-num-seqs: [2, 8]}\n", "")
     + "tune: {objective: throughput, space: {max-num-seqs: {low: 8, high: 8}}}\n",
     ["tune.space.max-num-seqs", "set low < high"]),
    ("tune-when-later", GOOD.replace("  matrix: {max-num-seqs: [2, 8]}\n", "")
     + "tune: {objective: throughput, space: {a: {choices: [1], when: {b: 1}}, b: {choices: [1]}}}\n",
     ["space.a.when", "'b' must be a param listed before 'a'"]),
    ("tune-capacity-needs-profile", GOOD.replace("  matrix: {max-num-seqs: [2, 8]}\n", "")
     + "tune: {space: {max-num-seqs: {choices: [1, 2]}}}\n",
     ["tune.objective capacity needs a load profile of kind capacity"]),
    ("replay-without-run", variant("{kind: local}", "{kind: replay}"),
     ["deployment.run", "required"]),
    ("dataset-suffix", variant("{kind: synthetic, prompt_tokens: 64, output_tokens: 32}",
                               "{kind: file, path: data.xlsx}"), ["load.data.path", ".jsonl"]),
]


@pytest.mark.parametrize("name,text,fragments", CASES, ids=[c[0] for c in CASES])
def test_bad_spec_gives_one_line_and_exit_2(tmp_path, cli, name, text, fragments):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(textwrap.dedent(text))
    result = cli("sweep", str(spec), "--dry-run")
    message = result.stderr.strip()
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"error: {spec}"), message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_corpus_is_large_enough():
    assert len(CASES) >= 15


def test_non_utf8_bytes(tmp_path, cli):
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(GOOD.replace("name: t", "name: caf\xe9").encode("latin-1"))
    result = cli("sweep", str(spec), "--dry-run")
    assert result.returncode == 2
    assert "not UTF-8 text (byte 0xe9 at offset" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_huge_file(tmp_path, cli):
    spec = tmp_path / "huge.yaml"
    spec.write_text(GOOD + "# " + "x" * 1_100_000 + "\n")
    result = cli("sweep", str(spec), "--dry-run")
    assert result.returncode == 2
    assert "is too large for a sweep file" in result.stderr


def test_missing_file(tmp_path, cli):
    result = cli("sweep", str(tmp_path / "nope.yaml"), "--dry-run")
    assert result.returncode == 2
    assert "no such sweep file" in result.stderr


def test_good_spec_dry_run_prints_plan(tmp_path, cli):
    spec = tmp_path / "good.yaml"
    spec.write_text(GOOD)
    result = cli("sweep", str(spec), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "2 configurations x 2 points" in result.stdout
    assert "--max-model-len 512 --max-num-seqs 8" in result.stdout
    assert "estimated time" in result.stdout
