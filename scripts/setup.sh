#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine: packages, dockerd, venv, offline base image.
# Every step checks first and does nothing when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
command -v git >/dev/null 2>&1 || need_pkgs+=(git)
command -v tmux >/dev/null 2>&1 || need_pkgs+=(tmux)
command -v bwrap >/dev/null 2>&1 || need_pkgs+=(bubblewrap)
command -v shellcheck >/dev/null 2>&1 || need_pkgs+=(shellcheck)  # tests/test_shell_scripts.py
command -v cc >/dev/null 2>&1 && [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need_pkgs+=(gcc libc6-dev)  # the containers' spawner (engine/runtimes/docker/spawner.c), built static
command -v docker-registry >/dev/null 2>&1 || need_pkgs+=(docker-registry)
command -v ssh >/dev/null 2>&1 || need_pkgs+=(openssh-client)  # OpenSSH as the reference client of a run's ssh endpoint
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)  # crucible view's browser tests (tests/view)
command -v chromedriver >/dev/null 2>&1 || need_pkgs+=(chromium-driver)  # tests/build/test_base_pull.py: a registry on 127.0.0.1
[ "$(dpkg-query -W -f='${db:Status-Status}' python3-pytest 2>/dev/null)" = installed ] || need_pkgs+=(python3-pytest)  # runtime=local: the sample tasks' system_packages
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.crucible-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing crucible into .venv"
  .venv/bin/pip install -q -e '.[test,ray]'
  echo "$want" > "$stamp"
fi

# crucible's own bytecode, as an installed (not editable) package has it: a machine that sets
# PYTHONDONTWRITEBYTECODE would otherwise compile every module on every command (~0.15 s).
.venv/bin/python -m compileall -q engine envs swe_tasks >/dev/null

# dockerd + base image: crucible's own doctor does both, idempotently.
.venv/bin/crucible doctor --fix
