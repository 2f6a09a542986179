"""The load kinds: a profile's `kind` in a sweep file and a point's `load_kind` in points.csv.

A `StrEnum`: every member is the plain string stored in points.csv, the manifest and the
sweep file's YAML, so a member and its string compare, hash and print alike. The groups
below are sets of those plain strings, so a cell read back from a CSV tests as a member does.
"""

from __future__ import annotations

from enum import StrEnum, nonmember


class LoadKind(StrEnum):
    SYNCHRONOUS = "synchronous"  # one stream, one request at a time
    CONCURRENT = "concurrent"  # `target` streams
    THROUGHPUT = "throughput"  # as many requests as `target` streams at most
    POISSON = "poisson"  # `target` req/s, Poisson arrivals
    CONSTANT = "constant"  # `target` req/s, evenly spaced
    SWEEP = "sweep"  # GuideLLM's sweep: synchronous to throughput in steps
    CAPACITY = "capacity"  # a search for the highest rate that meets the SLO
    REPLAY = "replay"  # a recorded trace at `target` x its own pace
    GAMMA = "gamma"  # imported `vllm bench serve` results with a burstiness other than 1
    BATCH = "batch"  # offline throughput: `target` is records

    #: A target of streams.
    STREAM = nonmember(frozenset({CONCURRENT, THROUGHPUT}))
    #: A target of requests per second, with the arrivals tunebench itself sends.
    RATE = nonmember(frozenset({POISSON, CONSTANT}))
    #: A fixed number of streams: synchronous is one, concurrent `target`.
    FIXED_STREAMS = nonmember(frozenset({SYNCHRONOUS, CONCURRENT}))
    #: The client sends a request only when an answer came back: the server sets the rate.
    CLOSED_LOOP = nonmember(frozenset({SYNCHRONOUS, CONCURRENT, THROUGHPUT}))
    #: A profile that takes neither streams nor rate.
    UNTARGETED = nonmember(frozenset({SYNCHRONOUS, SWEEP}))
    #: GuideLLM profiles that `vllm bench serve` has no counterpart of.
    GUIDELLM_ONLY = nonmember(frozenset({CONSTANT, SWEEP}))
    #: Points a sentinel can repeat after the last (a trace or a session plays a script
    #: once; a sweep profile is many points of its own).
    REPEATABLE = nonmember(frozenset({CONCURRENT, POISSON, CONSTANT, SYNCHRONOUS}))
