# shellcheck shell=bash
# The official evaluator's steps in ONE exec (swe_tasks/replay.py, replay), as root:
#   SCRIPT crucible WORKDIR VAULT WORK BASE BEFORE_LINE TEST_FILES STEP_TIMEOUT TEST_TIMEOUT ENV_SH RUN_SCRIPT
# The image was built at BASE (Dockerfile.hud reset and checked out base_commit, as the first
# two official steps do) and this container is fresh from it: when HEAD is BASE the reset step
# is recorded as done at build time, with the same outcome, instead of rewriting the tree.
# The patch (binary hunks stripped) comes on stdin. First the image's history goes
# back from the root-only vault into WORKDIR/.git; then, as swe_bench_pro_eval.py's entry
# script does, in one shell with no `set -e`: the Dockerfiles' ENV lines as exports, `cd
# WORKDIR`, `git reset --hard BASE`, `git checkout BASE`, `git apply -v patch.diff`, the last
# line of before_repo_set_cmd, and run_script.sh with the comma-joined test files, stdout and
# stderr to separate files (the test files unquoted, as there). Each step has its own limit (coreutils' timeout where the image
# has it). For each step one record goes to stdout:
#   @@crucible-step NAME EXIT_CODE TIMED_OUT MILLISECONDS OUTPUT_BYTES\n<that many bytes of output tail>
# then, where the image has cat and wc, the run's two files (else replay.py reads them):
#   @@crucible-files STDOUT_BYTES STDERR_BYTES\n<stdout.log><stderr.log>
# shellcheck disable=SC1091  # WORK/env.sh is written here

WORKDIR=$1 VAULT=$2 WORK=$3 BASE=$4 BEFORE=$5 TEST_FILES=$6 STEP_TIMEOUT=$7 TEST_TIMEOUT=$8
[ -d "$WORK" ] || mkdir -p "$WORK"
if command -v cat >/dev/null; then
  cat > "$WORK/patch.diff"
else
  IFS= read -r -d '' patch || true
  printf '%s' "$patch" > "$WORK/patch.diff"
fi
printf '%s\n' "$9" > "$WORK/env.sh"
printf '%s' "${10}" > "$WORK/run_script.sh"
if [ -d "$VAULT" ]; then
  if [ -e "$WORKDIR/.git" ]; then rm -rf "${WORKDIR:?}/.git"; fi
  mv "$VAULT" "$WORKDIR/.git"
fi
# The official image's /app is root's; here it is uid 1000's: trusted as it is there
# (written, not `git config`-ed: one process fewer).
printf '[safe]\n\tdirectory = %s\n' "$WORKDIR" >> /etc/gitconfig

now_us() { local t=${EPOCHREALTIME:-0.0}; NOW=$(( 10#${t/./} )); }
step() {  # NAME SECONDS COMMAND: run COMMAND (a shell line) and print its record
  local name=$1 seconds=$2 line=$3 start rc out bytes timed_out=0 limit=()
  [ -n "$HAS_TIMEOUT" ] && limit=(timeout --kill-after=10 "$seconds")
  now_us; start=$NOW
  out=$("${limit[@]}" bash -c "$line" 2>&1 </dev/null)
  rc=$?
  if [ -n "$HAS_TIMEOUT" ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then timed_out=1; fi
  if [ "${#out}" -gt 4000 ]; then out=${out: -4000}; fi
  bytes=$(LC_ALL=C; echo "${#out}")
  now_us
  printf '@@crucible-step %s %s %s %s %s\n%s' "$name" "$rc" "$timed_out" "$(( (NOW - start) / 1000 ))" "$bytes" "$out"
}
HAS_TIMEOUT=''
if command -v timeout >/dev/null; then HAS_TIMEOUT=1; fi
# The image's own environment first (the official `docker run` starts from it; an exec does
# not): PID 1's, which is the container's configured environment, nothing of crucible's.
if [ -r /proc/1/environ ]; then
  while IFS= read -r -d '' kv; do export "${kv?}"; done < /proc/1/environ
fi
source "$WORK/env.sh"
cd "$WORKDIR" || exit 3
printf -v base %q "$BASE"
# A detached HEAD is the commit itself in .git/HEAD: read without a process.
head=''
if [ -f .git/HEAD ]; then read -r head < .git/HEAD || true; fi
if [ "$head" = "$BASE" ]; then
  out="HEAD is $BASE since the image was built (Dockerfile.hud): reset and checkout done there"
  printf '@@crucible-step reset 0 0 0 %s\n%s' "${#out}" "$out"
else
  step reset "$STEP_TIMEOUT" "git reset --hard $base
git checkout $base"
fi
step apply "$STEP_TIMEOUT" "git apply -v $WORK/patch.diff"
step before_repo_set_cmd "$STEP_TIMEOUT" "$BEFORE"
step run_script "$TEST_TIMEOUT" "bash $WORK/run_script.sh $TEST_FILES > $WORK/stdout.log 2> $WORK/stderr.log"
if command -v cat >/dev/null && command -v wc >/dev/null && [ -f "$WORK/stdout.log" ] && [ -f "$WORK/stderr.log" ]; then
  sizes=$(wc -c "$WORK/stdout.log" "$WORK/stderr.log")
  read -r n_out _ <<< "${sizes%%$'\n'*}"
  sizes=${sizes#*$'\n'}
  read -r n_err _ <<< "${sizes%%$'\n'*}"
  printf '@@crucible-files %s %s\n' "$n_out" "$n_err"
  cat "$WORK/stdout.log" "$WORK/stderr.log"
fi
