"""``symattn sweep`` on real Dask clusters on 127.0.0.1: a scheduler and two workers started as processes
(stopped by PID), and the local cluster the command starts itself. The kernels are tests/sweep_kernels.py.

The grid is issue 31's eight cases (kv_heads 1 and 2 with heads 2, so 1 is multi-query; float32 and
bfloat16; causal or not), tiny: 32 tokens, 16 dimensions. Its case i is kv_heads [1, 2][i // 4],
dtype [float32, bfloat16][i // 2 % 2], causal [no, yes][i % 2].
"""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")
pytest.importorskip("torch")

from symattn.cli import main

from .conftest import wait_until

ROOT = Path(__file__).resolve().parent.parent

GRID = """\
seed = 7
rule = "flash"

[grid]
heads = [2]
kv_heads = [1, 2]
seqlen = [32]
head_dim = [16]
dtype = ["float32", "bfloat16"]
causal = [false, true]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``dask scheduler`` and two ``dask worker`` processes (a nanny each, torch preloaded), one thread each."""
    folder = tmp_path_factory.mktemp("cluster")
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEP_CALLS": str(folder / "calls")}
    env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = "0"  # a case that kills its worker: one try
    scheduler = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1"]
    scheduler += ["--port", address.rsplit(":", 1)[1], "--no-dashboard", "--scheduler-file", str(folder / "s.json")]
    worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1", "--nthreads", "1"]
    worker += ["--host", "127.0.0.1", "--no-dashboard"]
    log = open(folder / "cluster.log", "w")  # noqa: SIM115 (closed with the cluster)
    started = [subprocess.Popen(scheduler, env=env, cwd=folder, stderr=log)]
    try:
        assert wait_until(lambda: (folder / "s.json").exists(), 30)
        started += [subprocess.Popen(worker, env=env, cwd=folder, stderr=log) for _ in range(2)]
        _warm(address)
        yield address, folder / "calls"
    finally:
        for process in reversed(started):
            process.terminate()
        for process in reversed(started):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


def _warm(address: str) -> None:
    """Wait for both workers (a killed one comes back by its nanny) and import the kernels and the engine on
    each, so that no case's clock (--case-seconds) counts torch's import."""
    import importlib

    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(2, timeout=120)
        client.run(importlib.import_module, "tests.sweep_kernels")


def _executing(dask_worker) -> int:
    return dask_worker.state.executing_count


def _idle(address: str) -> None:
    """Wait until no worker runs a task (one whose sweep has gone runs to its end all the same)."""
    from distributed import Client

    with Client(address, timeout=60) as client:
        assert wait_until(lambda: not any(client.run(_executing).values()), 60)


def _sweep(capsys, tmp_path, kernel, *options, grid=GRID):
    path = tmp_path / "grid.toml"
    path.write_text(grid)
    code = main(["sweep", str(path), "--kernel", f"tests.sweep_kernels:{kernel}", "--format", "json", *options])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else None), err


def _without_timing(report):
    """A report as the grid and seed decide it: without each case's seconds and worker, or the grid's path."""
    cases = [{k: v for k, v in c.items() if k not in ("seconds", "worker")} for c in report["cases"]]
    return {k: v for k, v in report.items() if k != "grid"} | {"cases": cases}


@pytest.fixture(scope="module")
def sdpa_report(cluster, tmp_path_factory):
    """The eight cases of torch's SDPA on the running cluster (symattn.sweep, as the command runs it)."""
    from symattn.sweep import sweep

    path = tmp_path_factory.mktemp("sdpa") / "grid.toml"
    path.write_text(GRID)
    report = sweep(str(path), "tests.sweep_kernels:sdpa", scheduler=cluster[0])
    return (0 if report.ok else 1), json.loads(report.to_json()), ""


