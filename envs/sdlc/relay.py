#!/usr/bin/env python3
"""The agent repo's ``origin`` transport: ``ext::python3 /run/crucible/git-relay.py %S``.

Runs INSIDE the workspace (stdlib only, no network needed): sends the service git asks for
(``git-upload-pack`` / ``git-receive-pack``) and its protocol version to the host's socket
in the bridge, then relays git's stdio both ways. The host decides everything else (which
repository, which services, which refs may change); this script holds no state.
"""

import os
import socket
import sys
import threading

SOCKET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "git.sock")


def pump_in(sock: socket.socket) -> None:
    """git's requests -> host; EOF from git half-closes the socket so the host sees it."""
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        sock.sendall(data)
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def main() -> int:
    service = sys.argv[1] if len(sys.argv) > 1 else ""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(SOCKET)
    except OSError as exc:
        sys.stderr.write(f"fatal: the remote is not reachable ({exc})\n")
        return 128
    header = f"{service}\n{os.environ.get('GIT_PROTOCOL', '')}\n"
    sock.sendall(header.encode())
    threading.Thread(target=pump_in, args=(sock,), daemon=True).start()
    while True:
        data = sock.recv(65536)
        if not data:
            break
        os.write(1, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
