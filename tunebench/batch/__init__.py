"""Offline batch throughput: a dataset through vLLM (or transformers, or Ray Data LLM)."""
