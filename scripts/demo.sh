#!/usr/bin/env bash
# The main job: prove the sample tasks ship, sweep two agents over them, ask the store.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

echo "== crucible check task='glob(sample/*)'   (golden must be 1.0, baseline 0.0)"
crucible check task='glob(sample/*)'

echo
echo "== crucible run -m task='glob(sample/*)' agent=noop,integration_test   (2 in parallel, in this process)"
crucible run -m task='glob(sample/*)' agent=noop,integration_test

echo
echo "== crucible query: pass rate per agent over every run in the store"
crucible query "SELECT agent, count(*) AS runs, round(avg(CASE WHEN reward >= 1.0 THEN 1.0 ELSE 0.0 END), 2) AS pass_rate, round(median(epoch(ended_at) - epoch(started_at)), 2) AS median_s FROM runs WHERE status = 'completed' GROUP BY agent ORDER BY agent"
