"""The sweep service: run a plan (run.py), finish an interrupted one (resume.py), and
estimate how long one takes (estimate.py)."""
