"""Tuning: SLO capacity search and configuration pruning (the Optuna loop builds on these)."""
