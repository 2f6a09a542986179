"""Does a configuration still answer right? Greedy completions with logprobs, collected on
the configuration's own server, compared with a reference configuration's (see
docs/quality.md)."""
