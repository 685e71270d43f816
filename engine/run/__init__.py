"""Running runs: one trial's phases (`trial`), the per-command session, housekeeping and sweep guards."""
