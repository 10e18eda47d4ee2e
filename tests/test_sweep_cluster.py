"""The local Dask cluster ``symattn sweep`` starts for itself listens on the loopback only: its scheduler,
its workers and the HTTP routes Dask's scheduler starts even without a dashboard (which took every
interface's port 8787 before, and warned where a second cluster held it)."""

import os

import pytest

pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")  # distributed's own dependency

from symattn.sweep.cluster import connect  # noqa: E402


def test_the_local_cluster_listens_on_the_loopback_only():
    with connect(None):
        me = psutil.Process(os.getpid())
        ours = {me.pid, *(p.pid for p in me.children(recursive=True))}
        listening = [c.laddr for c in psutil.net_connections(kind="tcp") if c.status == "LISTEN" and c.pid in ours]
    assert listening  # the scheduler and a worker at least
    assert {address.ip for address in listening} == {"127.0.0.1"}
    assert 8787 not in {address.port for address in listening}
