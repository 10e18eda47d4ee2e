"""Benchmark of the live page: from a keystroke to the new math in the document, in headless Chromium.

    python bench/page.py              # 20 edits of Q[3][1] on the built-in example
    python bench/page.py --edits 50

A real `symattn serve` on 127.0.0.1 and a real Chromium (the test suite's driver). The page itself records
each update as the performance measure ``symattn:update``, from the last keystroke to the new math in the
document. The baseline, measured in the same run, is the server's own part: one POST /api/render of the
same spec from this process. The target is a median of at most 300 ms from keystroke to math (issue 10);
the ratio says how much of it the page and the browser add to the server's work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import chromium_driver  # noqa: E402
from tests.test_serve import (  # noqa: E402
    _start,
    _stop,
    as_json,
    cell,
    fragment,
    math_of,
    open_fresh,
    retype,
    seed_raw,
    wait_math,
)

TARGET_MS = 300.0
LAST = (
    "const m = performance.getEntriesByName('symattn:update');"
    "return [m.length, m.length ? m[m.length - 1].duration : 0];"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    args = parser.parse_args()
    import httpx

    with tempfile.TemporaryDirectory() as folder:
        process, url, _ = _start(cwd=Path(folder))
        driver = chromium_driver("1280,900", loopback=True, scrollbars=False, languages="zh-CN,zh")
        try:
            open_fresh(driver, url)
            target = cell(driver, "Q", "3,1")
            raw = as_json(seed_raw())
            page, server = [], []
            for i in range(args.edits):
                value = f"0.{50 + i % 50:02d}"
                count = driver.execute_script(LAST)[0]
                retype(target, value)
                raw["Q"][2][0] = value
                wait_math(driver, math_of(fragment(raw)), f"edit {i + 1}")
                while (last := driver.execute_script(LAST))[0] <= count:
                    time.sleep(0.01)
                page.append(last[1])
                start = time.perf_counter()
                httpx.post(url + "api/render", json={"spec": raw}, timeout=60).raise_for_status()
                server.append((time.perf_counter() - start) * 1000)
        finally:
            driver.quit()
            _stop(process)
    median_page, median_server = statistics.median(page), statistics.median(server)
    print(f"keystroke to math: median {median_page:.0f} ms, max {max(page):.0f} ms over {len(page)} edits")
    print(f"server alone (POST /api/render): median {median_server:.0f} ms")
    print(f"ratio page / server: {median_page / median_server:.2f}")
    print(f"target: median at most {TARGET_MS:.0f} ms: {'met' if median_page <= TARGET_MS else 'NOT met'}")
    return 0 if median_page <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
