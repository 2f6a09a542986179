"""A real single-node Slurm for tests: Debian's slurm-wlm and munge (installed by
scripts/setup-test-deps.sh), a throw-away configuration on loopback ports, every daemon in
its own process group and stopped at the end. Jobs are run by this machine's slurmd, so an
sbatch script of `tunebench batch --slurm` runs for real."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from tunebench.deploy.local import free_port
from tunebench.processes import ManagedProcess

CONF = """\
ClusterName=tunebench
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={home}/munge.sock
CredType=cred/munge
StateSaveLocation={home}/state
SlurmdSpoolDir={home}/spool
SlurmctldPidFile={home}/slurmctld.pid
SlurmdPidFile={home}/slurmd.pid
# no cgroups in a container: track a job's processes by process group
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
MpiDefault=none
SlurmctldLogFile={home}/slurmctld.log
SlurmdLogFile={home}/slurmd.log
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@contextmanager
def slurm_cluster() -> Iterator[dict[str, str]]:
    """A running controller and node; yields the environment that points Slurm's commands
    (sbatch, sinfo, squeue) at it."""
    for command in ("munged", "slurmctld", "slurmd", "sbatch"):
        assert shutil.which(command), f"{command} is missing: run scripts/setup-test-deps.sh"
    assert os.geteuid() == 0, "the test cluster's slurmd runs jobs as root: run as root"
    home = Path(tempfile.mkdtemp(prefix="tunebench-slurm-"))
    (home / "state").mkdir()
    (home / "spool").mkdir()
    key = home / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    host = socket.gethostname().split(".")[0]
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20) // 2
    conf = home / "slurm.conf"
    conf.write_text(
        CONF.format(
            host=host,
            home=home,
            ctld_port=free_port(),
            d_port=free_port(),
            cpus=os.cpu_count() or 1,
            memory_mb=memory_mb,
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    with ExitStack() as daemons:
        try:
            for argv, name in (
                (
                    [
                        "munged",
                        "--foreground",
                        "--force",  # as root, with a key of this test's own
                        f"--key-file={key}",
                        f"--socket={home}/munge.sock",
                        f"--pid-file={home}/munged.pid",
                        f"--log-file={home}/munged.log",
                        f"--seed-file={home}/munge.seed",
                    ],
                    "munged",
                ),
                (["slurmctld", "-D", "-f", str(conf)], "slurmctld"),
                (["slurmd", "-D", "-f", str(conf), "-N", host], "slurmd"),
            ):
                process = ManagedProcess(argv, env=env, log_path=home / f"{name}.out")
                daemons.callback(process.stop)
                time.sleep(0.5)
                assert process.poll() is None, (home / f"{name}.out").read_text()[-2000:]
            deadline = time.monotonic() + 60
            while True:
                state = subprocess.run(
                    ["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True
                ).stdout.strip()
                if state == "idle":
                    break
                assert time.monotonic() < deadline, f"the node did not become idle: {state!r}"
                time.sleep(0.5)
            yield env
        finally:
            daemons.close()
            shutil.rmtree(home, ignore_errors=True)
