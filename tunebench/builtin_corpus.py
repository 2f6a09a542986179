"""The text the trained builtin model learns from: generated here, nothing downloaded.

Four kinds of document, each drawn from a seeded `random.Random`, so the corpus is the same
on every machine and Python version:

- **arithmetic**: additions (and some subtractions) of numbers 0-99 in the format of
  tunebench's lm-eval task (`Question: What is a plus b?\\nAnswer: c`) and two others. The
  task's own items (`arithmetic_pairs()`, the pairs lm-eval asks) are held out in both
  orders, and so is a validation set: the model is scored on sums it never saw.
- **counting**: counting runs, arithmetic progressions, the Fibonacci numbers, numbered lists.
- **sentences**: templated prose about serving models, recipes, short stories, letters,
  facts (capitals, dates).
- **code**: templated Python functions, SQL queries and JSON records.

All of it is written by this module: no third-party text, so the weights carry no licence
but the project's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

# The lm-eval task's questions: `tunebench.quality.lmeval.write_arithmetic_task` writes these.
TASK_ITEMS = 100
TASK_SEED = 0
VALIDATION_ITEMS = 200
_VALIDATION_SEED = 7


def arithmetic_pairs(items: int = TASK_ITEMS, seed: int = TASK_SEED) -> list[tuple[int, int]]:
    """The (a, b) pairs of the generated lm-eval task, in its order."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(items):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        pairs.append((a, b))
    return pairs


def _unordered(pairs: list[tuple[int, int]]) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for a, b in pairs}


def held_out() -> set[tuple[int, int]]:
    """Pairs (as sorted tuples) the corpus never adds: the task's and the validation set's."""
    return _unordered(arithmetic_pairs()) | _unordered(validation_pairs())


def validation_pairs() -> list[tuple[int, int]]:
    """Pairs to watch training by, disjoint from the task's (in either order)."""
    task = _unordered(arithmetic_pairs())
    rng = random.Random(_VALIDATION_SEED)
    pairs: list[tuple[int, int]] = []
    while len(pairs) < VALIDATION_ITEMS:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        if (min(a, b), max(a, b)) not in task and (a, b) not in pairs:
            pairs.append((a, b))
    return pairs


def task_prompt(a: int, b: int) -> str:
    """The lm-eval task's prompt (its `doc_to_text`); the answer follows as ` {a + b}`."""
    return f"Question: What is {a} plus {b}?\nAnswer:"


