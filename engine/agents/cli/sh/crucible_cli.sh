# shellcheck shell=sh
# Runs a coding CLI inside a workspace that has no network (engine/agents/cli/__init__.py,
# CliAgent._execute), as the agent's uid in the repo directory:
#   sh -c SCRIPT crucible-cli MODEL_PORT MCP_PORT CLI [ARGS...]
# Headless, the CLI's stdin is closed; with CRUCIBLE_CLI_TTY=1 (the tmux transport) it keeps
# the terminal it was started in.
# The run's host-side endpoints are unix sockets in the bridge (/run/crucible, read-only):
# model.sock (the model proxy, which holds the API key) and mcp.sock (the run's tools). A CLI
# speaks HTTP to a host and port, so each socket gets a relay on the container's own loopback
# (the only interface it has): 127.0.0.1:MODEL_PORT and 127.0.0.1:MCP_PORT. The relays live
# in the CLI's process group, so killing the group (a wall-clock limit) takes them too; on a
# normal exit they are stopped here, so nothing outlives the run.
set -u
[ $# -ge 3 ] || { echo "usage: crucible-cli MODEL_PORT MCP_PORT CLI [ARGS...]" >&2; exit 125; }
model_port=$1
mcp_port=$2
shift 2
bridge=${CRUCIBLE_BRIDGE:-/run/crucible}

relay() {  # relay PORT SOCKET: loopback TCP -> the bridge's unix socket, one child per connection
    socat "TCP-LISTEN:$1,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$2" </dev/null >/dev/null 2>&1 &
}

listening() {  # listening PORT: whether 127.0.0.1:PORT is bound (state 0A), without connecting to it
    grep -q "$(printf ' 0100007F:%04X 00000000:0000 0A' "$1")" /proc/net/tcp
}

relay "$model_port" "$bridge/model.sock"
model_relay=$!
relay "$mcp_port" "$bridge/mcp.sock"
mcp_relay=$!
trap 'kill "$model_relay" "$mcp_relay" 2>/dev/null' EXIT
trap 'exit 143' TERM INT

tries=0
until listening "$model_port" && listening "$mcp_port"; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ]; then
        echo "crucible-cli: the relays did not start (is socat installed?)" >&2
        exit 125
    fi
    sleep 0.05
done

if [ "${CRUCIBLE_CLI_TTY:-}" = 1 ]; then
    "$@"
else
    "$@" </dev/null
fi
