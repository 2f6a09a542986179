"""A capacity probe's progress line names its target and what it told the search, and the
advice after a search names the limit that stopped it (issue 46, item 11)."""

from __future__ import annotations

import json

from rich.console import Console

from tunebench.analysis.best import best_config, headline
from tunebench.report.live import ConsoleReporter
from tunebench.report.text import describe_capacity, describe_trial_value
from tunebench.testing import make_synthetic_run

PROBE = {
    "point_id": "capacity-3",
    "load_kind": "poisson",
    "target": 3.5,
    "achieved_rps": 3.41,
    "achieved_concurrency": 1.2,
    "ttft_p50_ms": 41.0,
    "output_tok_s": 109.0,
    "requests_ok": 140,
    "requests_failed": 0,
    "valid": "True",
}


def printed(row: dict) -> str:
    console = Console(width=300, record=True, force_terminal=False)
    ConsoleReporter(console).point_done(None, row)
    return console.export_text().strip()


def test_a_probe_line_names_its_target_and_whether_it_met_the_slo():
    met = printed({**PROBE, "slo_met": "True"})
    assert met.startswith("capacity-3       target 3.5 req/s achieved 3.41 req/s")
    assert met.endswith("140 ok / 0 failed; SLO met")
    missed = printed(
        {**PROBE, "slo_met": "False", "slo_violations": "TTFT p90: 85 > 60 ms; error rate 0.1"}
    )
    assert missed.endswith("; SLO missed (TTFT p90: 85 > 60 ms)")
    limited = printed({**PROBE, "slo_met": "True", "client_limited": "True"})
    assert limited.endswith("SLO met; client-limited: no server capacity proven here")
    assert printed({**PROBE, "slo_met": ""}).endswith("; SLO not judged")
    invalid = printed({**PROBE, "valid": "False", "slo_met": "True"})
    assert "(invalid); no server capacity proven at this rate" in invalid


def test_a_probe_read_from_too_few_requests_says_so():
    """At a low rate a probe's window (capped at 10x max_seconds) holds fewer requests than
    its p90 needs; the verdict counts all the same, so the line says what it rests on."""
    thin = printed(
        {
            **PROBE,
            "requests_ok": 6,
            "slo_met": "True",
            "thin_percentiles": "p90: 6 requests, need 36",
        }
    )
    assert thin.endswith(
        "6 ok / 0 failed; SLO met; read from few requests (p90: 6 requests, need 36)"
    )
    assert "few requests" not in printed({**PROBE, "slo_met": "True", "thin_percentiles": ""})


def test_a_fixed_point_line_is_as_before():
    line = printed({**PROBE, "point_id": "poisson-4", "slo_met": "True"})
    assert line.startswith("poisson-4        achieved 3.41 req/s") and "SLO" not in line


CAPPED = {"rate": 4.5, "probes": 3, "upper": None, "converged": False, "capped": True}


def test_a_search_stopped_by_max_rate_never_advises_more_probes(tmp_path):
    store = make_synthetic_run(tmp_path, configs=1)
    store.update_config("c1", capacity=CAPPED)
    text = headline(best_config(store.path))
    assert "the SLO held at the search's max_rate" in text
    assert "max_probes" not in text
    assert "max_probes" not in describe_capacity(CAPPED)


def test_a_tune_best_capped_at_max_rate_never_advises_more_probes(tmp_path):
    store = make_synthetic_run(tmp_path / "tune", configs=2)
    trial = {"trial": 2, "config_id": "c2", "values": [4.5], "capacity": CAPPED}
    result = {"objective": "capacity", "objective_names": ["capacity_rps"], "best": trial}
    (store.path / "tune-result.json").write_text(json.dumps(result))
    text = headline(best_config(store.path))
    assert "max_rate" in text and "max_probes" not in text
    assert "max_probes" not in describe_trial_value(["capacity_rps"], trial)
