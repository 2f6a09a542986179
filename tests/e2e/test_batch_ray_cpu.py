"""`tunebench batch --engine ray` for real: Ray Data LLM on a two-node local Ray cluster.

Its own file so that `make test` can run it beside another file (a file's tests stay in
one pytest-xdist worker; see the Makefile)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e.conftest import NEEDS_SERVER
from tests.e2e.test_batch_cpu import _run, _small_spec
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]


def test_ray_data_llm_engine_on_a_two_node_local_ray_cluster(tmp_path):
    """`engine: ray` against a running cluster (`ray.address`): a head and a worker node,
    each its own raylet on this machine (Ray's documented way to try a multi-node cluster
    on one host), the batch job a driver that connects to it."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 3, "include_dashboard": False},
    )
    try:
        cluster.add_node(num_cpus=3)
        cluster.wait_for_nodes()
        assert len(cluster.list_all_nodes()) == 2
        spec = _small_spec(
            tmp_path,
            16,
            engine="ray",
            ray={"address": cluster.address, "concurrency": 1, "batch_size": 8},
        )
        spec_data = yaml.safe_load(spec.read_text())
        spec_data["engine_args"] = {
            "args": {"max-model-len": 512, "max-num-seqs": 8, "enforce-eager": True}
        }
        spec.write_text(yaml.safe_dump(spec_data, sort_keys=False))
        result, run = _run(spec, tmp_path / "ray", "--no-report")
    finally:
        cluster.shutdown()
    assert result.returncode == 0, result.stderr[-3000:]
    row = read_points(run)[0]
    assert int(row["requests_ok"]) == 16 and float(row["schema_valid_fraction"]) == 1.0
    outputs = [json.loads(line) for line in (run / "outputs/c1.jsonl").read_text().splitlines()]
    assert [o["id"] for o in outputs] == [f"recipe-{n:04d}" for n in range(1, 17)]
