"""The report's own mean, median, 95% z and pass@k give the very floats the ``statistics`` and
``fractions`` modules give (issue 38: engine/report/stats.py imports them only where it needs
them, as they cost ~3 ms of every ``crucible report``)."""

from __future__ import annotations

import math
import random
import statistics
import subprocess
import sys
from fractions import Fraction

from engine.report import stats


def samples() -> list[list[float]]:
    rng = random.Random(38)
    drawn = [[rng.choice((0.0, 0.5, 1.0, 1 / 3, 2 / 3)) for _ in range(n)] for n in range(1, 40)]
    drawn += [[rng.uniform(-1e6, 1e6) for _ in range(n)] for n in (1, 2, 3, 10, 101, 1000)]
    drawn += [[1e16, 1.0, -1e16], [0.1] * 10, [49.0, 11.5, 10.25, 12.0]]
    return drawn


def test_mean_and_median_are_the_statistics_modules_floats():
    for values in samples():
        assert stats.fmean(values) == statistics.fmean(values), values
        assert stats.median(values) == statistics.median(values), values


def test_the_95_percent_z_is_the_normal_distributions():
    assert statistics.NormalDist().inv_cdf(0.975) == stats.Z_975
    assert stats.normal_quantile(0.975) == stats.Z_975
    assert stats.normal_quantile(0.9) == statistics.NormalDist().inv_cdf(0.9)


def test_pass_at_k_is_the_exact_fractions_float():
    for n in (1, 2, 3, 5, 10, 57, 400):
        for c in range(n + 1):
            for k in {1, 2, 3, n // 2 or 1, n}:
                if k <= n:
                    expected = 1.0 if n - c < k else float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))
                    assert stats.pass_at_k(n, c, k) == expected, (n, c, k)


def test_a_report_of_0_1_rewards_imports_no_statistics_module():
    script = (
        "import sys\n"
        "from engine.report import stats\n"
        "stats.mean_interval([0.0, 1.0, 1.0]); stats.median_or_none([3.0, 1.0]); stats.mean_pass_at_k([(3, 1)], 2)\n"
        "print(sorted({'statistics', 'fractions', 'decimal'} & set(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
