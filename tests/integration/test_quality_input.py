"""Bad quality input stops a sweep before any server starts: exit 2, one line naming the
file, the key and the fix (`--dry-run` makes the same checks as a real run)."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

SPEC = """\
name: quality-input
model: builtin:tiny-llama-random
deployment: {{kind: local}}
server:
  variants: [{{name: a}}, {{name: b, args: {{max-num-seqs: 2}}}}]
load:
  data: {{kind: synthetic, prompt_tokens: 16, output_tokens: 8}}
  profiles: [{{kind: concurrent, streams: 1, max_seconds: 2}}]
quality:
{quality}
"""


@pytest.mark.parametrize(
    "quality, says",
    [
        ("  prompts: missing.jsonl", "quality.prompts"),
        ("  prompts: bad.jsonl", "line 2: not JSON"),
        ("  reference: nope", "quality.reference 'nope' is no configuration"),
        ("  lm_eval: {task: hellaswag}", "quality.lm_eval.task 'hellaswag' needs include_path"),
        ("  lm_eval: {task: mine, include_path: tasks}", "is not defined in"),
        ("  max_tokens: 0", "max_tokens"),
    ],
)
def test_bad_quality_input_exits_2_with_one_line_before_anything_starts(tmp_path, quality, says):
    (tmp_path / "bad.jsonl").write_text('{"prompt": "fine"}\n{oops\n')
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "other.yaml").write_text("task: other\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(quality=quality))
    result = run_cli("sweep", str(spec), "--dry-run", "--output", str(tmp_path / "reports"))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "reports").exists()


def test_good_quality_input_plans(tmp_path):
    (tmp_path / "mine.txt").write_text("one prompt\nanother prompt\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(quality="  prompts: mine.txt\n  reference: b"))
    result = run_cli("sweep", str(spec), "--dry-run", "--output", str(tmp_path / "reports"))
    assert result.returncode == 0, result.stderr
    # the plan says what the check will ask and what it compares with (the label b is c2)
    assert (
        "quality check: mine.txt, 32 greedy tokens each, before the load of every "
        "configuration; compared with c2 (b)"
    ) in result.stdout, result.stdout
    assert not (tmp_path / "reports").exists()  # a dry run writes no run
