# shellcheck shell=bash
# Grading's stager, started by envs/coding/staging.py (start) as root in the fresh grading
# workspace before the submission exists, through gitops.script_argv:
#   bash -c "SCRIPT_PRELUDE + sh/shadow.sh + this" crucible \
#     WORKDIR BASE VAULT DIR UID_WALL NONCE [HIDDEN...]
# (each HIDDEN is "MODE PATH": MODE 644 or 755 writes a file, link a symlink to the piece's
# text, del removes the path; the test change's deletions and renames arrive as del entries)
# (the prelude: set -euo pipefail and the HARDEN array of git flags). It resets the tree to
# the baseline at once, then waits on stdin for the submission: the header line
# "<npatch> <all|list> <own bytes> <scan bytes> [<label> <bytes>]... [<hidden bytes>]..." and
# the pieces back to back (staging.submission_input). Once all is staged, each scan path that
# is a regular file goes back on stdout (staging.scanned): "\nNONCE scan SIZE PATH_BYTES\n",
# the path, the file: the test-awareness scan's input without a request per file. An absolute
# HIDDEN path is a grader's own file. Exits 10 when no variant of the diff applies, 3 when the workspace or
# its input is not what it expects.
# shellcheck disable=SC2154  # HARDEN comes from the prelude
# shellcheck disable=SC2034  # VAULT is read by require_vault (sh/shadow.sh)
# shellcheck disable=SC2164  # set -e (the prelude) ends the script when a cd fails

WORKDIR=$1 BASE=$2 VAULT=$3 DIR=$4 UID_WALL=$5 NONCE=$6
shift 6
hidden=("$@")

# The fresh container's tree normally differs in nothing from the baseline, so only stale
# tracked files are rewritten (no copy-up of a big tree); untracked files go, ignored ones
# (install outputs) stay. $DIR/stale keeps what was rewritten: it is handed over too.
require_vault
if [ -e "$DIR" ] || [ -L "$DIR" ]; then rm -rf -- "$DIR"; fi  # a fresh workspace has none: no rm
shadow_init "$DIR"  # DIR made 700
cd "$WORKDIR"
shadow_read_base
# ls-files -m hashes only what it must: a file whose stat data is not the index's (all of them,
# from an index read from the vault); no refresh before it, which would stat the tree twice.
git "${HARDEN[@]}" ls-files -z -m -d > "$DIR/stale"
if [ -s "$DIR/stale" ]; then git "${HARDEN[@]}" checkout-index -f -z --stdin < "$DIR/stale"; fi  # else no git
git "${HARDEN[@]}" clean -fdq

# The header: "<npatch> <all|list> <own bytes> <scan bytes> [<label> <bytes>]... [<hidden bytes>]...". Each
# piece is read with head -c, which never reads past its count: a short input leaves the
# total short, which one count over all the pieces catches. An empty piece is made with no head.
piece() { if [ "$1" = 0 ]; then : > "$2"; else head -c "$1" > "$2"; fi; }
fail() { echo "crucible: $*" >&2; exit 3; }
count() { [[ $1 =~ ^(0|[1-9][0-9]{0,15})$ ]]; }
read -r -a header || fail "no submission arrived"
NPATCH=${header[0]:-x} OWN=${header[1]:-} OWN_BYTES=${header[2]:-x} SCAN_BYTES=${header[3]:-x}
count "$NPATCH" && count "$OWN_BYTES" && count "$SCAN_BYTES" && [[ $OWN == all || $OWN == list ]] ||
  fail "bad staging header"
