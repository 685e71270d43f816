# shellcheck shell=bash
# The official evaluator's steps in ONE exec (swe_tasks/replay.py, replay), as root:
#   SCRIPT crucible WORKDIR VAULT WORK BASE BEFORE_LINE TEST_FILES STEP_TIMEOUT TEST_TIMEOUT ENV_SH RUN_SCRIPT
#          [strict LOCK_PATHS SCAN_PATHS TEST_UID RESULTS_DIR GO_JSON GO_EXEC GO_WRAP RESULTS_HOOK NODE_WRAP
#           PY_PLUGIN EDIT_FIND EDIT_SED SED_WRAP HOME_FROM_ROOT]
# Without the strict arguments (integrity=none, the official evaluator) nothing below the
# official steps changes. With them (crucible-strict, swe_tasks/strict.py): stdin's first line
# is a one-time token (never in an argv or an environment); after before_repo_set_cmd each
# SCAN_PATHS file is sent back as it will run (@@crucible-scan BYTES PATH\n<path><bytes>), each
# LOCK_PATHS file (and every __init__.py/conftest.py beside it) is made root's and read-only,
# every directory from it up to WORKDIR root's and sticky (1777); run_script.sh runs as TEST_UID
# (setpriv), HOME a fresh directory of its own, its stdout and stderr through root-only FIFOs;
# when it exits, `\n<token> end <exit code>\n` goes to both, every process of TEST_UID is
# killed (the step's output says `outlived` when one was still there), and only then are the
# two files closed: what the tested code wrote after its end lies after the marker (recorded,
# never parsed). RESULTS_DIR (fresh, outside WORKDIR): made root's (711) with a directory r/ of
# TEST_UID's in it. PY_PLUGIN non-empty (swe_tasks/junit.py, run_script.sh runs pytest): the
# plugin written root's to WORK/pyresults/crucible_junit.py beside its entry point
# (crucible_junit-0.dist-info), that directory appended to PYTHONPATH and named by a .pth in HOME's
# user site-packages for each python3.X and in the site-packages of each venv a python on PATH
# belongs to (recorded as the step `pythons`), so every pytest session of the tests autoloads it and
# writes RESULTS_DIR/r/pytest-*.xml; after the kill each is read as TEST_UID (a symlink swapped
# in leads nowhere the tests could not read) if it is a regular file and not a symlink, and sent
# back after the run_script record:
#   @@crucible-junit STATE BYTES\n<that many bytes>   (one per file: STATE file, symlink, ...;
#                                                      none when pytest wrote none)
# GO_EXEC non-empty (swe_tasks/gojson.py, run_script.sh runs `go test`): the text of go test's
# -exec program (sh/go_test_exec.sh), written root's to WORK/go-test-exec, and
# `-exec=WORK/go-test-exec` appended to GOFLAGS for run_script.sh (after the image's own value),
# with `-json` before it where GO_JSON is `added`: the go command writes test2json events, made
# from the test binary's framed result lines only. Where GO_JSON is `wrapped`, GO_WRAP is the text
# of a `go` (sh/go_wrap.sh) written root's to WORK/go-wrap/go, that directory first on
# run_script.sh's PATH: it gives -json to `go test` alone (`go list` runs as given).
# RESULTS_HOOK non-empty (swe_tasks/jsresults.py, run_script.sh runs jest or mocha): written
# root's to WORK/results-hook.js, `--require=WORK/results-hook.js` appended to NODE_OPTIONS for
# run_script.sh, and NODE_WRAP (a `node`, sh/node_wrap.sh, that appends it again where
# NODE_OPTIONS was replaced) written root's to WORK/node-wrap/node, that directory first on PATH:
# the runner writes its own results to RESULTS_DIR/r/js-*.json; after the kill each is read as
# TEST_UID (a regular file, not a symlink) and sent back after the JUnit report:
#   @@crucible-js STATE BYTES\n<that many bytes>   (one per file; none when the runner wrote none)
# EDIT_FIND non-empty (swe_tasks/edits.py, run_script.sh edits every test file in a
# `find ... -print0 | while ...; do sed ... "$file"; done` loop, as NodeBB's do): after the lock,
# `find EDIT_FIND -print0` runs here as root and each file it lists that LOCK_PATHS names itself
# (not one below a directory it names: the patch chooses those names) and the lock made root's
# gets `sed --sandbox EDIT_SED FILE` (the script's own words, FILE where it names its variable;
# a name with a character outside [A-Za-z0-9_./@+,=-] is refused), as root, once; each such argument
# list (without --sandbox) is recorded (`printf %q`, one per line) in WORK/sed-wrap/sed-edits, and SED_WRAP (a `sed`,
# sh/sed_wrap.sh, that answers a recorded argument list with success and no write and runs the
# real sed for anything else) written root's to WORK/sed-wrap/sed, that directory first on
# run_script.sh's PATH. Recorded as the step `edit`: each file edited, one per line.
# Under strict, right after the apply step, what git apply wrote is read back as this git reads
# the patch (`git apply --numstat`; never .git, nor through a symlinked directory): their bytes
# on disk, hashed with no filter or attribute into a temporary index over BASE (new objects in
# WORK; the repo's index and objects are left alone), and git's diff of that index against BASE
# (as text, fixed prefixes, no pathspec) is the step `written`, whose output the scan reads added lines from and the trust reads touched paths from
# (swe_tasks/strict.py): a verbatim patch that names its files as git does not (a header's
# `x/test/a.js`, which git writes to test/a.js) or whose hunks' line numbers are off is read as
# git applied it. Its Python files are sent back for the scan beside SCAN_PATHS. Before the lock,
# each path written that is root's (git apply ran as root) and each directory above it that is
# root's (made for it) become TEST_UID's, as the image's tree is; recorded as the step `own`: how
# many. A hidden file with a symlinked directory on its path is not locked (nor trusted, nor edited).
# HOME_FROM_ROOT: names (one per line) of what in root's HOME (the image's HOME, /root by
# default) the tests' fresh HOME gets a copy of, TEST_UID's (swe_tasks/strict.py,
# home_from_root: npm's cache where the script runs npm install); recorded as the step `home`.
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
STRICT=${11:-} LOCK=${12:-} SCAN=${13:-} TEST_UID=${14:-1000} RESULTS=${15:-} GO_JSON=${16:-} GO_EXEC=${17:-} GO_WRAP=${18:-}
RESULTS_HOOK=${19:-} NODE_WRAP=${20:-} PY_PLUGIN=${21:-} EDIT_FIND=${22:-} EDIT_SED=${23:-} SED_WRAP=${24:-} HOME_FROM_ROOT=${25:-} WRITTEN=() REMOVED=()
TOKEN=''
MAX_REPORT=$((64 << 20))
AS=(setpriv "--reuid=$TEST_UID" "--regid=$TEST_UID" --clear-groups)
[ -d "$WORK" ] || mkdir -p "$WORK"
if [ "$STRICT" = strict ]; then
  chmod 711 "$WORK"
  IFS= read -r TOKEN || exit 4
