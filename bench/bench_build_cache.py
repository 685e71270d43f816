"""How cheap is a cache hit? `ensure` of an existing image vs. one `docker image inspect`.

Builds a tiny recipe once (cold), then times N cache-hit `ensure` calls and N plain
inspects of the same tag, interleaved so both see the same machine load. Prints a table
and exits non-zero when the median cache hit takes 0.2 s or more.

    .venv/bin/python bench/bench_build_cache.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.build.baseimage import ensure_base_image  # noqa: E402
from engine.build.images import ContentAddressedBuilder  # noqa: E402
from engine.runtimes.docker.daemon import ensure_engine  # noqa: E402
from engine.util.tables import format_table  # noqa: E402

LIMIT_S = 0.2
RECIPE = "ARG BASE\nFROM ${BASE}\nCOPY . /ctx\nRUN echo built > /built\n"


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def row(name: str, seconds: list[float], reference: float) -> tuple:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    median = statistics.median(ordered)
    return name, len(ordered), median * 1000, p95 * 1000, median / reference


def main(n: int = 20) -> int:
    client = ensure_engine(client_timeout=600)
    base = ensure_base_image(client).tag
    builder = ContentAddressedBuilder(client, ca_bundle=None)
    with tempfile.TemporaryDirectory(prefix="bench-build-cache-") as tmp:
        context = Path(tmp)
        (context / "Dockerfile").write_text(RECIPE)
        (context / "nonce").write_text(uuid.uuid4().hex)  # a new tag, so the cold build is real
        ref = builder.plan(context / "Dockerfile", context, {"BASE": base}, "bench")
        try:
            cold = builder.ensure(ref)
            if cold.cache_hit:
                raise SystemExit("the cold build was a cache hit: the bench's nonce did not make a new tag")
            hits, inspects, plans = [], [], []
            for _ in range(n):
                hits.append(timed(lambda: builder.ensure(ref)))
                inspects.append(timed(lambda: client.api.inspect_image(ref.tag)))
                plans.append(timed(lambda: builder.plan(context / "Dockerfile", context, {"BASE": base}, "bench")))
        finally:
            client.api.remove_image(ref.tag, force=True)
    reference = statistics.median(inspects)
    rows = [
        ("cold build (once)", 1, cold.seconds * 1000, cold.seconds * 1000, cold.seconds / reference),
        row("ensure, cache hit", hits, reference),
        row("docker image inspect", inspects, reference),
        row("plan (hash the context)", plans, reference),
    ]
    print(format_table(["operation", "n", "median ms", "p95 ms", "x inspect"], rows))
    median_hit = statistics.median(hits)
    verdict = "ok" if median_hit < LIMIT_S else "TOO SLOW"
    print(f"{verdict}: median cache-hit ensure {median_hit * 1000:.1f} ms (limit {LIMIT_S * 1000:.0f} ms)")
    return 0 if median_hit < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
