#!/bin/sh
# shellcheck shell=sh
# Installs a coding CLI's native binary from its npm registry package, pinned, at image build
# time: conf/agent/claude_code.yaml and codex.yaml copy it into the agent's layer and run it
# as the layer's install step (engine/build/layer.py: as root, with the build's network):
#   npm_install.sh TARBALL_URL SHA512_HEX MEMBER DEST
# The tarball is checked against SHA512_HEX (the registry's own integrity, in hex) before
# anything of it is used; MEMBER (e.g. package/claude) is extracted to DEST, executable. Only
# the binary enters the image: no Node, no npm.
set -eu
[ $# -eq 4 ] || { echo "usage: npm_install.sh TARBALL_URL SHA512_HEX MEMBER DEST" >&2; exit 2; }
url=$1
want=$2
member=$3
dest=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -s /etc/crucible/ca.pem ]; then
    set -- --cacert /etc/crucible/ca.pem
else
    set --
fi
curl -fsSL --retry 3 "$@" -o "$work/package.tgz" "$url"
got=$(sha512sum "$work/package.tgz" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
    echo "npm_install.sh: $url has sha512 $got, not the pinned $want" >&2
    exit 1
fi
tar -xzf "$work/package.tgz" -C "$work" "$member"
mkdir -p "$(dirname "$dest")"
install -m 0755 "$work/$member" "$dest"
