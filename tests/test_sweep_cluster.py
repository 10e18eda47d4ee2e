"""The local Dask cluster ``symattn sweep`` starts for itself listens on the loopback only: its scheduler,
its nannies and workers, and the HTTP routes each of them starts even without a dashboard (the
scheduler's took every interface's port 8787 before, and warned where a second cluster held it)."""

import os
from urllib.parse import urlsplit

import pytest

pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")  # distributed's own dependency

from symattn.sweep.cluster import connect  # noqa: E402


def test_the_local_cluster_listens_on_the_loopback_only():
    with connect(None) as client:
        info = client.scheduler_info()
        addresses = [info["address"]] + [a for w, i in info["workers"].items() for a in (w, i["nanny"])]
        ports = {urlsplit(a).port for a in addresses}
        http = set(info["services"].values())
        http |= {p for i in info["workers"].values() for p in i["services"].values()}
        # the scheduler and the nannies run in this process, each worker in one of its own
        processes = {os.getpid(), *client.run(os.getpid).values()}
        listening = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.net_connections(kind="tcp")
            if c.status == "LISTEN" and c.pid in processes and c.laddr.port in ports | http
        }
    assert {port for _, port in listening} == ports | http  # every one of the cluster's ports was found
    assert {ip for ip, _ in listening} == {"127.0.0.1"}
    assert 8787 not in http