fi
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
written_index() {  # WRITTEN's bytes as they lie on disk (no filter, eol or attribute the patch could name) over BASE
  local rel sha mode i
  local -a files=() shas=()
  git read-tree "$BASE" || return
  for rel in "${WRITTEN[@]}"; do if [ -f "$rel" ] && [ ! -L "$rel" ]; then files+=("$rel"); fi; done
  if [ "${#REMOVED[@]}" -gt 0 ]; then printf '%s\0' "${REMOVED[@]}" | git update-index -z --force-remove --stdin || return; fi
  if [ "${#files[@]}" -gt 0 ]; then  # names as arguments: --stdin-paths would unquote a name starting with "
    mapfile -t shas < <(git hash-object -w --no-filters -- "${files[@]}")
    if [ "${#shas[@]}" != "${#files[@]}" ]; then echo "git hash-object read ${#shas[@]} of ${#files[@]} files"; return 1; fi
  fi
  {
    for ((i = 0; i < ${#files[@]}; i++)); do
      mode=100644
      if [ -x "${files[i]}" ]; then mode=100755; fi
      printf '%s %s\t%s\0' "$mode" "${shas[i]}" "${files[i]}"
    done
    for rel in "${WRITTEN[@]}"; do
      if [ -L "$rel" ]; then
        sha=$(printf '%s' "$(readlink -- "$rel")" | git hash-object -w --stdin) || return
        printf '120000 %s\t%s\0' "$sha" "$rel"
      fi
    done
  } | git update-index -z --index-info
}
read_written() {  # what git apply wrote, as git reads the patch here: WRITTEN, and git's own diff of it
  local field rel start rc=0 out='' objects unread=''
  local -a fields=()
  WRITTEN=() REMOVED=()
  now_us; start=$NOW
  mapfile -t -d '' fields < <(git apply --numstat -z "$WORK/patch.diff" 2>/dev/null)
  for field in "${fields[@]}"; do  # "ADDED<TAB>DELETED<TAB>PATH" (a rename's or a copy's new path)
    if [[ $field != *$'\t'*$'\t'* ]]; then continue; fi
    rel=${field#*$'\t'*$'\t'}
    case $rel in *$'\n'*) unread=1; continue ;; ''|.git|.git/*|/*) continue ;; esac
    if through_symlink "$rel"; then continue; fi
    if [ -e "$rel" ] || [ -L "$rel" ]; then WRITTEN+=("$rel"); else REMOVED+=("$rel"); fi
  done
  if [ "${#WRITTEN[@]}" -gt 0 ] || [ "${#REMOVED[@]}" -gt 0 ]; then
    # A temporary index over BASE, new objects in WORK (the repo's own stay the tests' uid's), no
    # pathspec anywhere (a name can be pathspec magic: `:(exclude)*`), the diff forced to text
    # (a .gitattributes the patch adds can say `*.py -diff`) with fixed prefixes.
    objects=$(cd "$(git rev-parse --git-common-dir)" && pwd -P)/objects  # a linked worktree's too
    out=$(export GIT_INDEX_FILE="$WORK/written.index" GIT_OBJECT_DIRECTORY="$WORK/objects" \
      GIT_ALTERNATE_OBJECT_DIRECTORIES="$objects"
      mkdir -p "$WORK/objects" && written_index 2>&1 \
      && git -c core.quotepath=off diff --cached --text --no-renames --no-ext-diff --no-textconv --no-color \
        --src-prefix=a/ --dst-prefix=b/ -U0 "$BASE" 2>&1) || rc=$?
    rm -rf "$WORK/written.index" "$WORK/objects"
  fi
  if [ "${#out}" -gt $((16 << 20)) ]; then rc=2 out="git's diff of what the patch wrote is over 16 MiB"; fi
  # a name holding a newline cannot be listed one per line, so its file would go unread (unscanned,
  # untrusted): not read back is not graded
  if [ -n "$unread" ]; then rc=2 out="git wrote a path whose name holds a newline: what it holds is not read"; fi
  now_us
  printf '@@crucible-step written %s 0 %s %s\n%s' "$rc" "$(( (NOW - start) / 1000 ))" "$(LC_ALL=C; echo "${#out}")" "$out"
}
send_scanned() {  # each SCAN path and each Python file git wrote, as it will run (a regular file inside WORKDIR)
  local rel size
  local -A sent=()
  while IFS= read -r rel; do
    if [ -z "$rel" ] || [ ! -f "$rel" ] || [ -L "$rel" ] || [ -n "${sent[$rel]:-}" ]; then continue; fi
    if [ "${#sent[@]}" -ge 400 ]; then break; fi
    sent[$rel]=1
    size=$(wc -c < "$rel") || continue
    printf '@@crucible-scan %s %s\n%s' "$size" "$(LC_ALL=C; echo "${#rel}")" "$rel"
    cat "$rel"
  done < <(printf '%s\n' "$SCAN"; for rel in "${WRITTEN[@]}"; do [[ $rel == *.py && $rel != *$'\n'* ]] && printf '%s\n' "$rel"; done)
}
lock_one() {  # FILE: root's, read-only to everyone else
  if [ ! -f "$1" ] || [ -L "$1" ]; then return 0; fi
  chown 0:0 "$1" && chmod go-w,u-w "$1" && LOCKED+=("$1")
}
lock_tree() {  # DIR named as a test path: every file below it locked, every directory root's and sticky
  local f
  shopt -s globstar dotglob nullglob
  for f in "$1" "$1"/**; do
    if [ -L "$f" ]; then continue; fi
    if [ -d "$f" ]; then chown 0:0 "$f" && chmod 1777 "$f"; else lock_one "$f"; fi
  done
  shopt -u globstar dotglob nullglob
}
through_symlink() {  # REL: whether a directory on REL's path is a symlink (it may lead anywhere)
  local dir=$1
  while [ "$dir" != "${dir%/*}" ]; do
    dir=${dir%/*}
    if [ -L "$dir" ]; then return 0; fi
  done
  return 1
}
own_patched() {  # what root's git apply wrote for the patch: TEST_UID's, as the image's tree is
  local rel dir n=0 out
  for rel in "${WRITTEN[@]}"; do
    # A symlink git wrote is root's whatever it points at (-O would follow it).
    if { [ -L "$rel" ] || [ -O "$rel" ]; } && chown -h "$TEST_UID:$TEST_UID" -- "$rel"; then n=$((n + 1)); fi
    dir=$rel
    while [ "$dir" != "${dir%/*}" ]; do  # the directories git apply made for it (root's); the image's stop it
      dir=${dir%/*}
      if [ -O "$dir" ] && [ ! -L "$dir" ] && [ -d "$dir" ]; then chown "$TEST_UID:$TEST_UID" -- "$dir"; else break; fi
    done
  done
  out="$n"
  printf '@@crucible-step own 0 0 0 %s\n%s' "${#out}" "$out"
}
lock_hidden() {  # the test files, their packages' start-up files, their directories up to WORKDIR
  local rel dir
  LOCKED=()
  while IFS= read -r rel; do
    if [ -z "$rel" ] || [ ! -e "$rel" ]; then continue; fi
    # Not where a directory on its path is a symlink (a patch can make one): root would change
    # what lies where it leads, and the file's real directory would stay the tests' to rename
    # in. Unlocked, the file is not trusted.
    if through_symlink "$rel"; then continue; fi
    if [ -d "$rel" ] && [ ! -L "$rel" ]; then lock_tree "$rel"; else lock_one "$rel"; fi
    dir=$(dirname -- "$rel")
    while :; do
      lock_one "$dir/__init__.py"
      lock_one "$dir/conftest.py"
      if [ ! -L "$dir" ] && [ "$(stat -c %u "$dir")" != 0 ]; then chown 0:0 "$dir" && chmod 1777 "$dir"; fi
      [ "$dir" = . ] && break
      dir=$(dirname -- "$dir")
    done
  done <<< "$LOCK"
  out=$(printf '%s\n' "${LOCKED[@]}")
  printf '@@crucible-step lock 0 0 0 %s\n%s' "$(LC_ALL=C; echo "${#out}")" "$out"
}
edit_locked() {  # run_script.sh's own edit of each locked file its find lists, made here as root, once
  local -a find_args sed_args call
  local -A locked=()
  local f a err rc=0 out='' start
  now_us; start=$NOW
  rm -rf "$WORK/sed-wrap" && mkdir -m 755 "$WORK/sed-wrap" && (umask 022; : > "$WORK/sed-wrap/sed-edits")
  mapfile -t find_args <<< "$EDIT_FIND"
  mapfile -t sed_args <<< "$EDIT_SED"
  # Only a file LOCK names itself (the benchmark's path), never one below a directory it names:
  # the patch chooses those names, and each goes into sed's script as the script's own loop puts
  # it (a `#e` in it would be a command run by root). --sandbox refuses e, w and r all the same.
  # Reached through no symlinked directory: the file is the one inside WORKDIR that was locked.
  while IFS= read -r f; do
    if [ -n "$f" ] && [ -f "$f" ] && [ ! -L "$f" ] && [ -O "$f" ] && ! through_symlink "$f"; then locked[$f]=1; fi
  done <<< "$LOCK"
  if ! command -v find >/dev/null || ! command -v sed >/dev/null; then
    rc=127 out='find or sed is not in this image'
  elif ! sed --sandbox -n '' </dev/null 2>/dev/null; then
    rc=127 out="this image's sed has no --sandbox (GNU sed 4.3 or later)"
  else
    while IFS= read -r -d '' f; do
      if [ -z "${locked[${f#./}]:-}" ] || [ -L "$f" ] || [ ! -f "$f" ]; then continue; fi
      if [[ $f =~ [^A-Za-z0-9_./@+,=-] ]]; then
        rc=1 out+="$f: not edited, a character outside [A-Za-z0-9_./@+,=-] in its name"$'\n'
        continue
      fi
      call=()
      for a in "${sed_args[@]}"; do call+=("${a//@@crucible-file@@/"$f"}"); done
      call+=("$f")
      if err=$(sed --sandbox "${call[@]}" 2>&1 </dev/null); then
        printf '%q ' "${call[@]}" >> "$WORK/sed-wrap/sed-edits" && printf '\n' >> "$WORK/sed-wrap/sed-edits"
        lock_one "$f"
        out+="$f"$'\n'
      else
        rc=1 out+="$f: ${err:0:300}"$'\n'
      fi
    done < <(find "${find_args[@]}" -print0 2>/dev/null)
  fi
  (umask 022; printf '%s' "$SED_WRAP" > "$WORK/sed-wrap/sed") && chmod 755 "$WORK/sed-wrap/sed"
  now_us
  printf '@@crucible-step edit %s 0 %s %s\n%s' "$rc" "$(( (NOW - start) / 1000 ))" "$(LC_ALL=C; echo "${#out}")" "$out"
}
outlived_by_tests() {  # whether any process of TEST_UID is alive (its real uid, from /proc)
  local q key real
  for q in /proc/[0-9]*; do
    while IFS=$'\t' read -r key real _; do
      if [ "$key" = "Uid:" ]; then
        if [ "$real" = "$TEST_UID" ]; then return 0; fi
        break
      fi
    done 2>/dev/null < "$q/status"
  done
  return 1
}
strict_run_script() {  # run_script.sh as TEST_UID, output through root's FIFOs, the end marked
  local start rc outlived timed_out=0 readers goflags='' limit=() home=/tmp/crucible-test-home as=("${AS[@]}")
  [ -n "$HAS_TIMEOUT" ] && limit=(timeout --kill-after=10 "$TEST_TIMEOUT")
  rm -rf "$home" && mkdir -m 700 "$home" && chown "$TEST_UID:$TEST_UID" "$home"
  if [ -n "$HOME_FROM_ROOT" ]; then copy_root_home "$home"; fi
  if [ -n "$RESULTS" ]; then
    if ! { mkdir -m 711 "$RESULTS" && mkdir -m 700 "$RESULTS/r" && chown "$TEST_UID:$TEST_UID" "$RESULTS/r"; }; then
      RESULTS_FAILED=1
    fi
  fi
  if [ -n "$RESULTS" ] && [ -n "$PY_PLUGIN" ]; then
    install_pytest_plugin "$home"
    local -x PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$WORK/pyresults"
  fi
  if [ -n "$GO_EXEC" ]; then
    (umask 022; printf '%s' "$GO_EXEC" > "$WORK/go-test-exec") && chmod 755 "$WORK/go-test-exec"
    if [ "$GO_JSON" = added ]; then goflags="-json "; fi
    local -x GOFLAGS="${GOFLAGS:+$GOFLAGS }${goflags}-exec=$WORK/go-test-exec"
  fi
  if [ "$GO_JSON" = wrapped ] && [ -n "$GO_WRAP" ]; then
    rm -rf "$WORK/go-wrap" && mkdir -m 755 "$WORK/go-wrap"
    (umask 022; printf '%s' "$GO_WRAP" > "$WORK/go-wrap/go") && chmod 755 "$WORK/go-wrap/go"
    local -x PATH="$WORK/go-wrap:$PATH"
  fi
  if [ -n "$RESULTS_HOOK" ] && [ -n "$NODE_WRAP" ]; then
    (umask 022; printf '%s' "$RESULTS_HOOK" > "$WORK/results-hook.js")
    rm -rf "$WORK/node-wrap" && mkdir -m 755 "$WORK/node-wrap"
    (umask 022; printf '%s' "$NODE_WRAP" > "$WORK/node-wrap/node") && chmod 755 "$WORK/node-wrap/node"
    local -x PATH="$WORK/node-wrap:$PATH" NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require=$WORK/results-hook.js"
  fi
  if [ -n "$EDIT_FIND" ] && [ -n "$SED_WRAP" ]; then
    local -x PATH="$WORK/sed-wrap:$PATH"
  fi
  chmod 644 "$WORK/run_script.sh"
  rm -f "$WORK/out.fifo" "$WORK/err.fifo" && mkfifo -m 600 "$WORK/out.fifo" "$WORK/err.fifo"
  (umask 077; cat "$WORK/out.fifo" > "$WORK/stdout.log") & readers=$!
  (umask 077; cat "$WORK/err.fifo" > "$WORK/stderr.log") & readers="$readers $!"
  now_us; start=$NOW
  {
    # shellcheck disable=SC2086  # the test files unquoted, as officially
    HOME=$home "${limit[@]}" "${as[@]}" bash "$WORK/run_script.sh" $TEST_FILES </dev/null
    rc=$?
    printf '\n%s end %s\n' "$TOKEN" "$rc"
    printf '\n%s end %s\n' "$TOKEN" "$rc" >&2
    if outlived_by_tests; then rc="$rc outlived"; fi
    "${as[@]}" bash -c 'kill -9 -1' 2>/dev/null
    printf '%s' "$rc" > "$WORK/rc"
  } > "$WORK/out.fifo" 2> "$WORK/err.fifo"
  # shellcheck disable=SC2086  # two pids
  wait $readers
  read -r rc outlived < "$WORK/rc"
  if [ -n "$HAS_TIMEOUT" ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then timed_out=1; fi
  now_us
  printf '@@crucible-step run_script %s %s %s %s\n%s' "$rc" "$timed_out" "$(( (NOW - start) / 1000 ))" "${#outlived}" "$outlived"
}
copy_root_home() {  # HOME: a copy of each HOME_FROM_ROOT entry of root's HOME, TEST_UID's
  local name from=${ROOT_HOME:-/root} out='' rc=0 start
  now_us; start=$NOW
  while IFS= read -r name; do
    if [ -z "$name" ] || [ -L "$from/$name" ] || [ ! -e "$from/$name" ]; then continue; fi
    if cp -a -- "$from/$name" "$1/$name" && chown -R "$TEST_UID:$TEST_UID" "$1/$name"; then
      out+="$from/$name"$'\n'
    else
      rc=1
    fi
  done <<< "$HOME_FROM_ROOT"
  now_us
  printf '@@crucible-step home %s 0 %s %s\n%s' "$rc" "$(( (NOW - start) / 1000 ))" "$(LC_ALL=C; echo "${#out}")" "$out"
}
install_pytest_plugin() {  # HOME: the plugin and its entry point root's; HOME's user site-packages link to them
  local dir=$WORK/pyresults minor site
  rm -rf "$dir" && mkdir -m 755 "$dir" "$dir/crucible_junit-0.dist-info" || return 0
  (umask 022
   printf '%s' "$PY_PLUGIN" > "$dir/crucible_junit.py"
   printf 'Metadata-Version: 2.1\nName: crucible-junit\nVersion: 0\n' > "$dir/crucible_junit-0.dist-info/METADATA"
   printf '[pytest11]\ncrucible_junit = crucible_junit\n' > "$dir/crucible_junit-0.dist-info/entry_points.txt")
  # A .pth line puts the plugin's directory on sys.path wherever site-packages is read (written by
  # the shell itself: no process per directory, where links cost two each).
  mkdir -p "$1"/.local/lib/python3.{6..14}/site-packages || return 0
  for minor in {6..14}; do
    printf '%s\n' "$dir" > "$1/.local/lib/python3.$minor/site-packages/crucible_junit.pth"
  done
  chown -hR "$TEST_UID:$TEST_UID" "$1/.local"  # the tests' own (pip --user installs there); the plugin stays root's
  plugin_in_venvs "$dir"
}
python_candidates() {  # each python run_script.sh may start: on PATH, a pytest's interpreter, a bin/ the script names
  local dir exe line bin
  local -a dirs
  IFS=: read -r -a dirs <<< "$PATH"
  shopt -s nullglob
  for dir in "${dirs[@]}"; do
    [ -n "$dir" ] || continue
    for exe in "$dir"/python "$dir"/python3 "$dir"/python3.[0-9] "$dir"/python3.[0-9][0-9]; do
      if [ -f "$exe" ] && [ -x "$exe" ]; then printf '%s\n' "$exe"; fi
    done
    for exe in "$dir"/pytest "$dir"/py.test; do  # a console script names its interpreter on its #! line
      line=''
      if [ -f "$exe" ]; then read -r line < "$exe" || true; fi
      line=${line#\#!}; line=${line# }; line=${line%% *}
      if [[ "$line" == /*/python* ]]; then printf '%s\n' "$line"; fi
    done
  done
  # `. /opt/venv/bin/activate`, `/opt/venv/bin/pytest`: a venv the script itself turns to
  while IFS= read -r bin; do
    for exe in "${bin%/*}"/python "${bin%/*}"/python3 "${bin%/*}"/python3.[0-9] "${bin%/*}"/python3.[0-9][0-9]; do
      if [ -f "$exe" ] && [ -x "$exe" ]; then printf '%s\n' "$exe"; fi
    done
  done < <(grep -oE '(/[A-Za-z0-9_.@+-]+)+/bin/(python[0-9.]*|pytest|py\.test|activate)' "$WORK/run_script.sh" 2>/dev/null)
  shopt -u nullglob
}
plugin_in_venvs() {  # DIR: a .pth naming DIR in the site-packages of each venv a candidate python belongs to
  local dir=$1 exe bin venv site out='' start n
  local -A seen=() placed=()
  now_us; start=$NOW
  while IFS= read -r exe; do
    if [ -n "${seen[$exe]:-}" ]; then continue; fi
    seen[$exe]=1
    # A venv is a pyvenv.cfg beside the interpreter as started or one directory up (Python's own
    # rule, symlinks not followed); it ignores the user site-packages, and ansible-test's rebuilt
    # environment drops PYTHONPATH: its own site-packages is where pytest will look.
    bin=${exe%/*} venv=''
    if [ -f "$bin/pyvenv.cfg" ]; then venv=$bin; elif [ -f "${bin%/*}/pyvenv.cfg" ]; then venv=${bin%/*}; fi
    if [ -z "$venv" ]; then out+="$exe"$'\t\t\n'; continue; fi
    n=0
    shopt -s nullglob
    for site in "$venv"/lib/python3.*/site-packages; do
      n=$((n + 1))
      if [ -z "${placed[$site]:-}" ]; then
        # a link planted there (a venv in the tree the patch writes) is not written through
        rm -f "$site/crucible_junit.pth" 2>/dev/null
        if { printf '%s\n' "$dir" > "$site/crucible_junit.pth"; } 2>/dev/null; then
          placed[$site]=ok
        else
          placed[$site]="!$site could not be written"
        fi
      fi
      if [ "${placed[$site]}" = ok ]; then out+="$exe"$'\t'"$venv"$'\t'"$site"$'\n'; else out+="$exe"$'\t'"$venv"$'\t'"${placed[$site]}"$'\n'; fi
    done
    shopt -u nullglob
    if [ "$n" = 0 ]; then out+="$exe"$'\t'"$venv"$'\t'"!$venv has no lib/python3.*/site-packages"$'\n'; fi
  done < <(python_candidates)
  now_us
  printf '@@crucible-step pythons 0 0 %s %s\n%s' "$(( (NOW - start) / 1000 ))" "$(LC_ALL=C; echo "${#out}")" "$out"
}
send_reports() {  # KIND GLOB: each report read after the kill as TEST_UID: regular files, not symlinks, 64 MiB in all
  local kind=$1 report state size total=0 count=0
  if [ -n "$RESULTS_FAILED" ] || ! command -v cat >/dev/null || ! command -v wc >/dev/null; then
    printf '@@crucible-%s unreadable 0\n' "$kind"; return
  fi
  if [ -L "$RESULTS/r" ] || [ ! -d "$RESULTS/r" ]; then printf '@@crucible-%s not-a-file 0\n' "$kind"; return; fi
  shopt -s nullglob
  for report in "$RESULTS"/r/$2; do
    state=file size=0 count=$((count + 1))
    if [ "$count" -gt 200 ]; then state=too-many
    elif [ -L "$report" ]; then state=symlink
    elif [ ! -f "$report" ]; then state=not-a-file
    elif ! (umask 077; "${AS[@]}" cat -- "$report" > "$WORK/report"); then state=unreadable
    else
      size=$(wc -c < "$WORK/report") || { state=unreadable; size=0; }
      size=$((size)) total=$((total + size))
      if [ "$total" -gt "$MAX_REPORT" ]; then state=too-large; size=0; fi
    fi
    printf '@@crucible-%s %s %s\n' "$kind" "$state" "$size"
    if [ "$state" = file ]; then cat -- "$WORK/report"; else break; fi
  done
  shopt -u nullglob
}
HAS_TIMEOUT='' RESULTS_FAILED=''
if command -v timeout >/dev/null; then HAS_TIMEOUT=1; fi
# The image's own environment first (the official `docker run` starts from it; an exec does
# not): PID 1's, which is the container's configured environment, nothing of crucible's.
if [ -r /proc/1/environ ]; then
  while IFS= read -r -d '' kv; do export "${kv?}"; done < /proc/1/environ
fi
source "$WORK/env.sh"
ROOT_HOME=${HOME:-/root}
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
if [ "$STRICT" = strict ] && [ ! -s "$WORK/patch.diff" ]; then
  # crucible-strict left out every chunk (all on the test paths: strict.graded_patch), or there
  # was none: nothing to apply, where git apply would refuse an empty patch
  out="nothing to apply: the patch has no chunk outside the instance's test paths"
  printf '@@crucible-step apply 0 0 0 %s\n%s' "${#out}" "$out"
else
  step apply "$STEP_TIMEOUT" "git apply -v $WORK/patch.diff"
fi
if [ "$STRICT" = strict ]; then read_written; fi
step before_repo_set_cmd "$STEP_TIMEOUT" "$BEFORE"
if [ "$STRICT" = strict ]; then
  send_scanned
  own_patched
  lock_hidden
  if [ -n "$EDIT_FIND" ] && [ -n "$SED_WRAP" ]; then edit_locked; fi
  strict_run_script
  if [ -n "$RESULTS" ] && [ -n "$PY_PLUGIN" ]; then send_reports junit 'pytest-*.xml'; fi
  if [ -n "$RESULTS" ] && [ -n "$RESULTS_HOOK" ]; then send_reports js 'js-*.json'; fi
else
  step run_script "$TEST_TIMEOUT" "bash $WORK/run_script.sh $TEST_FILES > $WORK/stdout.log 2> $WORK/stderr.log"
fi
if command -v cat >/dev/null && command -v wc >/dev/null && [ -f "$WORK/stdout.log" ] && [ -f "$WORK/stderr.log" ]; then
  sizes=$(wc -c "$WORK/stdout.log" "$WORK/stderr.log")
  read -r n_out _ <<< "${sizes%%$'\n'*}"
  sizes=${sizes#*$'\n'}
  read -r n_err _ <<< "${sizes%%$'\n'*}"
  printf '@@crucible-files %s %s\n' "$n_out" "$n_err"
  cat "$WORK/stdout.log" "$WORK/stderr.log"
fi
