# shellcheck shell=bash
# One step of the edit tool (str_replace_based_edit_tool), run by envs/coding/tools.py
# (CodingTools._step) as the tool's user, in one exec (each costs ~0.1 s):
#   bash -c SCRIPT edit ACTION WORKDIR PATH MAX     (stdin: the bytes to write, for write)
# ACTION is read, view or write; MAX the largest file the tool reads whole.
# Resolves the workdir and the path (symlinks included, as the tool's user), refuses a path
# outside the workdir, says what the path is, and only then acts on it. Prints
# "<root>\0<path>\0<kind>\0", then for read/view of a file at most MAX+1 of its bytes, for
# view of a directory its listing; write writes stdin to it.
# shellcheck disable=SC2209  # kind=file is the word, not the command's output

# Both resolved by one realpath (each process ~1 ms of CPU in a container), NUL-separated: one
# that fails prints nothing, so the second read fails.
action=$1
{ IFS= read -r -d '' root && IFS= read -r -d '' p; } < <(realpath -m -z -- "$2" "$3") || exit 1
if [ "$root" != / ] && [ "$p" != "$root" ] && [ "${p#"$root"/}" = "$p" ]; then kind=outside
elif [ -d "$p" ]; then kind=dir
elif [ -f "$p" ]; then kind=file
elif [ -e "$p" ]; then kind=other
else kind=missing
fi
printf '%s\0%s\0%s\0' "$root" "$p" "$kind"
case $action/$kind in
  */outside|write/dir) ;;
  read/file|view/file) head -c "$(($4 + 1))" -- "$p" ;;
  view/dir) find "$p" -maxdepth 2 -not -path "*/.*" | LC_ALL=C sort | head -c "$(($4 + 1))" ;;
  write/*)  # p is absolute and resolved: its parent is all before its last slash
    parent=${p%/*}
    { [ -d "${parent:-/}" ] || mkdir -p -- "${parent:-/}"; } && cat > "$p" ;;
esac