@pytest.mark.slow  # a real Dask cluster
def test_sdpa_passes_flash_rule_in_every_case_on_both_workers(sdpa_report):
    code, report, err = sdpa_report
    assert (code, err) == (0, "")
    assert (report["passed"], report["failed"], len(report["cases"])) == (8, 0, 8)
    points = [(c["kv_heads"], c["dtype"], c["causal"]) for c in report["cases"]]
    assert points == [(kv, d, c) for kv in (1, 2) for d in ("float32", "bfloat16") for c in (False, True)]
    for case in report["cases"]:
        assert (case["verdict"], case["kind"], case["message"]) == ("pass", "output", None)
        assert case["checks"][0]["rule"] == "flash(rtol=2, atol=0)"
        assert case["figure"].startswith("ratio ")
        assert case["place"].startswith("out[0, ")
    assert len({c["worker"] for c in report["cases"]}) == 2


SINK_GRID = """\
seed = 5
rule = "flash"
kinds = ["output", "dsink"]

[grid]
heads = [2]
kv_heads = [1]
seqlen = [16]
head_dim = [8]
dtype = ["float32", "bfloat16"]
sinks = [true]
"""


@pytest.mark.slow  # a real Dask cluster
def test_dsink_is_a_kind_of_a_sweep_with_sinks(cluster, capsys, tmp_path):
    """The sinks' .grad is judged as compare(kind="dsink") judges it: a float64 kernel with sinks passes; one
    whose sinks pass back half their gradient has the same output and fails dsink alone, in every case."""
    code, report, err = _sweep(capsys, tmp_path, "sinks_float64", "--scheduler", cluster[0], grid=SINK_GRID)
    assert (code, err, report["passed"], report["failed"]) == (0, "", 2, 0)
    for case in report["cases"]:
        assert [(c["kind"], c["verdict"], c["rule"]) for c in case["checks"]] == [
            ("output", "pass", "flash(rtol=2, atol=0)"),
            ("dsink", "pass", "flash(rtol=2, atol=0)"),
        ]
    code, report, err = _sweep(capsys, tmp_path, "sinks_half_dsink", "--scheduler", cluster[0], grid=SINK_GRID)
    assert (code, err, report["passed"], report["failed"]) == (1, "", 0, 2)
    got = [(c["dtype"], c["kind"], [x["verdict"] for x in c["checks"]], c["place"]) for c in report["cases"]]
    assert got == [("float32", "dsink", ["pass", "fail"], "out[1]"), ("bfloat16", "dsink", ["pass", "fail"], "out[1]")]


@pytest.mark.slow  # a real Dask cluster
def test_a_kernel_wrong_for_bf16_causal_fails_exactly_those_two_cases(cluster, capsys, tmp_path):
    code, report, err = _sweep(capsys, tmp_path, "wrong_bf16_causal", "--scheduler", cluster[0])
    assert (code, err) == (1, "")
    assert [c["case"] for c in report["cases"] if c["verdict"] == "fail"] == [3, 7]
    for i in (3, 7):
        assert report["cases"][i]["message"].startswith(
            "fails FlashAttention's rule max|out − exact| ≤ 2·max|reference − exact| + 0: ratio "
        )


ONE = """\
[grid]
heads = [2]
kv_heads = [1]
seqlen = [8]
head_dim = [4]
dtype = ["float32"]
"""


@pytest.mark.slow  # a real Dask cluster
@pytest.mark.parametrize(
    "kernel, message",
    [
        ("clobbers_q", "the kernel changed its input q in place"),  # passed before: judged on the zeroed q
        ("exits", "the kernel raised SystemExit: 3"),  # its worker's tracebacks and "worker died" before
    ],
)
def test_a_kernel_that_changes_its_inputs_or_exits_fails_its_case_in_one_line(
    cluster, capsys, tmp_path, kernel, message
):
    code, report, err = _sweep(capsys, tmp_path, kernel, "--scheduler", cluster[0], grid=ONE)
    assert (code, err) == (1, "")
    assert [(c["verdict"], c["message"]) for c in report["cases"]] == [("fail", message)]


