# The bridge relay's far side (engine/runtimes/docker/relay.py), run by perl-base in a sidecar
# that shares the bridge volume with the workspace. It listens on the unix sockets the host
# names, accepts clients and carries every connection over its own stdin/stdout (one docker
# exec stream) as frames: type (1 byte), connection id (4, big-endian), length (4), payload.
#   host -> here: L listen NAME, U unlisten NAME, F file (mode(4) namelen(2) NAME DATA),
#                 R remove NAME, D data, E eof (half-close), C close, S sync (echoed as Y)
#   here -> host: O open (payload NAME), D data, E eof, C close, Y synced
#   both ways:    A acknowledged (count(4)): that many D bytes written to the far socket; a
#                 connection has at most $WINDOW unacknowledged bytes in flight each way.
use strict;
use warnings;
use IO::Socket::UNIX;
use IO::Select;
use Socket qw(SOCK_STREAM);
use POSIX qw(EAGAIN EWOULDBLOCK);

my $dir = shift @ARGV or die "usage: relay.pl DIR\n";
$SIG{PIPE} = 'IGNORE';
binmode STDIN;
binmode STDOUT;
STDIN->blocking(0);

my $CHUNK = 65536;
my $WINDOW = 1 << 20;
my (%listener, %conn, %by_fileno);    # name -> socket; id -> state; fileno -> [kind, key]
my $next_id = 1;
my $inbuf = '';

sub out {    # blocking write of one frame: the host reads the stream continuously
    my ($type, $id, $payload) = @_;
    my $frame = pack('a1 N N', $type, $id, length $payload) . $payload;
    while (length $frame) {
        my $n = syswrite(STDOUT, $frame);
        if (!defined $n) { next if $! == EAGAIN || $!{EINTR}; exit 0 }
        substr($frame, 0, $n, '');
    }
}

sub valid { my ($n) = @_; return $n =~ /\A[A-Za-z0-9_][A-Za-z0-9._-]{0,99}\z/ }

sub listen_on {
    my ($name) = @_;
    return if !valid($name) || $listener{$name};
    my $tmp = "$dir/.$name.$$";
    unlink $tmp;
    my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $tmp, Listen => 128)
        or do { warn "listen $name: $!\n"; return };
    # Open to every uid, as the host's sockets are; renamed into place already so.
    chmod 0666, $tmp;
    rename $tmp, "$dir/$name" or do { warn "rename $name: $!\n"; close $s; unlink $tmp; return };
    $s->blocking(0);
    $listener{$name} = $s;
    $by_fileno{fileno $s} = ['L', $name];
}

sub unlisten {
    my ($name) = @_;
    my $s = delete $listener{$name} or return;
    delete $by_fileno{fileno $s};
    close $s;
    unlink "$dir/$name";
}

sub put_file {
    my ($payload) = @_;
    my ($mode, $len) = unpack('N n', $payload);
    my $name = substr($payload, 6, $len);
    return if !valid($name);
    my $tmp = "$dir/.$name.$$";
    open(my $fh, '>:raw', $tmp) or do { warn "write $name: $!\n"; return };
    print $fh substr($payload, 6 + $len);
    close $fh;
    chmod $mode & 07777, $tmp;
    rename $tmp, "$dir/$name" or warn "rename $name: $!\n";
}

sub drop {    # forget a connection; tell the host unless it was the one that closed it
    my ($id, $tell) = @_;
    my $c = delete $conn{$id} or return;
    delete $by_fileno{fileno $c->{fh}};
    close $c->{fh};
    out('C', $id, '') if $tell;
}

sub flush_conn {    # as much of the pending output as the client takes now
    my ($id) = @_;
    my $c = $conn{$id} or return;
    my $wrote = 0;
    while (length $c->{out}) {
        my $n = syswrite($c->{fh}, $c->{out}, $CHUNK);
        if (!defined $n) { last if $! == EAGAIN || $! == EWOULDBLOCK; drop($id, 1); return }
        substr($c->{out}, 0, $n, '');
        $wrote += $n;
    }
    out('A', $id, pack('N', $wrote)) if $wrote;
    return if length $c->{out};
    if ($c->{host_eof} && !$c->{shut}) { shutdown($c->{fh}, 1); $c->{shut} = 1 }
    drop($id, 0) if $c->{shut} && $c->{client_eof};
}

sub from_host {
    my ($type, $id, $payload) = @_;
    if    ($type eq 'L') { listen_on($payload) }
    elsif ($type eq 'U') { unlisten($payload) }
    elsif ($type eq 'F') { put_file($payload) }
    elsif ($type eq 'R') { unlink "$dir/$payload" if valid($payload) }
    elsif ($type eq 'S') { out('Y', $id, $payload) }
    elsif ($type eq 'C') { drop($id, 0) }
    elsif (my $c = $conn{$id}) {
        if    ($type eq 'D') { $c->{out} .= $payload }
        elsif ($type eq 'E') { $c->{host_eof} = 1 }
        elsif ($type eq 'A') { $c->{unacked} -= unpack('N', $payload); return }
        flush_conn($id);
    }
}

sub read_host {
    my $n = sysread(STDIN, $inbuf, $CHUNK, length $inbuf);
    if (!defined $n) { return if $! == EAGAIN || $! == EWOULDBLOCK || $!{EINTR}; exit 0 }
    exit 0 if $n == 0;    # the host went away: so does the relay
    while (length $inbuf >= 9) {
        my ($type, $id, $len) = unpack('a1 N N', $inbuf);
        last if length $inbuf < 9 + $len;
        my $payload = substr($inbuf, 9, $len);
        substr($inbuf, 0, 9 + $len, '');
        from_host($type, $id, $payload);
    }
}

sub accept_on {
    my ($name) = @_;
    my $client = $listener{$name}->accept or return;
    $client->blocking(0);
    my $id = $next_id++;
    $conn{$id} = { fh => $client, out => '', host_eof => 0, client_eof => 0, shut => 0, unacked => 0 };
    $by_fileno{fileno $client} = ['C', $id];
    out('O', $id, $name);
}

sub read_client {
    my ($id) = @_;
    my $c = $conn{$id};
    my $n = sysread($c->{fh}, my $data, $CHUNK);
    if (!defined $n) { return if $! == EAGAIN || $! == EWOULDBLOCK; drop($id, 1); return }
    if ($n == 0) {
        out('E', $id, '');
        $c->{client_eof} = 1;
        drop($id, 0) if $c->{shut};
        return;
    }
    $c->{unacked} += $n;
    out('D', $id, $data);
}

while (1) {
    # Clients are read only while the host has room for more of theirs (its A frames).
    my $readers = IO::Select->new(\*STDIN, values %listener,
        map { $_->{fh} } grep { !$_->{client_eof} && $_->{unacked} < $WINDOW } values %conn);
    my $writers = IO::Select->new(map { $_->{fh} } grep { length $_->{out} } values %conn);
    my ($readable, $writable) = IO::Select->select($readers, $writers, undef);
    for my $fh (@{ $writable || [] }) {
        my $what = $by_fileno{fileno $fh} or next;
        flush_conn($what->[1]);
    }
    for my $fh (@{ $readable || [] }) {
        if (fileno($fh) == fileno(STDIN)) { read_host(); next }
        my $what = $by_fileno{fileno $fh} or next;
        if ($what->[0] eq 'L') { accept_on($what->[1]) }
        elsif ($conn{ $what->[1] }) { read_client($what->[1]) }
    }
}
