"""The Dask path for real: a ``distributed.LocalCluster`` of two worker processes runs a sweep whose
outputs are byte-identical to the local pool's, and a worker killed mid-sweep loses no finished
point and the sweep completes."""

import os
import signal

import distributed
import pytest

from stability.region import SweepSpec, run_sweep, write_outputs
from tests.toys import SOLO_TOML


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpus") / "solo.toml"
    path.write_text(SOLO_TOML)
    return SweepSpec(tilesets=("solo2",), gpu_file=str(path), workload="uniform:1-64,1-40",
                     schedulers=("request_level",), variants=("pad", "raw"), loads=(0.6, 0.9, 1.1),
                     bisect=1, n_requests=3000, replicates=2, sat_requests=6000, epsilon=0.1)


@pytest.fixture(scope="module")
def reference(spec, tmp_path_factory):
    """region.csv of the sweep on the local process pool (2 workers)."""
    tmp = tmp_path_factory.mktemp("local")
    return write_outputs(run_sweep(spec, tmp / "cache", workers=2), tmp)["csv"].read_bytes()


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


def test_a_two_process_cluster_gives_the_local_pools_bytes(spec, reference, cluster, tmp_path):
    res = run_sweep(spec, tmp_path / "cache", dask=cluster.scheduler_address)
    assert res.cached == 0 and res.computed > 0
    assert write_outputs(res, tmp_path)["csv"].read_bytes() == reference


def test_a_worker_killed_mid_sweep_loses_no_finished_point(spec, reference, cluster, tmp_path):
    with distributed.Client(cluster.scheduler_address) as client:
        pids = client.run(os.getpid)
    finished_at_kill = []

    def kill_one_worker_after_the_first_result(task, result):
        if not finished_at_kill:
            finished_at_kill.extend(p.name for p in (tmp_path / "cache").glob("*.json"))
            os.kill(next(iter(pids.values())), signal.SIGKILL)

    res = run_sweep(spec, tmp_path / "cache", dask=cluster.scheduler_address,
                    on_result=kill_one_worker_after_the_first_result)
    assert finished_at_kill
    assert {p.name for p in (tmp_path / "cache").glob("*.json")} >= set(finished_at_kill)
    assert write_outputs(res, tmp_path)["csv"].read_bytes() == reference
    with distributed.Client(cluster.scheduler_address) as client:
        assert set(client.run(os.getpid).values()) != set(pids.values())  # the nanny restarted it
