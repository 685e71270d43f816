"""What a workspace container's start and removal cost, network mode none with and without
``NetworkDisabled``, as ratios measured in one run.

none       ``network_mode=none``, as ``docker run --network none`` (bench_sweep's floor) starts
           a container: Docker makes it a network sandbox anyway (dockerd re-executes itself
           twice per container: the libnetwork-setkey prestart hook and set-ipv6).
disabled   ``network_mode=none`` and ``NetworkDisabled``, /etc/hosts bound in read-only, as
           engine/runtimes/docker/runtime.py starts a workspace without network: no sandbox.

Each sample creates, starts and force-removes one container from crucible's base image (as
a workspace: ``sleep infinity`` under an init); the modes alternate. Wall time per container,
and the whole machine's CPU time per container (/proc/stat: user+system of every process, the
daemons' and runc's included), so run it on a quiet machine.

    .venv/bin/python bench/bench_container_start.py [--containers 16] [--trials 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def machine_cpu_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def sample(client, image: str, disabled: bool, count: int) -> tuple[float, float]:
    from engine.runtimes.docker.runtime import HOSTS

    extra = (
        {"network_disabled": True, "volumes": {str(HOSTS): {"bind": "/etc/hosts", "mode": "ro"}}} if disabled else {}
    )
    began, cpu = time.perf_counter(), machine_cpu_seconds()
    for _ in range(count):
        container = client.containers.create(
            image, ["sleep", "infinity"], init=True, detach=True, network_mode="none", **extra
        )
        container.start()
        client.api.remove_container(container.id, force=True, v=True)
    return (time.perf_counter() - began) / count, (machine_cpu_seconds() - cpu) / count


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--containers", type=int, default=16, help="per sample (a sweep of 8 runs starts 16)")
    parser.add_argument("--trials", type=int, default=3)
    ns = parser.parse_args()
    from engine.build.baseimage import ensure_base_image
    from engine.runtimes.docker.runtime import connect

    client = connect(60)
    image = ensure_base_image(client).tag
    sample(client, image, False, 2)  # warm: the image's layers in the page cache
    found: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(ns.trials):
        for disabled in (False, True):
            found[disabled].append(sample(client, image, disabled, ns.containers))
    print(f"{ns.containers} containers per sample, {ns.trials} samples each, medians; image {image}")
    print(f"{'network':12} {'wall s/container':>17} {'CPU s/container':>16}")
    medians = {}
    for disabled, label in ((False, "none"), (True, "disabled")):
        wall = statistics.median(w for w, _ in found[disabled])
        cpu = statistics.median(c for _, c in found[disabled])
        medians[disabled] = wall, cpu
        print(f"{label:12} {wall:17.3f} {cpu:16.3f}")
    (wall_none, cpu_none), (wall_off, cpu_off) = medians[False], medians[True]
    print(f"disabled / none: wall {wall_off / wall_none:.2f}, CPU {cpu_off / cpu_none:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
