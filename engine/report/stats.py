"""The statistics behind ``crucible report``: pure functions, no store, no I/O.

- ``pass_at_k``: the unbiased estimator of Chen et al. (2021), *Evaluating Large Language
  Models Trained on Code*: with n attempts of a task of which c succeeded, the chance
  that at least one of k attempts drawn without replacement succeeds,
  ``1 - C(n-c, k) / C(n, k)``. A report averages it over tasks.
- ``mean_interval``: a 95% interval for the mean reward. Rewards that are all 0 or 1
  are a proportion: the Wilson score interval (sound at 0/n and n/n, where the normal
  "Wald" interval collapses to a point). Any other rewards: Student's t interval,
  mean ± t(0.975, n-1) · s / sqrt(n), with the exact t quantile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The ``statistics`` module (with ``fractions``, ``decimal`` and ``random``) costs ~3 ms of every
# `crucible report` (bench/bench_cli_startup.py) for what a report usually needs: a mean, a
# median, the 97.5% normal quantile. Those are here, giving the very floats it gives; it is
# imported only for the rest (a standard deviation, another quantile).


def fmean(values: Sequence[float]) -> float:
    """``statistics.fmean`` of a non-empty sequence (what it computes: an exact sum, divided)."""
    return math.fsum(values) / len(values)


def median(values: Sequence[float]) -> float:
    """``statistics.median`` of a non-empty sequence: the middle value, or the mean of the two."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 == 1 else (ordered[middle - 1] + ordered[middle]) / 2


Z_975 = 1.9599639845400536
"""``statistics.NormalDist().inv_cdf(0.975)`` (tests/report checks it): the z of a 95% interval."""


def normal_quantile(p: float) -> float:
    """``statistics.NormalDist().inv_cdf(p)``; the module is imported for any p but a 95% interval's."""
    if p == 0.975:
        return Z_975
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


SUCCESS = 1.0
"""A run counts as a success (it solved the task) when its reward is at least this."""

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str  # "wilson" | "t"


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one success among k of the n attempts), c of which succeeded.

    Raises ValueError unless 0 <= c <= n and 1 <= k <= n.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:  # every draw of k attempts contains a success
        return 1.0
    # Exact: comb() grows past float range for large n, and int / int is correctly rounded
    # (the float of the exact fraction 1 - C(n-c, k) / C(n, k)).
    total = math.comb(n, k)
    return (total - math.comb(n - c, k)) / total


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float | None:
    """pass@k averaged over tasks, each given as (n, c); None when a task has fewer than k attempts."""
    values = []
    for n, c in counts:
        if n < k:
            return None
        values.append(pass_at_k(n, c, k))
    return fmean(values) if values else None


def report_ks(min_attempts: int) -> list[int]:
    """The k values a report shows when every task has at least ``min_attempts`` attempts.

    Every k up to 10; past that 1-5 and the round values (10, 20, 50, 100, ...) up to the
    largest k the attempts allow, which is always shown.
    """
    if min_attempts <= 10:
        return list(range(1, min_attempts + 1))
    ks = {1, 2, 3, 4, 5, min_attempts}
    scale = 10
    while scale <= min_attempts:
        ks.update(k for k in (scale, 2 * scale, 5 * scale) if k <= min_attempts)
        scale *= 10
    return sorted(ks)


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval | None:
    """The Wilson score interval for a proportion; None when n == 0."""
    if n <= 0:
        return None
    z = normal_quantile(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0/n and n/n the bound is exactly 0 (1); the formula leaves rounding dust.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high, "wilson")


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """Student's t interval for the mean; None with fewer than two values."""
    if len(values) < 2:
        return None
    from statistics import stdev  # exact (rational) sum of squares, correctly rounded root

    mean = fmean(values)
    half = t_quantile(len(values) - 1, 0.5 + confidence / 2) * stdev(values) / math.sqrt(len(values))
    return Interval(mean - half, mean + half, "t")


def mean_interval(rewards: Sequence[float]) -> tuple[float | None, Interval | None]:
    """The mean reward and its 95% interval (Wilson for 0/1 rewards, t otherwise)."""
    if not rewards:
        return None, None
    mean = fmean(rewards)
    if all(r in (0.0, 1.0) for r in rewards):
        return mean, wilson_interval(sum(1 for r in rewards if r == 1.0), len(rewards))
    return mean, t_interval(rewards)


def median_or_none(values: Sequence[float]) -> float | None:
    return median(values) if values else None


def t_quantile(df: int, p: float) -> float:
    """The p-quantile (p > 0.5) of Student's t with ``df`` degrees of freedom, by bisection on its CDF."""
    if df < 1 or not 0.5 < p < 1:
        raise ValueError(f"t_quantile needs df >= 1 and 0.5 < p < 1 (df={df}, p={p})")
    if df > 1000:  # the two-term Cornish-Fisher expansion is exact to ~1e-9 here
        z = normal_quantile(p)
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)
    target = 2 * p - 1  # P(|T| < t)
    low, high = 0.0, 1.0
    while _t_central(high, df) < target:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_central(mid, df) < target else (low, mid)
    return (low + high) / 2


def _t_central(t: float, df: int) -> float:
    """P(|T| < t) for integer df: the finite series of Abramowitz & Stegun 26.7.3-4."""
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for j in range(2, df, 2):  # 1 + (1/2)cos^2 + (1*3)/(2*4)cos^4 + ...
            term *= c2 * (j - 1) / j
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    term = total = math.cos(theta)
    for j in range(3, df - 1, 2):  # cos + (2/3)cos^3 + (2*4)/(3*5)cos^5 + ...
        term *= c2 * (j - 1) / j
        total += term
    return 2 / math.pi * (theta + s * total)
