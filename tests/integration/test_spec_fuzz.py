"""Property-based fuzz of the sweep and batch spec loaders.

Property: whatever the file holds, the checks `tunebench sweep/batch --dry-run` make before
anything starts either accept it or raise a SpecError (the CLI's exit 2) whose message is
one line and names the file. Any other exception is a bug.

Inputs, each written to a file with a generated name:
  - mutations of valid specs (keys dropped, renamed or added; values replaced by other
    types, negative, zero, huge, NaN/inf, unicode, dates, binary, nested lists/mappings);
  - character-level edits of a valid spec's YAML and soups of YAML tokens;
  - random bytes, other encodings, oversized files.

Runs are derandomized (a fixed seed per test, no example database), so CI is reproducible.
The examples actually run are counted and the total per loader checked at the end.
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tunebench.errors import SpecError
from tunebench.spec.loading import MAX_SPEC_BYTES

EXAMPLES = Counter()
SECONDS = Counter()
MIN_EXAMPLES = 1000  # per loader

# ---------------------------------------------------------------------------- loaders


def load_sweep(path: Path) -> None:
    """What `tunebench sweep SPEC --dry-run` checks before it prints the plan."""
    from tunebench.spec.loading import load_spec
    from tunebench.spec.plan import build_plan
    from tunebench.sweep.estimate import estimate_seconds

    spec = load_spec(path)
    plan = build_plan(spec, path)
    estimate_seconds(spec, plan)
    for config in plan.configs:
        config.command_args()


def load_batch(path: Path) -> None:
    """What `tunebench batch SPEC --dry-run` checks before it prints the plan."""
    from tunebench.batch.run import json_schema_of, plan_configs, render_prompts
    from tunebench.batch.spec import load_batch_spec

    spec, _ = load_batch_spec(path)
    render_prompts(spec, path)
    json_schema_of(spec, path)
    for config in plan_configs(spec, path):
        config.command_args()


LOADERS: dict[str, Callable[[Path], None]] = {"sweep": load_sweep, "batch": load_batch}

# ---------------------------------------------------------------------- valid specs

SWEEP_BASES = [
    {
        "name": "fuzz",
        "description": "matrix and variants",
        "model": "builtin:tiny-llama-random",
        "deployment": {
            "kind": "local",
            "start_timeout_s": 60,
            "env": {"VLLM_LOGGING_LEVEL": "INFO"},
            "cpu": "auto",
            "kv_cache_space_gib": 1,
        },
        "server": {
            "args": {
                "max-model-len": 512,
                "enforce-eager": True,
                "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
            },
            "variants": [
                {"name": "base"},
                {"name": "small", "args": {"max-num-batched-tokens": 1024}},
            ],
            "matrix": {"max-num-seqs": [2, 8]},
        },
        "load": {
            "data": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 32},
            "profiles": [
                {"kind": "concurrent", "streams": [1, 4], "max_seconds": 5},
                {"kind": "poisson", "rate": [0.5, 2], "max_seconds": 5, "warmup": 0.1},
                {"kind": "synchronous", "max_requests": 20},
            ],
        },
        "metrics": {"enabled": True, "interval_s": 1},
        "slo": {"ttft_ms": {"p95": 500}, "max_error_rate": 0.01},
        "client_tolerance": 0.1,
        "output": "reports",
    },
    {
        "name": "fuzz-tune",
        "model": "builtin:tiny-llama-random",
        "deployment": {"kind": "endpoint", "url": "http://127.0.0.1:1"},
        "server": {"args": {"max-model-len": 512}},
        "load": {
            "data": {"kind": "file", "path": "prompts.jsonl"},
            "profiles": [
                {"kind": "capacity", "max_seconds": 5, "start_rate": 1, "max_probes": 4},
                {"kind": "sweep", "sweep_points": 4, "max_seconds": 5},
            ],
        },
        "slo": {"itl_ms": {"p50": 50}, "e2e_s": {"p99": 10}},
        "tune": {
            "objective": "capacity",
            "trials": 4,
            "space": {
                "max-num-seqs": {"low": 1, "high": 16, "log": True},
                "enable-chunked-prefill": {"choices": [True, False]},
                "max-num-batched-tokens": {
                    "choices": [512, 2048],
                    "ordered": True,
                    "when": {"enable-chunked-prefill": True},
                },
            },
            "enqueue": [{"max-num-seqs": 4}],
        },
    },
]
# endpoint + tune is refused: mutations that drop `tune` or change the kind make it valid
SWEEP_BASES[1]["deployment"] = {"kind": "recorded", "run": "earlier-run"}

BATCH_BASES = [
    {
        "name": "fuzz-batch",
        "model": "builtin:tiny-llama-random",
        "engine": "vllm",
        "dataset": {"path": "data/records.jsonl", "id_field": "id", "limit": 3},
        "prompt": {
            "mode": "completion",
            "template": "Recipe {{ title }}: {{ steps | join(', ') }}",
        },
        "sampling": {"temperature": 0, "max_tokens": 32, "seed": 0},
        "structured_output": {
            "json_schema": {
                "type": "object",
                "properties": {"minutes": {"type": "integer", "minimum": 0}},
                "required": ["minutes"],
            }
        },
        "engine_args": {"args": {"max-model-len": 512}, "matrix": {"max-num-seqs": [8, 32]}},
        "shards": 1,
        "output": "reports",
    },
    {
        "name": "fuzz-batch-chat",
        "model": "builtin:tiny-llama-random",
        "engine": "transformers",
        "dataset": {"path": "data/records.jsonl"},
        "prompt": {"mode": "chat", "template_file": "prompt.j2", "system": "be brief"},
        "sampling": {"max_tokens": 16, "ignore_eos": True},
        "transformers": {"batch_size": 4, "dtype": "float32"},
        "slurm": {"partition": "gpu", "gpus_per_node": 1, "setup": ["module load cuda"]},
    },
]

RECORDS = [{"id": f"r{n}", "title": f"Pie {n}", "steps": ["mix", "bake"]} for n in range(4)]


def write_support_files(directory: Path) -> None:
    """The files the valid specs refer to, so that valid specs pass the file checks too."""
    (directory / "data").mkdir(exist_ok=True)
    (directory / "data" / "records.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in RECORDS)
    )
    (directory / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    (directory / "prompt.j2").write_text("{{ title }}")


def test_the_bases_are_valid(tmp_path):
    write_support_files(tmp_path)
    for kind, bases in (("sweep", SWEEP_BASES), ("batch", BATCH_BASES)):
        for number, base in enumerate(bases):
            path = tmp_path / f"{kind}-{number}.yaml"
            path.write_text(yaml.safe_dump(base, sort_keys=False))
            LOADERS[kind](path)


# -------------------------------------------------------------------------- values

KNOWN_KEYS = sorted(
    {
        "name",
        "description",
        "model",
        "tokenizer",
        "served_model_name",
        "deployment",
        "server",
        "load",
        "metrics",
        "slo",
        "client_tolerance",
        "output",
        "tune",
        "kind",
        "args",
        "variants",
        "matrix",
        "data",
        "profiles",
        "streams",
        "rate",
        "max_seconds",
        "max_requests",
        "warmup",
        "sweep_points",
        "arrival",
        "start_rate",
        "tolerance",
        "max_probes",
        "max_rate",
        "url",
        "run",
        "engine",
        "dataset",
        "prompt",
        "template",
        "template_file",
        "mode",
        "system",
        "sampling",
        "max_tokens",
        "structured_output",
        "json_schema",
        "json_schema_file",
        "choice",
        "engine_args",
        "shards",
        "path",
        "id_field",
        "limit",
        "prompt_tokens",
        "output_tokens",
        "space",
        "low",
        "high",
        "choices",
        "when",
        "enqueue",
        "objective",
        "ttft_ms",
        "p95",
        "max-num-seqs",
        "max-num-batched-tokens",
        "max-model-len",
        "enable-prefix-caching",
        "no-enable-prefix-caching",
        "enable-chunked-prefill",
        "speculative-config",
        "compilation-config",
        "gpu-memory-utilization",
        "tensor-parallel-size",
        "max_num_seqs",
        "--max-num-seqs",
        "no-enforce-eager",
        "enforce-eager",
    }
)
WORDS = [
    "",
    " ",
    "-",
    "auto",
    "-1",
    "0",
    "8k",
    "8K",
    "2.5K",
    "1e3",
    "{}",
    "{bad json",
    '{"method": "ngram"}',
    "[1, 2]",
    "null",
    "yes",
    "builtin:tiny-llama-random",
    "builtin:nope",
    "./missing-model",
    "/",
    "../..",
    "local",
    "endpoint",
    "recorded",
    "replay",
    "helm",
    "synthetic",
    "file",
    "concurrent",
    "poisson",
    "constant",
    "throughput",
    "sweep",
    "synchronous",
    "capacity",
    "burst",
    "vllm",
    "transformers",
    "ray",
    "chat",
    "completion",
    "http://127.0.0.1:1",
    "127.0.0.1:8000",
    "p95",
    "p42",
    "data.xlsx",
    "data/records.jsonl",
    "{{ missing }}",
    "{{ title + 1 }}",
    "{% for %}",
    "{{ steps | join(1) }}",
    "\u00e9t\u00e9",
    "\u4e2d\u6587",
    "a\nb",
    "tab\there",
    "x" * 300,
    "\u202e",
    "\x00",
    "~",
    "*",
    "&a",
]
NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.integers(),
    st.sampled_from([2**31, 2**63, -(2**63), 10**30, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, -0.5, 1e-300, 1e308, -1e308]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    NUMBERS,
    st.sampled_from(WORDS),
    st.text(max_size=12),
    st.dates(),
    st.binary(max_size=4),
)
KEYS = st.one_of(
    st.sampled_from(KNOWN_KEYS), st.text(max_size=10), st.integers(-2, 2), st.none(), st.booleans()
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=8,
)


def _containers(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    found = []
    if isinstance(value, (dict, list)):
        found.append((path, value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            found += _containers(child, (*path, key))
    return found


def _typo(key: Any) -> Any:
    if not isinstance(key, str) or not key:
        return f"{key}x"
    if "-" in key:
        return key.replace("-", "_")
    if "_" in key:
        return key.replace("_", "-")
    return key[:-1] or "x"


@st.composite
def mutated(draw, bases: list[dict]) -> Any:
    """A valid spec with 1-4 random edits."""
    document = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 4))):
        # deepest first: Hypothesis leans to the first choices, and most settings are deep
        _, container = draw(st.sampled_from(_containers(document)[::-1]))
        if isinstance(container, dict):
            op = draw(st.sampled_from(["drop", "set", "add", "rename"] if container else ["add"]))
            key = draw(st.sampled_from(list(container))) if container else None
            if op == "drop":
                del container[key]
            elif op == "set":
                container[key] = draw(VALUES)
            elif op == "add":
                container[draw(KEYS)] = draw(VALUES)
            else:
                container[_typo(key)] = container.pop(key)
        else:
            op = draw(
                st.sampled_from(
                    ["drop", "set", "append", "empty", "repeat"] if container else ["append"]
                )
            )
            index = draw(st.integers(0, len(container) - 1)) if container else 0
            if op == "drop":
                del container[index]
            elif op == "set":
                container[index] = draw(VALUES)
            elif op == "append":
                container.append(draw(VALUES))
            elif op == "empty":
                container.clear()
            else:
                container.append(copy.deepcopy(container[index]))
        if draw(st.integers(0, 99)) >= 97:  # now and then the whole document
            document = draw(VALUES)
            break
    return document


def dump(document: Any, flow: bool) -> str:
    return yaml.safe_dump(
        document, sort_keys=False, allow_unicode=True, default_flow_style=flow, width=10_000
    )


YAML_TOKENS = [
    "name: x",
    "model: builtin:tiny-llama-random",
    "load:",
    "server:",
    "  args:",
    "  matrix:",
    "deployment: {kind: local}",
    "profiles:",
    "- ",
    "  ",
    "    ",
    "\n",
    "\n",
    "\t",
    ":",
    ": ",
    ",",
    "[",
    "]",
    "{",
    "}",
    "&a ",
    "*a",
    "*b",
    "<<: *a",
    "? ",
    "!!binary ",
    "!!python/object:os.system ",
    "!!set ",
    "!!timestamp ",
    "!!float ",
    "!!int ",
    "!!bool ",
    "!!str ",
    "!!map ",
    "!!seq ",
    "!!omap ",
    "!!pairs ",
    "!!null ",
    "!!merge ",
    "'",
    '"',
    "#",
    "|",
    ">",
    "---",
    "...",
    "%YAML 1.1",
    "%TAG ! !x",
    "\x00",
    "\ufeff",
    "\u00e9",
    "\u2028",
    ".nan",
    ".inf",
    "-.inf",
    "0x1F",
    "1e999",
    "2001-12-14",
    "~",
    "null",
    "yes",
    "no",
    "on",
    "12:30:00",
    "9" * 40,
    "@",
    "`",
    "%",
]


@st.composite
def yaml_text(draw, bases: list[dict]) -> str:
    """YAML text that is almost a valid spec, a soup of YAML tokens, or a nesting/alias bomb."""
    shape = draw(st.integers(0, 9))
    if shape <= 5:  # character-level edits of a valid spec
        text = dump(draw(st.sampled_from(bases)), flow=draw(st.booleans()))
        for _ in range(draw(st.integers(1, 5))):
            at = draw(st.integers(0, len(text)))
            edit = draw(st.sampled_from(["insert", "delete", "replace", "dup-line", "indent"]))
            if edit == "insert":
                text = (
                    text[:at] + draw(st.sampled_from(YAML_TOKENS) | st.text(max_size=3)) + text[at:]
                )
            elif edit == "delete":
                text = text[:at] + text[at + draw(st.integers(1, 20)) :]
            elif edit == "replace":
                text = text[:at] + draw(st.text(min_size=1, max_size=2)) + text[at + 1 :]
            else:
                lines = text.split("\n")
                line = draw(st.integers(0, len(lines) - 1))
                if edit == "dup-line":
                    lines.insert(line, lines[line])
                else:
                    lines[line] = (
                        draw(st.sampled_from([" ", "  ", "\t", ""])) + lines[line].lstrip()
                    )
                text = "\n".join(lines)
        return text
    if shape <= 7:
        return "".join(
            draw(st.lists(st.sampled_from(YAML_TOKENS) | st.text(max_size=4), max_size=40))
        )
    depth = draw(st.integers(10, 3000))
    bomb = draw(st.sampled_from(["flow", "block", "alias", "self"]))
    if bomb == "flow":
        return "name: x\ndescription: " + "[" * depth + "]" * depth + "\n"
    if bomb == "block":
        return "".join(f"{'  ' * n}k{n}:\n" for n in range(min(depth, 400))) + "  " * 400 + "v\n"
    if bomb == "alias":
        levels = min(depth // 100 + 5, 30)
        lines = ["a0: &a0 [x, x, x, x]"] + [
            f"a{n}: &a{n} [*a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}]" for n in range(1, levels)
        ]
        return (
            "\n".join(lines)
            + f"\nname: x\nserver: {{args: {{speculative-config: {{a: *a{levels - 1}}}}}}}\n"
        )
    return "name: &n [*n]\n"


@st.composite
def raw_bytes(draw, bases: list[dict]) -> bytes:
    """Random bytes, a valid spec in another encoding or with bad bytes, or an oversized file."""
    shape = draw(st.integers(0, 9))
    text = dump(draw(st.sampled_from(bases)), flow=False).replace("fuzz", "f\u00fczz\u00e9")
    if shape <= 3:
        return draw(st.binary(max_size=400))
    if shape <= 5:
        return text.encode(
            draw(
                st.sampled_from(["latin-1", "utf-16", "utf-16-be", "utf-32", "cp1252", "utf-8-sig"])
            ),
            errors="replace",
        )
    if shape <= 8:
        raw = bytearray(text.encode())
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(raw)))
            raw[at:at] = draw(st.binary(min_size=1, max_size=3))
        return bytes(raw)
    size = MAX_SPEC_BYTES + draw(st.integers(-200, 200))
    padding = "#" * max(0, size - len(text.encode()) - 1)
    return (text + padding + "\n").encode()


# Printable names (letters, digits, punctuation, symbols, spaces, any script): a message
# shows other characters escaped, which would not be the name as given.
FILE_NAMES = st.text(
    st.characters(
        codec="utf-8",
        categories=("L", "N", "P", "S"),
        include_characters=" ",
        exclude_characters="/\\",
    ),
    min_size=1,
    max_size=16,
)

# -------------------------------------------------------------------------- property


def check(kind: str, directory: Path, name: str, content: bytes | str) -> None:
    path = directory / f"{name}.yaml"
    if isinstance(content, str):
        content = content.encode("utf-8", errors="surrogatepass")
    path.write_bytes(content)
    started = time.perf_counter()
    try:
        LOADERS[kind](path)
    except SpecError as exc:
        message = str(exc)
        assert message, "empty message"
        assert len(message.splitlines()) == 1 and message.isprintable(), repr(message)
        assert "Traceback" not in message
        assert str(path) in message or str(directory) in message, (
            f"the message does not name the file: {message!r}"
        )
    finally:
        SECONDS[kind] += time.perf_counter() - started
        EXAMPLES[kind] += 1
        path.unlink()


FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("fuzz")
    write_support_files(directory)
    return directory


@pytest.mark.parametrize("kind", ["sweep", "batch"])
@settings(FUZZ, max_examples=500)
@given(data=st.data())
def test_mutated_specs(workdir, kind, data):
    bases = SWEEP_BASES if kind == "sweep" else BATCH_BASES
    document = data.draw(mutated(bases))
    text = dump(document, flow=data.draw(st.booleans()))
    check(kind, workdir, data.draw(FILE_NAMES), text)


@pytest.mark.parametrize("kind", ["sweep", "batch"])
@settings(FUZZ, max_examples=350)
@given(data=st.data())
def test_yaml_text(workdir, kind, data):
    bases = SWEEP_BASES if kind == "sweep" else BATCH_BASES
    check(kind, workdir, data.draw(FILE_NAMES), data.draw(yaml_text(bases)))


@pytest.mark.parametrize("kind", ["sweep", "batch"])
@settings(FUZZ, max_examples=200)
@given(data=st.data())
def test_bytes(workdir, kind, data):
    bases = SWEEP_BASES if kind == "sweep" else BATCH_BASES
    check(kind, workdir, data.draw(FILE_NAMES), data.draw(raw_bytes(bases)))


def test_fuzz_ran_enough_examples(capsys):
    """Last in this file: the examples above really ran, at least MIN_EXAMPLES per loader."""
    ran = {k: v for k, v in EXAMPLES.items() if v}
    if set(ran) != set(LOADERS):
        pytest.skip("the fuzz tests were not all selected")
    summary = ", ".join(
        f"{kind} {EXAMPLES[kind]} examples in {SECONDS[kind]:.1f} s" for kind in LOADERS
    )
    with capsys.disabled():
        print(f"\nspec fuzz: {summary}")
    for kind in LOADERS:
        assert EXAMPLES[kind] >= MIN_EXAMPLES, summary
