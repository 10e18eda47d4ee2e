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


def test_the_symattn_script_s_local_cluster_imports_a_kernel_from_the_current_folder(tmp_path):
    # Dask's nanny spawns each worker with this process's sys.path: under the symattn script (not python -m)
    # it lacked the current folder, and every case failed "No module named 'mykernels'"
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("torch")
    script = Path(sys.executable).parent / "symattn"
    if not script.exists():
        script = Path(shutil.which("symattn") or "")
    assert script.name == "symattn" and script.exists()
    (tmp_path / "mykernels.py").write_text(
        "import torch.nn.functional as F\n\n\n"
        "def attention(q, k, v, *, causal, scale):\n"
        "    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)\n",
        encoding="utf-8",
    )
    (tmp_path / "grid.toml").write_text(
        'seed = 1\nrule = "allclose"\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(script), "sweep", "grid.toml", "--kernel", "mykernels:attention"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 cases pass" in done.stdout
