# shellcheck shell=sh
# The ssh capability's session wrapper (engine/capabilities/ssh_server.py), run as the session's
# user, on a terminal or over pipes:
#   /bin/sh -c SCRIPT crucible-ssh STATUS_FILE COMMAND...
# Runs COMMAND as its child and, when a signal killed it, writes the signal's number to
# STATUS_FILE (a new file with an unguessable name) and exits 128+N as a shell would: that is
# how the server tells "killed by SIGTERM" (an SSH exit-signal) from a plain `exit 143`, which
# Docker's exit code cannot. The wrapper ignores the signals a session gets (^C, hangup) so it
# outlives its child to say so. The child gets every one of them back at its default, as sshd
# gives a session's command, whatever the process that started the session ignored (a signal
# ignored at exec stays ignored). Without perl in the image it just runs COMMAND (no signals).
status=$1
shift
command -v perl >/dev/null 2>&1 || exec "$@"
exec perl -e '
use POSIX ();
my $status = shift @ARGV;
my $pid = fork;
exec { $ARGV[0] } @ARGV if !defined $pid;
if ($pid == 0) { $SIG{$_} = "DEFAULT" for qw(INT QUIT TERM HUP PIPE); exec { $ARGV[0] } @ARGV or exit 127; }
$SIG{$_} = "IGNORE" for qw(INT QUIT TERM HUP PIPE);
waitpid($pid, 0) == $pid or exit 255;
my $sig = $? & 127;
exit($? >> 8) if !$sig;
if (sysopen(my $fh, $status, POSIX::O_WRONLY | POSIX::O_CREAT | POSIX::O_EXCL, 0600)) { print $fh "$sig\n"; close $fh; }
exit(128 + $sig);
' "$status" "$@"
