# shellcheck shell=bash
# Grading, run by envs/harbor/grader.py as root in a FRESH grading workspace:
#   bash -c "<this>" crucible WORKDIR TIMEOUT MODE NONCE
# with /var/lib/crucible/harbor/{agent.diff,tests.tar,carried.tar,container.tar} written first
# (root-only dir; container.tar: a container-capturing task's files changed outside WORKDIR).
# MODE: none (Harbor's own behaviour: the agent's /logs/verifier and /tests as it left them,
# test.sh's leftovers alone), or vault / strict (/tests laid fresh, /logs/verifier emptied and
# owned by root before test.sh; every process test.sh leaves behind killed before the reward
# files are read, and listed). Applies the agent's diff onto the baseline, lays tests/ into
# /tests, removes stale reward files, runs /tests/test.sh in WORKDIR under TIMEOUT (the [verifier]
# env given by the caller), then prints "NONCE key value" lines: apply, exit, outlived,
# reward_txt, reward_json (base64), and the tail of test.sh's output (base64).
set -uo pipefail
workdir=$1
limit=$2
mode=$3
nonce=$4
h=/var/lib/crucible/harbor
say() { printf '%s %s %s\n' "$nonce" "$1" "$2"; }

pids() {  # every live pid but this shell's own subshell
  local self=$BASHPID d
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" = "$self" ] || echo "${d#/proc/}"
  done
}

if [ -s "$h/agent.diff" ]; then
  if ! git -c safe.directory='*' --git-dir="$h/base.git" --work-tree="$workdir" \
       apply --binary --whitespace=nowarn "$h/agent.diff" >"$h/apply.out" 2>&1; then
    say apply "$(base64 -w0 "$h/apply.out")"
    exit 0
  fi
fi
say apply ok
if [ -s "$h/container.tar" ]; then tar -C / -xpf "$h/container.tar"; fi
if [ "$mode" = none ]; then
  if [ -s "$h/carried.tar" ]; then tar -C / -xf "$h/carried.tar"; fi
  mkdir -p /tests /logs/verifier
else
  rm -rf /tests /logs/verifier
  install -d -o root -g root -m 755 /tests /logs/verifier
fi
tar -C /tests -xf "$h/tests.tar"
rm -f /logs/verifier/reward.txt /logs/verifier/reward.json  # stale rewards, as Harbor's verifier removes them
chmod +x /tests/test.sh
before=" $(pids | tr '\n' ' ') "
cd "$workdir" || exit 3
# As Harbor runs it: executed (its shebang honoured), output into /logs/verifier/test-stdout.txt.
timeout -k 5 "$limit" /tests/test.sh >/logs/verifier/test-stdout.txt 2>&1 </dev/null
code=$?
say exit "$code"
if [ "$mode" != none ]; then
  left=()
  for p in $(pids); do
    case "$before" in *" $p "*) ;; *) [ "$p" = "$$" ] || left+=("$p") ;; esac
  done
  for p in "${left[@]}"; do
    if [ -r "/proc/$p/cmdline" ]; then
      say outlived "$(tr '\0' ' ' <"/proc/$p/cmdline" | head -c 200 | base64 -w0)"
    fi
    kill -KILL "$p" 2>/dev/null || true
  done
  for p in "${left[@]}"; do
    while [ -e "/proc/$p" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" 2>/dev/null; do sleep 0.01; done
  done
fi
for f in reward.txt reward.json; do
  key=${f/./_}
  if [ -f "/logs/verifier/$f" ]; then say "$key" "$(head -c 65536 "/logs/verifier/$f" | base64 -w0)"; fi
done
if [ -f /logs/verifier/test-stdout.txt ]; then
  say output "$(tail -c 8192 /logs/verifier/test-stdout.txt | base64 -w0)"
fi