[ "${#header[@]}" = $((4 + 2 * NPATCH + ${#hidden[@]})) ] || fail "bad staging header"
labels=() pieces=() expected=$((OWN_BYTES + SCAN_BYTES))
for ((i = 0; i < NPATCH; i++)); do
  label=${header[4 + 2 * i]} size=${header[5 + 2 * i]}
  [[ $label =~ ^[a-z-]+$ ]] && count "$size" || fail "bad staging header"
  labels+=("$label"); pieces+=("$DIR/$label.patch"); expected=$((expected + size))
  piece "$size" "$DIR/$label.patch"
done
for ((i = 0; i < ${#hidden[@]}; i++)); do
  size=${header[4 + 2 * NPATCH + i]}
  count "$size" || fail "bad staging header"
  pieces+=("$DIR/hidden.$i"); expected=$((expected + size))
  piece "$size" "$DIR/hidden.$i"
done
pieces+=("$DIR/own" "$DIR/scan")
piece "$OWN_BYTES" "$DIR/own"
piece "$SCAN_BYTES" "$DIR/scan"
wc -c -- "${pieces[@]}" > "$DIR/count"  # its last line is the total (or the only file's count)
total=
while read -r n _; do total=$n; done < "$DIR/count"
[ "$total" = "$expected" ] || fail "the submission ended early"
printf '%s received %s %s\n' "$NONCE" "$NPATCH" "${#hidden[@]}"

# Applied in the shadow repo, so the baseline's .gitattributes convert exactly as at capture
# (eol=crlf files), and git refuses to write beyond symlinks. git apply is all-or-nothing.
cd "$WORKDIR"
applied=none
if [ "$NPATCH" = 0 ]; then applied=empty; fi
for label in ${labels[@]+"${labels[@]}"}; do
  rc=0
  git "${HARDEN[@]}" apply --binary --whitespace=nowarn --verbose -- "$DIR/$label.patch" 2>&1 || rc=$?
  printf '\n%s apply %s %s\n' "$NONCE" "$label" "$rc"
  if [ "$rc" = 0 ]; then applied=$label; break; fi
done
[ "$applied" != none ] || exit 10

# Hidden tests: every parent a real directory inside workdir (a symlink or file the diff put
# there is removed; past a missing part nothing deeper exists), whatever the diff left at the
# path itself removed, then the file written.
stamp() { if [ -n "${EPOCHREALTIME:-}" ]; then stamp=$EPOCHREALTIME; else stamp=$(date +%s.%N); fi; }
stamp; began=$stamp
owner=0 root=$WORKDIR
if [ "$UID_WALL" = 1 ]; then owner=1000; fi
# Deletions first, and only where every parent is a real directory (else nothing is there to
# delete): a deletion must never remove what the change writes, e.g. tests/fx/a.txt deleted
# where tests/fx becomes a file.
for i in "${!hidden[@]}"; do
  mode=${hidden[$i]%% *} rel=${hidden[$i]#* }
  [[ $mode =~ ^(644|755|link|del)$ ]] || fail "bad hidden entry"
  [ "$mode" = del ] || continue
  target=$root/$rel parent='' d=$root inside=1
  if [[ $rel == */* ]]; then parent=${rel%/*}; fi
  IFS=/ read -r -a parts <<< "$parent"
  for part in ${parts[@]+"${parts[@]}"}; do
    [ -z "$part" ] || [ "$part" = . ] && continue
    d="$d/$part"
    if [ -L "$d" ] || [ ! -d "$d" ]; then inside=0; break; fi
  done
  if [ "$inside" = 1 ] && { [ -e "$target" ] || [ -L "$target" ]; }; then rm -rf -- "$target"; fi
done
for i in "${!hidden[@]}"; do
  mode=${hidden[$i]%% *} rel=${hidden[$i]#* }
  if [ "$mode" = del ]; then continue; fi  # done above
  if [[ $rel == /* ]]; then  # the grader's own files (a scenario task's probe): root's, readable
    install -D -m 644 -o 0 -g 0 -- "$DIR/hidden.$i" "$rel"
    continue
  fi
  target=$root/$rel parent=
  if [[ $rel == */* ]]; then parent=${rel%/*}; fi
  d=$root
  IFS=/ read -r -a parts <<< "$parent"
  for part in ${parts[@]+"${parts[@]}"}; do
    [ -z "$part" ] || [ "$part" = . ] && continue
    d="$d/$part"
    if [ -L "$d" ] || { [ -e "$d" ] && [ ! -d "$d" ]; }; then rm -f -- "$d"; break; fi
    [ -e "$d" ] || break
  done
  if [ -e "$target" ] || [ -L "$target" ]; then rm -rf -- "$target"; fi
  if [ ! -d "${target%/*}" ]; then mkdir -p -- "${target%/*}"; fi
  if [ "$mode" = link ]; then
    ln -s -- "$(cat -- "$DIR/hidden.$i")" "$target"
    chown -h "$owner:$owner" -- "$target"
  else
    install -m "$mode" -o "$owner" -g "$owner" -- "$DIR/hidden.$i" "$target"
  fi
done
stamp; printf '%s hidden %s %s\n' "$NONCE" "$began" "$stamp"

# "Chown what you stage": the paths the diff and the hidden tests touch (and their parents,
# NUL-separated in $DIR/own), and only those root owns, so nothing else of a big tree is
# copied up. OWN=all (a diff crucible could not list) hands over the whole tree.
if [ "$UID_WALL" = 1 ]; then
  if [ "$OWN" = all ]; then
    chown -R 1000:1000 -- "$WORKDIR"
  else
    own=()
    while IFS= read -r -d '' rel; do own+=("$WORKDIR/$rel"); done < "$DIR/stale"
    while IFS= read -r -d '' rel; do own+=("$WORKDIR/$rel"); done < "$DIR/own"
    [ ${#own[@]} = 0 ] || chown -h --from=0 1000:1000 -- "${own[@]}" 2>/dev/null || true
  fi
fi

# The hidden change stays the task's while the tests run as uid 1000: its files root's (the
# tests read them, nothing they run rewrites them), and every directory above them up to the
# workdir that uid 1000 owns becomes root's and sticky (1777: files can still be created, as
# pytest's __pycache__ is, but none of root's renamed or removed), so code under test cannot
# swap a hidden test or its data before it is read. (An isolated verdict keeps them in its
# own directory, out of reach already: its launcher writes them, never the stager.)
# The test-side code the hidden tests run with is kept the same way: every __init__.py and
# conftest.py on a hidden file's path (up to the workdir's own conftest.py) and every Python
# module in a directory on that path below the workdir (the test helpers, and the visible test
# modules that read hidden data), root's and not writable by the tests, so code under test
# cannot rewrite what the tests import after it.
if [ "$UID_WALL" = 1 ]; then
  helpers=()
  for i in "${!hidden[@]}"; do
    mode=${hidden[$i]%% *} rel=${hidden[$i]#* }
    if [ "$mode" = del ] || [[ $rel == /* ]]; then continue; fi
    target=$WORKDIR/$rel
    if [ ! -e "$target" ] && [ ! -L "$target" ]; then continue; fi
    chown -h 0:0 -- "$target"
    d=$target
    while [ "$d" != "$WORKDIR" ]; do
      d=${d%/*}
      helpers+=("$d/__init__.py" "$d/conftest.py")
      if [ "$d" != "$WORKDIR" ]; then for f in "$d"/*.py; do helpers+=("$f"); done; fi
      if [ -d "$d" ] && [ ! -L "$d" ] && [ "$(stat -c %u -- "$d")" = 1000 ]; then
        chown 0:0 -- "$d"
        chmod 1777 -- "$d"
      fi
    done
  done
  declare -A seen=()
  files=() links=()
  for f in ${helpers[@]+"${helpers[@]}"}; do  # each once, then one chown (and chmod) for all
    if [ -n "${seen[$f]:-}" ]; then continue; fi
    seen[$f]=1
    if [ -L "$f" ]; then links+=("$f"); elif [ -f "$f" ]; then files+=("$f"); fi
  done
  if [ ${#links[@]} != 0 ]; then chown -h 0:0 -- "${links[@]}"; fi
  if [ ${#files[@]} != 0 ]; then chown 0:0 -- "${files[@]}"; chmod go-w -- "${files[@]}"; fi
fi

# The scan's files, as they will run (staging.scanned): regular files, not symlinks, read as
# root now that everything is staged and before any test runs. The C locale from here, so that
# ${#rel} counts the path's bytes.
LC_ALL=C
while IFS= read -r -d '' rel; do
  path=$WORKDIR/$rel
  if [ -z "$rel" ] || [ -L "$path" ] || [ ! -f "$path" ]; then continue; fi
  size=$(wc -c < "$path") || continue
  printf '\n%s scan %s %s\n%s' "$NONCE" "$((size))" "${#rel}" "$rel"
  cat -- "$path" || exit 0  # a short last record is dropped (staging.scanned): read from the workspace then
done < "$DIR/scan"
