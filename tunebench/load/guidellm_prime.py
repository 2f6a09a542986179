"""Priming shared prefixes before a measured benchmark (`load.data.prefix.prime`).

A server that has run for a while holds its popular system prompts in its prefix cache; a
fresh point's window begins with none of them, and its first request of every group pays
the whole prefix. Priming sends each group's prefix once, as a one-token completion, after
the previous benchmark and before this one's first request, so the window starts with every
prefix cached (unless the cache evicts them) and its hit rate is that of a warm server.

The prefixes must be the very texts GuideLLM's synthetic data will send in that benchmark:
GuideLLM makes them afresh for each iteration of its data loader (one per benchmark), from
a Faker seeded with the dataset's seed plus the iteration (its `_SyntheticTextExamplesIterable`).
`benchmark_prefixes` asks GuideLLM's own prefix generator for the whole list of its next
iteration instead of one draw, so the texts, their order (group 1 first) and their tokens are
GuideLLM's. Runs inside the GuideLLM worker process (load/guidellm_worker.py), which has
GuideLLM imported.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

# What follows the prefix in a prime request. GuideLLM's own prompts start with a digit
# (their iteration number) after the space that joins them to the prefix; so does this,
# so the tokenizer cuts the prefix's tokens the same way in both.
PRIME_TAIL = "0"
PRIME_CONCURRENCY = 4
# per request, below the parent's 30-s stall margin (each answer is a sign of progress)
PRIME_TIMEOUT_S = 20.0
# Quiet before and after the prime, longer than the default 1-s /metrics scrape: the
# server's counters for the previous window end, and for this window begin, outside it.
PRIME_SETTLE_S = 2.0
_ROUTES = {"/v1/completions": "v1/completions", "/v1/chat/completions": "v1/chat/completions"}


class _WholeList:
    """Stands in for GuideLLM's Random: its prefix generator yields `choice(prefixes)`,
    and this choice is the whole weighted list."""

    @staticmethod
    def choice(items: list[str]) -> list[str]:
        return list(items)


def benchmark_prefixes(loader: Any) -> list[str]:
    """The group prefixes of the loader's next iteration (its next benchmark), group 1 first;
    empty when its data is not GuideLLM's synthetic text with prefix buckets."""
    from faker import Faker
    from guidellm.data.deserializers.synthetic import _SyntheticTextExamplesIterable

    datasets = getattr(getattr(loader, "dataset", None), "datasets", None) or []
    examples = getattr(datasets[0], "_ex_iterable", None) if datasets else None
    if not isinstance(examples, _SyntheticTextExamplesIterable):
        return []
    if not examples.config.prefix_buckets:
        return []
    # GuideLLM seeds each iteration with its dataset seed plus the epoch the loader sets
    # (TorchDataLoader.epoch: 0 for the first benchmark, +1 for each after it)
    faker = Faker()
    faker.seed_instance(examples.random_seed + loader.epoch)
    weighted = next(examples._create_prefix_iter(faker, _WholeList()))
    return list(dict.fromkeys(weighted))  # each group's prefix once, in group order


def prime_request(prefix: str, request_format: str, model: str) -> tuple[str, dict[str, Any]]:
    """(route, body) of one prime request, shaped as GuideLLM shapes its requests: for
    completions the prefix and the prompt joined by a space, for chat the prefix as the
    system message."""
    route = _ROUTES.get(request_format, "v1/completions")
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "temperature": 0}
    if route == "v1/chat/completions":
        body["messages"] = [
            {"role": "system", "content": prefix},
            {"role": "user", "content": PRIME_TAIL},
        ]
    else:
        body["prompt"] = f"{prefix} {PRIME_TAIL}"
    return route, body


async def prime_prefixes(
    prefixes: list[str],
    job: dict[str, Any],
    on_progress: Callable[[int], None],
    transport: Any = None,  # tests: an httpx transport instead of the network
) -> int:
    """Send each prefix once (a failed one once more); the number the server answered.
    `on_progress(answered so far)` after each prefix, answered or not. Never raises: a
    prefix that could not be primed is counted, not fatal."""
    import httpx

    headers = {"Authorization": f"Bearer {job['api_key']}"} if job.get("api_key") else {}
    target = str(job["target"]).rstrip("/")
    gate = asyncio.Semaphore(PRIME_CONCURRENCY)
    answered = 0

    async def send(client: httpx.AsyncClient, prefix: str) -> None:
        nonlocal answered
        route, body = prime_request(prefix, job.get("request_format", ""), job["model"])
        async with gate:
            for _attempt in range(2):
                try:
                    response = await client.post(f"{target}/{route}", json=body, headers=headers)
                except httpx.HTTPError:
                    continue
                if response.status_code == 200:
                    answered += 1
                    break
            on_progress(answered)

    await asyncio.sleep(PRIME_SETTLE_S)
    async with httpx.AsyncClient(
        timeout=PRIME_TIMEOUT_S, verify=job.get("verify_tls", True), transport=transport
    ) as client:
        await asyncio.gather(*(send(client, prefix) for prefix in prefixes))
    await asyncio.sleep(PRIME_SETTLE_S)
    return answered


class Primer:
    """Primes the prefixes of each benchmark of one group just before it starts; says
    {"event": "priming"} after each prefix and {"event": "primed", "index", "groups",
    "answered", "seconds"} when done (`emit`: the worker's event line)."""

    def __init__(self, loader: Any, job: dict[str, Any], first_index: int, emit: Callable):
        self.loader = loader
        self.job = job
        self.index = first_index  # the benchmark slot the next prime is for
        self.emit = emit

    async def __call__(self) -> None:
        started = time.monotonic()
        prefixes = benchmark_prefixes(self.loader)
        answered = await prime_prefixes(
            prefixes, self.job, lambda n: self.emit("priming", index=self.index, answered=n)
        )
        self.emit(
            "primed",
            index=self.index,
            groups=len(prefixes),
            answered=answered,
            seconds=round(time.monotonic() - started, 3),
        )
        self.index += 1