@pytest.mark.slow  # a real Dask cluster
def test_the_same_grid_passes_on_the_local_cluster_with_the_same_report(sdpa_report, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the command adds the current folder for its workers
    monkeypatch.chdir(ROOT)
    code, report, err = _sweep(capsys, tmp_path, "sdpa")
    assert (code, err) == (0, "")
    assert _without_timing(report) == _without_timing(sdpa_report[1])


@pytest.mark.slow  # a real Dask cluster
def test_a_worker_killed_mid_sweep_is_one_failed_row_and_the_sweep_goes_on(cluster, capsys, tmp_path):
    # the kernel kills its own worker (kill -9) in case 1; the scheduler allows no retry, the nanny restarts it
    code, report, err = _sweep(capsys, tmp_path, "crash_float32_causal", "--scheduler", cluster[0])
    assert (code, err) == (1, "")
    assert [c["case"] for c in report["cases"] if c["verdict"] == "fail"] == [1]
    assert report["cases"][1]["message"] == (
        "its worker died while running it (1 try): the kernel crashed it or it was killed"
    )
    assert report["cases"][1]["checks"] == []


@pytest.mark.slow  # a real Dask cluster
def test_a_case_past_case_seconds_fails_and_its_worker_is_restarted(cluster, capsys, tmp_path):
    _warm(cluster[0])
    options = ("--scheduler", cluster[0], "--case-seconds", "5")
    code, report, err = _sweep(capsys, tmp_path, "hang_bfloat16_causal", *options)
    assert (code, err) == (1, "")
    assert [c["case"] for c in report["cases"] if c["verdict"] == "fail"] == [3]
    assert report["cases"][3]["message"] == "timed out after 5 s (--case-seconds); its worker was restarted"


@pytest.mark.slow  # a real Dask cluster
def test_resume_after_an_interrupt_runs_only_the_unfinished_cases(cluster, tmp_path):
    address, calls = cluster
    (tmp_path / "grid.toml").write_text(GRID)
    record = tmp_path / "record.jsonl"
    argv = [sys.executable, "-m", "symattn", "sweep", str(tmp_path / "grid.toml"), "--kernel"]
    argv += ["tests.sweep_kernels:counted", "--scheduler", address, "-o", str(record), "--format", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    calls.write_text("")
    armed, gate = Path(f"{calls}.armed"), Path(f"{calls}.open")
    armed.write_text("")  # the kernel's calls past the second wait for the gate: the sweep cannot end first
    gate.unlink(missing_ok=True)
    try:
        first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert wait_until(lambda: record.exists() and len(record.read_text().splitlines()) >= 3, 60)
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)
    finally:  # the cases left running on the workers finish; the resumed sweep's never wait
        gate.write_text("")
        armed.unlink()
    assert (first.returncode, out, err) == (130, "", "symattn: interrupted\n")
    _idle(address)  # a case already running on a worker when the sweep stopped finishes there, unrecorded
    rows = [json.loads(line) for line in record.read_text().splitlines()[1:]]
    finished = {(r["heads"], r["kv_heads"], r["dtype"], r["causal"]) for r in rows}
    assert 2 <= len(finished) < 8
    before = len(calls.read_text().splitlines())

    done = subprocess.run([*argv, "--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    report = json.loads(done.stdout)
    assert (report["passed"], [c["case"] for c in report["cases"]]) == (8, list(range(8)))
    again = [line.split() for line in calls.read_text().splitlines()[before:]]
    ran = sorted((int(h), int(kv), d.removeprefix("torch."), c == "True") for h, kv, d, c in again)
    assert ran == sorted(
        {(2, kv, d, c) for kv in (1, 2) for d in ("float32", "bfloat16") for c in (False, True)} - finished
    )
    assert len(record.read_text().splitlines()) == 9  # the header and each case once


BAD_GRIDS = [
    (
        'seed = 1\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nbatch_size = [1]\n',
        "grid.toml: grid.batch_size: unknown key; [grid] has batch, heads, kv_heads, seqlen, seqlen_q, seqlen_k, head_dim, head_dim_qk, head_dim_v, dtype, causal, window, softcap, alibi, sinks",
    ),
    (
        '[grid]\nheads = [2, 3]\nkv_heads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: grid.kv_heads[1]: 2 key/value heads do not divide 3 heads",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8, 0]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: grid.seqlen[2]: expected a whole number from 1 to 8192, got 0",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32", "float128"]\n',
        "grid.toml: grid.dtype[2]: expected one of float16, bfloat16, float32, float64, got 'float128'",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32", "float32"]\n',
        "grid.toml: grid.dtype[2]: 'float32' is already at [1]",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nseqlen_q = [4]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: grid.seqlen: give seqlen, or seqlen_q and seqlen_k, not both",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = []\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: grid.seqlen: empty: give at least one value",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\ncausal = ["yes"]\n',
        "grid.toml: grid.causal[1]: expected true or false, got 'yes'",
    ),
    (
        'rule = "ulp"\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
        'grid.toml: max_ulp: missing: rule = "ulp" needs the bound in ULP',
    ),
    (
        'kinds = ["output", "dz"]\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: kinds[2]: expected one of output, lse, dq, dk, dv, dsink, got 'dz'",
    ),
    (
        'rtol = -1\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: rtol: expected a number at least 0 such as 1e-3, got -1",
    ),
    (
        '[grid]\nbatch = [8]\nheads = [16]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: grid.batch[1]: 8 batches × 16 heads; at most 64",
    ),
    (
        '[grid]\nheads = [2]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: grid.seqlen: missing: a list of at least one value (or seqlen_q and seqlen_k)",
    ),
    ("[grid\n", "grid.toml: invalid TOML: Expected ']' at the end of a table declaration (at line 1, column 6)"),
    (
        f"[grid]\nheads = [1]\nseqlen_q = {list(range(1, 101))}\nseqlen_k = {list(range(1, 101))}\n"
        f'head_dim = {list(range(1, 21))}\ndtype = ["float32"]\n',
        "grid.toml: grid: 200000 cases; at most 100000 (the limit)",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nwindow = [2, -1]\n',
        "grid.toml: grid.window[2]: expected keys from 1 to 2147483647, or 0 for none, got -1",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nsoftcap = [1001]\n',
        "grid.toml: grid.softcap[1]: expected a number from 0 (none) to 1000, got 1001",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nsoftcap = ["30"]\n',
        "grid.toml: grid.softcap[1]: expected a number from 0 (none) to 1000, got '30'",
    ),
    (  # two cases of one cap before
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nsoftcap = [30, 30.0]\n',
        "grid.toml: grid.softcap[2]: 30.0 is the value at [1] again",
    ),
    (  # no cap at all before
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nsoftcap = [1e-400]\n',
        "grid.toml: grid.softcap[1]: 1e-400 is 0 as a float, which is no cap: give 0 for none, or a cap a float holds",
    ),
    (  # refused after the kernel had run on it before (27 s of kernel work at this size)
        '[grid]\nheads = [64]\nseqlen = [8192]\nhead_dim = [32]\ndtype = ["float32"]\n',
        "grid.toml: grid: q of a case would be (1, 64, 8192, 32), 16777216 entries; at most 8388608",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nalibi = [1]\n',
        "grid.toml: grid.alibi[1]: expected true or false, got 1",
    ),
    (
        '[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\nsinks = [true, "no"]\n',
        "grid.toml: grid.sinks[2]: expected true or false, got 'no'",
    ),
    (
        'kinds = ["output", "dsink"]\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
        "grid.toml: kinds[2]: 'dsink' is the gradient of the sink logits: every case needs them (sinks = [true] in "
        "[grid])",
    ),
    (
        'kinds = ["dsink"]\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n'
        "sinks = [false, true]\n",
        "grid.toml: kinds[1]: 'dsink' is the gradient of the sink logits: every case needs them (sinks = [true] in "
        "[grid])",
    ),
    *(  # each failed every case with a worker's traceback on stderr, exit 1
        (
            f'device = "{device}"\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n',
            f'grid.toml: device: expected a torch device such as "cpu", "cuda" or "cuda:1", got {device!r}',
        )
        for device in ("meta", "cuda:0; rm -rf /", "CPU")
    ),
]


@pytest.mark.parametrize("text, message", BAD_GRIDS)
def test_a_bad_grid_is_one_line_and_exit_2_before_anything_runs(text, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("grid.toml").write_text(text)
    record = tmp_path / "record.jsonl"
    code = main(["sweep", "grid.toml", "--kernel", "tests.sweep_kernels:sdpa", "-o", str(record)])
    assert (code, capsys.readouterr()) == (2, ("", f"symattn: {message}\n"))
    assert not record.exists()


def test_a_json_grid_is_the_toml_grid(tmp_path):
    """JSON's whole numbers were refused before ("expected a whole number from 1 to 64, got 2")."""
    from symattn.sweep.grid import load_grid

    (tmp_path / "g.json").write_text(
        json.dumps(
            {
                "seed": 3,
                "rtol": 0.01,
                "grid": {"heads": [2], "seqlen": [8], "head_dim": [4], "dtype": ["float32"], "softcap": [30, 0.5]},
            }
        )
    )
    (tmp_path / "g.toml").write_text(
        'seed = 3\nrtol = 0.01\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n'
        "softcap = [30, 0.5]\n"
    )
    made = [load_grid(tmp_path / name) for name in ("g.json", "g.toml")]
    assert [(g.seed, g.rtol, [c.point for c in g.cases]) for g in made] == [
        (
            3,
            "0.01",
            [
                {
                    "batch": 1,
                    "heads": 2,
                    "kv_heads": 2,
                    "seqlen_q": 8,
                    "seqlen_k": 8,
                    "head_dim_qk": 4,
                    "head_dim_v": 4,
                    "dtype": "float32",
                    "causal": False,
                    "softcap": x,
                }
                for x in (30.0, 0.5)
            ],
        )
    ] * 2


def test_each_part_makes_its_keyword_from_a_grid_point(tmp_path):
    # the grid's keys are the parts' (symattn.variants.SWEPT), in their order; each part makes its keyword
    from symattn.sweep.case import case_inputs, variants
    from symattn.sweep.grid import load_grid

    text = '[grid]\nheads = [2]\nseqlen = [3]\nhead_dim = [4]\ndtype = ["float32"]\n'
    (tmp_path / "grid.toml").write_text(text + "sinks = [true]\nalibi = [true]\nsoftcap = [0, 2.5]\nwindow = [2]\n")
    grid = load_grid(str(tmp_path / "grid.toml"))
    assert list(grid.lists)[-5:] == ["causal", "window", "softcap", "alibi", "sinks"]
    assert [c.point["softcap"] for c in grid.cases] == [0.0, 2.5]
    point = grid.cases[1].point
    made = case_inputs(7, point)
    extra = variants(point, made)
    assert list(extra) == ["window", "softcap", "alibi_slopes", "sinks"]
    assert (extra["window"], extra["softcap"], extra["alibi_slopes"].tolist()) == (2, 2.5, [0.0625, 0.00390625])
    assert extra["sinks"].tolist() == made["sinks"].tolist() and made["sinks"].shape == (2,)
    assert list(variants(grid.cases[0].point, made)) == ["window", "alibi_slopes", "sinks"]


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--kernel", "sweep_kernels.sdpa"],
            "--kernel: expected MODULE:FUNCTION such as mykernels:attention, got 'sweep_kernels.sdpa'",
        ),
        (["--kernel", "m:f", "--resume"], "--resume: goes on from the record of -o FILE: give -o too"),
        (
            ["--kernel", "m:f", "--scheduler", "127.0.0.1:8786"],
            "--scheduler: expected an address such as tcp://HOST:PORT, got '127.0.0.1:8786'",
        ),
        (
            ["--kernel", "m:f", "-o", "missing.jsonl", "--resume"],
            "missing.jsonl: no record to resume (the file does not exist); run without --resume",
        ),
    ],
)
def test_bad_options_are_one_line(options, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("grid.toml").write_text(GRID)
    assert (main(["sweep", "grid.toml", *options]), capsys.readouterr()) == (2, ("", f"symattn: {message}\n"))


def test_resume_refuses_the_record_of_a_changed_grid(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("grid.toml").write_text(GRID)
    from symattn.sweep.grid import load_grid
    from symattn.sweep.journal import Journal

    Journal.start("record.jsonl", load_grid("grid.toml"), "m:f").close()
    Path("grid.toml").write_text(GRID.replace("seed = 7", "seed = 8"))
    code = main(["sweep", "grid.toml", "--kernel", "m:f", "-o", "record.jsonl", "--resume"])
    assert (code, capsys.readouterr()) == (
        2,
        (
            "",
            "symattn: record.jsonl: the record of another grid ('grid.toml'), not grid.toml as it is now; "
            "run without --resume to start again\n",
        ),
    )


def test_o_never_writes_over_a_read_only_file(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("grid.toml").write_text(GRID)
    Path("record.jsonl").write_text("kept\n")
    Path("record.jsonl").chmod(0o444)
    code = main(["sweep", "grid.toml", "--kernel", "m:f", "-o", "record.jsonl"])
    message = "symattn: record.jsonl: the file is read-only (mode 0444); refusing to replace it\n"
    assert (code, capsys.readouterr(), Path("record.jsonl").read_text()) == (2, ("", message), "kept\n")


def test_the_text_report_is_a_table_with_each_failure_below(tmp_path):
    from symattn.sweep.case import row
    from symattn.sweep.grid import load_grid
    from symattn.sweep.report import SweepReport

    (tmp_path / "grid.toml").write_text(GRID.replace("causal = [false, true]", "causal = [true]"))
    grid = load_grid(str(tmp_path / "grid.toml"))
    check = {"kind": "output", "verdict": "pass", "rule": "flash(rtol=2, atol=0)", "figure": "ratio 0.5"}
    check |= {"place": "out[0, 1, 2, 3]", "largest_ulp": "2", "message": None}
    rows = [row(c.index, c.point, [check], None, 0.25, "tcp://127.0.0.1:1") for c in grid.cases[:3]]
    rows.append(
        row(3, grid.cases[3].point, [], "timed out after 5 s (--case-seconds); its worker was restarted", 5.0, "w")
    )
    text = SweepReport(grid, "m:f", tuple(rows)).text()
    assert text == (
        f"m:f on {grid.source}: 4 cases, rule flash, kinds output, seed 7\n"
        "case  batch  heads  kv  seqlen  head_dim  dtype     causal  verdict  kind    figure     place            seconds  worker\n"
        "0     1      2      1   32      16        float32   yes     pass     output  ratio 0.5  out[0, 1, 2, 3]  0.25     tcp://127.0.0.1:1\n"
        "1     1      2      1   32      16        bfloat16  yes     pass     output  ratio 0.5  out[0, 1, 2, 3]  0.25     tcp://127.0.0.1:1\n"
        "2     1      2      2   32      16        float32   yes     pass     output  ratio 0.5  out[0, 1, 2, 3]  0.25     tcp://127.0.0.1:1\n"
        "3     1      2      2   32      16        bfloat16  yes     fail     —       —          —                5.00     w\n"
        "3 of 4 cases pass; 1 fail.\n"
        "\n"
        "Why each failing case fails:\n"
        "  case 3: timed out after 5 s (--case-seconds); its worker was restarted\n"
    )


def test_a_device_this_machine_lacks_is_refused_before_the_local_cluster_starts(capsys, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    monkeypatch.chdir(tmp_path)
    Path("grid.toml").write_text(
        'device = "cuda"\n[grid]\nheads = [2]\nseqlen = [8]\nhead_dim = [4]\ndtype = ["float32"]\n'
    )
    code = main(["sweep", "grid.toml", "--kernel", "tests.sweep_kernels:sdpa"])
    message = (
        "grid.toml: device: 'cuda': torch has no cuda device on this machine, where the local cluster's workers run"
    )
    assert (code, capsys.readouterr()) == (2, ("", f"symattn: {message}\n"))
