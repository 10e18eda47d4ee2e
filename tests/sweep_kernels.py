"""Kernels for tests/test_sweep.py, imported by name on the Dask workers (``tests.sweep_kernels:sdpa``)."""

import os
import signal
import time

import torch
import torch.nn.functional as F

import symattn.kernel.oracle  # noqa: F401  (tests import this module on the workers first: the engine with it)
import symattn.sweep.case  # noqa: F401
import symattn.testing  # noqa: F401


def sdpa(q, k, v, *, causal, scale):
    """torch's SDPA, grouped-query heads by enable_gqa."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)


def wrong_bf16_causal(q, k, v, *, causal, scale):
    """SDPA, but bfloat16 causal attention drops the diagonal's last key: wrong in exactly those cases."""
    out = sdpa(q, k, v, causal=causal, scale=scale)
    if causal and q.dtype == torch.bfloat16:
        out = out + (v[:, :1].mean() * 0 + 0.25).to(out.dtype)
    return out


def crash_float32_causal(q, k, v, *, causal, scale):
    """SDPA, but float32 causal with one key/value head kills its own worker (kill -9), as a kernel that crashes."""
    if causal and q.dtype == torch.float32 and k.shape[1] == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return sdpa(q, k, v, causal=causal, scale=scale)


def hang_bfloat16_causal(q, k, v, *, causal, scale):
    """SDPA, but bfloat16 causal with one key/value head never returns (a hung kernel)."""
    if causal and q.dtype == torch.bfloat16 and k.shape[1] == 1:
        while True:
            time.sleep(1)
    return sdpa(q, k, v, causal=causal, scale=scale)


def counted(q, k, v, *, causal, scale):
    """SDPA that appends its case to the file $SWEEP_CALLS, and takes a while (for the interrupted sweep).
    Where $SWEEP_CALLS.armed exists, every call past the second waits for $SWEEP_CALLS.open (a minute at
    most): the sweep is surely still running when the test interrupts it, however loaded the machine (with
    0.4 s a case alone, a loaded CI run once finished all 8 before its SIGINT came)."""
    calls = os.environ["SWEEP_CALLS"]
    with open(calls, "a") as fh:
        fh.write(f"{q.shape[1]} {k.shape[1]} {q.dtype} {causal}\n")
    time.sleep(0.4)
    if os.path.exists(calls + ".armed"):
        with open(calls) as fh:
            made = len(fh.read().splitlines())
        end = time.monotonic() + 60
        while made > 2 and not os.path.exists(calls + ".open") and time.monotonic() < end:
            time.sleep(0.05)
    return sdpa(q, k, v, causal=causal, scale=scale)


def raises(q, k, v, *, causal, scale):
    raise ValueError("no kernel for this shape")


def exits(q, k, v, *, causal, scale):
    raise SystemExit(3)


def clobbers_q(q, k, v, *, causal, scale):
    """SDPA on a query it zeroes first: uniform attention, which the zeroed q would make right."""
    with torch.no_grad():
        q.zero_()
    return sdpa(q, k, v, causal=causal, scale=scale)


def sinks_float64(q, k, v, *, causal, scale, sinks):
    """gpt-oss's attention with sinks in float64, rounded to the inputs' dtype: (out, lse), the LSE over the
    keys and the sink (a column of the scores, dropped after the softmax). Causal top-left, as sweeps align."""
    group = q.shape[1] // k.shape[1]
    q64, k64, v64 = q.double(), k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    z = q64 @ k64.transpose(-1, -2) * scale
    if causal:
        n, m = z.shape[-2:]
        z = z.masked_fill(~torch.ones(n, m, dtype=torch.bool, device=z.device).tril(), float("-inf"))
    sink = sinks.double()[None, :, None, None].expand(*z.shape[:-1], 1)
    full = torch.cat([z, sink], -1)
    out = torch.softmax(full, -1)[..., :-1] @ v64
    return out.to(q.dtype), torch.logsumexp(full, -1).float()


def sinks_half_dsink(q, k, v, *, causal, scale, sinks):
    """sinks_float64 whose sink logits pass back half their gradient: the same output, a wrong dsink."""
    return sinks_float64(q, k, v, causal=causal, scale=scale, sinks=sinks * 0.5 + sinks.detach() * 0.5)


def short_lse(q, k, v, *, causal, scale):
    """SDPA's output, and an LSE one query short: the LSE check's refusal names the LSE."""
    out = sdpa(q, k, v, causal=causal, scale=scale)
    z = (q.double() @ k.double().repeat_interleave(q.shape[1] // k.shape[1], 1).transpose(-1, -2)) * scale
    if causal:
        z = z.masked_fill(~torch.ones(z.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return out, torch.logsumexp(z, -1).float()[..., :-1]
