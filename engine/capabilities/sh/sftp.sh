# shellcheck shell=sh
# The ssh capability's file operations (engine/capabilities/ssh_files.py, WorkspaceSFTP), one per
# run, as the session's user in its cwd:
#   /bin/sh -c SCRIPT crucible-sftp OPERATION ARGS...
# Prints what the operation returns on stdout; on failure, the reason as stderr's last line
# (the server maps "No such file", "Permission denied", "File exists" to SFTP statuses).
# FORMAT is the `stat --printf` format of one record (NUL-terminated).
op=$1
shift
case $op in
realpath) exec realpath -m -- "$1" ;;
stat) exec stat -L --printf "$2" -- "$1" ;;
lstat) exec stat --printf "$2" -- "$1" ;;
list)  # DIR FORMAT: the directory, its parent, then every entry
  [ -d "$1" ] || { echo "$1: Not a directory" >&2; exit 1; }
  stat -L --printf "$2" -- "$1" "$1/.." && exec find -H "$1" -mindepth 1 -maxdepth 1 -exec stat --printf "$2" -- {} + ;;
readlink) exec readlink -- "$1" ;;
open)  # PATH FLAGS MODE: c create, t truncate, x exclusive, w for writing, r print the content;
  # MODE ("-": the umask's) for a file it creates
  p=$1
  new=
  [ -e "$p" ] || [ -L "$p" ] || new=1
  case $2 in
  *x*) set -C; : > "$p" || exit 1 ;;
  *t*) : > "$p" || exit 1 ;;
  *c*) [ -z "$new" ] || : > "$p" || exit 1 ;;
  esac
  if [ -n "$new" ] && [ -e "$p" ] && [ "$3" != - ]; then chmod "$3" -- "$p" || exit 1; fi
  [ -e "$p" ] || { echo "$p: No such file or directory" >&2; exit 1; }
  [ ! -d "$p" ] || { echo "$p: Is a directory" >&2; exit 1; }
  case $2 in *w*) [ -w "$p" ] || { echo "$p: Permission denied" >&2; exit 1; } ;; esac
  case $2 in *r*) exec cat -- "$p" ;; esac ;;
save) exec cat > "$1" ;;  # PATH: stdin becomes its content (same inode, same mode)
setstat)  # PATH SIZE MODE OWNER MTIME ATIME, each "-" to leave it be
  p=$1
  if [ "$2" != - ]; then truncate -s "$2" -- "$p" || exit 1; fi
  if [ "$3" != - ]; then chmod "$3" -- "$p" || exit 1; fi
  if [ "$4" != - ]; then chown "$4" -- "$p" || exit 1; fi
  if [ "$5" != - ]; then touch -m -d "@$5" -- "$p" || exit 1; fi
  if [ "$6" != - ]; then touch -a -d "@$6" -- "$p" || exit 1; fi ;;
remove)
  if [ -d "$1" ] && [ ! -L "$1" ]; then echo "$1: Is a directory" >&2; exit 1; fi
  exec rm -- "$1" ;;
mkdir) if [ "$2" = - ]; then exec mkdir -- "$1"; else exec mkdir -m "$2" -- "$1"; fi ;;
rmdir) exec rmdir -- "$1" ;;
rename)  # OLD NEW: SFTP's rename never replaces
  if [ -e "$2" ] || [ -L "$2" ]; then echo "$2: File exists" >&2; exit 1; fi
  exec mv -T -- "$1" "$2" ;;
posix-rename) exec mv -T -f -- "$1" "$2" ;;
symlink) exec ln -s -- "$1" "$2" ;;
link) exec ln -- "$1" "$2" ;;
*) echo "unknown operation $op" >&2; exit 2 ;;
esac
