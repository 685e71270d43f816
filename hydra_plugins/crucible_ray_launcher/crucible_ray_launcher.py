"""``hydra/launcher=ray`` (conf/hydra/launcher/crucible_ray.yaml): Hydra's Ray launcher, with crucible's
``launch`` (engine/cli/ray_sweep.py). Defined only where hydra-ray-launcher is installed (the
``ray`` extra): Hydra imports every module here to find its plugins, so this one must import."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from hydra_plugins.hydra_ray_launcher.ray_launcher import RayLauncher
except ImportError:  # no ray extra: no launcher (crucible run says how to get one)
    pass
else:

    class CrucibleRayLauncher(RayLauncher):
        """Hydra's Ray launcher whose jobs share no file system with this process: each
        finished run travels back as data and lands in this process's store once; a job whose
        worker died is recorded as an infrastructure error; the sweep never aborts."""

        def __init__(self, ray: Any, **joblib_defaults: Any) -> None:
            # conf/config.yaml sets joblib's n_jobs and backend under hydra.launcher, merged into
            # every launcher's config: here Ray schedules, bounded by the cluster's CPUs.
            super().__init__(ray)

        def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
            from engine.cli.ray_sweep import launch

            return launch(self, job_overrides, initial_job_idx)