_NOUNS = (
    "server model request token cache batch queue engine scheduler kernel layer worker "
    "client window report sweep point prompt answer node pod cluster route replica"
).split()
_ADJECTIVES = "small large busy idle new old fast slow first last quiet warm".split()
_VERBS = (
    "started stopped loaded read wrote sent received measured answered scheduled served "
    "checked saved moved counted"
).split()
_OBJECTS = (
    "the model weights|the first request|every token|the metrics|a new batch|the log|"
    "the results|the prompt|the cache|the report|ten requests|the queue"
).split("|")
_PLACES = "village city valley forest harbour town garden station".split()
_WATERS = "river lake sea bridge mountain road".split()
_PEOPLE = "baker teacher farmer painter sailor doctor gardener engineer".split()
_HABITS = (
    "counted the stars every night|baked bread every morning|kept a small garden|"
    "wrote letters to the city|repaired old clocks|walked along the water"
).split("|")
_DISHES = "bread a cake pancakes cookies a pie muffins".split(" ")
_INGREDIENTS = "flour sugar butter eggs milk salt water honey".split()
_STEPS = "stir the mix|heat the pan|knead the dough|fold in the eggs|let it rest".split("|")
_CAPITALS = (
    ("France", "Paris"),
    ("Germany", "Berlin"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Japan", "Tokyo"),
    ("Canada", "Ottawa"),
    ("Egypt", "Cairo"),
    ("Peru", "Lima"),
    ("Norway", "Oslo"),
    ("Kenya", "Nairobi"),
)
_COLOURS = "red blue yellow green orange purple black white".split()
_DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_NAMES = "Ada Alan Grace Linus Barbara Ken Margaret Dennis".split()
_ROLES = "engineer analyst designer manager tester writer".split()
_SKILLS = "python sql go rust testing design writing math".split()
_TABLES = "orders users items events requests".split()
_PLANS = "review move check measure restart test".split()


def _arithmetic(rng: random.Random, blocked: set[tuple[int, int]]) -> str:
    lines = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        while True:
            a, b = rng.randint(0, 99), rng.randint(0, 99)
            if (min(a, b), max(a, b)) not in blocked:
                break
        kind = rng.random()
        if kind < 0.62:
            lines.append(f"{task_prompt(a, b)} {a + b}")
        elif kind < 0.77:
            lines.append(f"Q: What is {a} plus {b}?\nA: {a + b}")
        elif kind < 0.9:
            lines.append(f"{a} + {b} = {a + b}")
        else:
            a, b = max(a, b), min(a, b)
            lines.append(f"Question: What is {a} minus {b}?\nAnswer: {a - b}")
    return "\n".join(lines) + "\n"


def _counting(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        start = rng.randint(0, 90)
        return f"Count from {start}: " + ", ".join(
            str(start + i) for i in range(rng.randint(5, 12))
        )
    if kind == 1:
        start, step = rng.randint(0, 30), rng.randint(2, 9)
        return ", ".join(str(start + step * i) for i in range(rng.randint(5, 10)))
    if kind == 2:
        fib = [1, 1]
        while len(fib) < 12:
            fib.append(fib[-1] + fib[-2])
        return ", ".join(str(n) for n in fib[: rng.randint(6, 12)])
    if kind == 3:
        colours = rng.sample(_COLOURS, 3)
        return "List three colors:\n" + "\n".join(f"{i + 1}. {c}" for i, c in enumerate(colours))
    items = rng.sample(_NOUNS, rng.randint(3, 5))
    return "Steps:\n" + "\n".join(f"{i + 1}. Check the {n}." for i, n in enumerate(items))


def _sentences(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        out = []
        for _ in range(rng.randint(1, 3)):
            noun, adjective = rng.choice(_NOUNS), rng.choice(_ADJECTIVES)
            verb, verb2 = rng.sample(_VERBS, 2)
            out.append(
                f"The {adjective} {noun} {verb} {rng.choice(_OBJECTS)} and "
                f"{verb2} {rng.choice(_OBJECTS)}."
            )
        return " ".join(out)
    if kind == 1:
        return (
            f"Once upon a time, in a small {rng.choice(_PLACES)} by the {rng.choice(_WATERS)}, "
            f"there lived a {rng.choice(_PEOPLE)} who {rng.choice(_HABITS)}."
        )
    if kind == 2:
        first, second = rng.sample(_INGREDIENTS, 2)
        return (
            f"To bake {rng.choice(_DISHES)}, first mix the {first} with the {second}, "
            f"then {rng.choice(_STEPS)} for {rng.randint(2, 40)} minutes."
        )
    if kind == 3:
        country, capital = rng.choice(_CAPITALS)
        return f"The capital of {country} is {capital}."
    if kind == 4:
        return (
            f"Dear customer, thank you for your order. Your package will arrive on "
            f"{rng.choice(_DAYS)}."
        )
    if kind == 5:
        return (
            f"A latency budget of {rng.randint(1, 9) * 100} ms means that each request "
            f"must be answered within {rng.randint(1, 9) * 100} ms."
        )
    return (
        f"Summary of the meeting: the team agreed to {rng.choice(_PLANS)} "
        f"the {rng.choice(_NOUNS)} on {rng.choice(_DAYS)}."
    )


def _code(rng: random.Random) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        k = rng.randint(1, 9)
        op, word = rng.choice((("+", "plus"), ("*", "times"), ("-", "minus")))
        name = rng.choice(("add", "scale", "shift", "step"))
        return f'def {name}_{k}(n):\n    """Return n {word} {k}."""\n    return n {op} {k}\n'
    if kind == 1:
        table = rng.choice(_TABLES)
        return (
            f"SELECT name, COUNT(*) FROM {table} WHERE day = '{rng.choice(_DAYS)}' GROUP BY name;"
        )
    skills = ", ".join(f'"{s}"' for s in rng.sample(_SKILLS, rng.randint(1, 3)))
    return (
        f'{{"name": "{rng.choice(_NAMES)}", "role": "{rng.choice(_ROLES)}", "skills": [{skills}]}}'
    )


def documents(seed: int) -> Iterator[str]:
    """An endless, seeded stream of documents: seven in ten arithmetic."""
    rng = random.Random(seed)
    blocked = held_out()
    while True:
        kind = rng.random()
        if kind < 0.7:
            yield _arithmetic(rng, blocked)
        elif kind < 0.78:
            yield _counting(rng)
        elif kind < 0.93:
            yield _sentences(rng)
        else:
            yield _code(rng)


#: The seed of `load_prompts`: none of the training script's (1234 to 1238).
LOAD_PROMPTS_SEED = 2026


def load_prompts(count: int = 1000, chars: int = 160, seed: int = LOAD_PROMPTS_SEED) -> list[str]:
    """Prompts of the corpus's kind for load on the trained builtin model
    (sweeps/data/tiny-llama-prompts.jsonl): documents of a seed the training never drew,
    one a line, joined until `chars` characters and cut at the last whitespace before them,
    so the model continues text of the kind it learned, as a served model continues its
    users' text.
    GuideLLM's synthetic prompts are random text to this model, and a speculator trained on
    its hidden states is accepted less there than a user's traffic would accept it."""
    docs = documents(seed)
    out: list[str] = []
    while len(out) < count:
        text = ""
        while len(text) < chars:
            text += next(docs).rstrip("\n") + "\n"
        cut = text[:chars]
        out.append(cut[: cut.rfind(" ")] if " " in cut else cut)
    return out


def load_prompts_jsonl() -> str:
    """sweeps/data/tiny-llama-prompts.jsonl as shipped: one `{"prompt", "output_tokens_count"}`
    line per prompt (GuideLLM's file columns; 32 tokens, as the demo's synthetic load asks)."""
    lines = [json.dumps({"prompt": p, "output_tokens_count": 32}) for p in load_prompts()]
    return "\n".join(lines) + "\n"
