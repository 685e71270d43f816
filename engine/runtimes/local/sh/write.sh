# shellcheck shell=sh
# LocalWorkspace.write_file (engine/runtimes/local/runtime.py), as root in the sandbox:
#   /bin/sh -c SCRIPT crucible-write PATH MODE UID     (stdin: the file's bytes)
# Replaces PATH atomically: writes a temp file beside it, then renames over it (a symlink
# at PATH is replaced, never followed). Parents come from mkdir -p as root, mode 755.
# Exits 21 when PATH is a directory.

set -e
umask 022
if [ -d "$1" ]; then exit 21; fi
dir=$(dirname -- "$1")
mkdir -p -- "$dir"
tmp=$(mktemp -- "$dir/.crucible-write.XXXXXXXX")
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp"
chown -- "$3:$3" "$tmp"
chmod -- "$2" "$tmp"
mv -f -- "$tmp" "$1"
