# shellcheck shell=bash
# The official evaluator's steps in ONE exec (swe_tasks/replay.py, replay), as root:
#   SCRIPT crucible WORKDIR VAULT WORK BASE BEFORE_LINE TEST_FILES STEP_TIMEOUT TEST_TIMEOUT ENV_SH RUN_SCRIPT
# The patch (binary hunks stripped) comes on stdin. First the image's history goes
# back from the root-only vault into WORKDIR/.git; then, as swe_bench_pro_eval.py's entry
# script does, in one shell with no `set -e`: the Dockerfiles' ENV lines as exports, `cd
# WORKDIR`, `git reset --hard BASE`, `git checkout BASE`, `git apply -v patch.diff`, the last
# line of before_repo_set_cmd, and run_script.sh with the comma-joined test files, stdout and
# stderr to separate files (the test files unquoted, as there). Each step has its own limit (coreutils' timeout where the image
# has it). For each step one record goes to stdout:
#   @@crucible-step NAME EXIT_CODE TIMED_OUT MILLISECONDS OUTPUT_BYTES\n<that many bytes of output tail>
# then, where the image has cat and wc, the run's two files (else replay.py reads them):
#   @@crucible-file stdout|stderr BYTES\n<the file>
# shellcheck disable=SC1091  # WORK/env.sh is written here

WORKDIR=$1 VAULT=$2 WORK=$3 BASE=$4 BEFORE=$5 TEST_FILES=$6 STEP_TIMEOUT=$7 TEST_TIMEOUT=$8
mkdir -p "$WORK"
if command -v cat >/dev/null; then
  cat > "$WORK/patch.diff"
else
  IFS= read -r -d '' patch || true
  printf '%s' "$patch" > "$WORK/patch.diff"
fi
printf '%s\n' "$9" > "$WORK/env.sh"
printf '%s' "${10}" > "$WORK/run_script.sh"
if [ -d "$VAULT" ]; then
  rm -rf "${WORKDIR:?}/.git"
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
HAS_TIMEOUT=$(command -v timeout || true)
source "$WORK/env.sh"
cd "$WORKDIR" || exit 3
base=$(printf %q "$BASE")
step reset "$STEP_TIMEOUT" "git reset --hard $base
git checkout $base"
step apply "$STEP_TIMEOUT" "git apply -v $WORK/patch.diff"
step before_repo_set_cmd "$STEP_TIMEOUT" "$BEFORE"
step run_script "$TEST_TIMEOUT" "bash $WORK/run_script.sh $TEST_FILES > $WORK/stdout.log 2> $WORK/stderr.log"
if command -v cat >/dev/null && command -v wc >/dev/null; then
  for f in stdout stderr; do
    if [ -f "$WORK/$f.log" ]; then
      n=$(wc -c < "$WORK/$f.log")
      printf '@@crucible-file %s %s\n' "$f" "$((n))"
      cat "$WORK/$f.log"
    fi
  done
fi
