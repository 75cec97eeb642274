# Services for CI, sourced by .ci/run (bash, set -euo pipefail there). Each start_* installs what it
# needs from the OS package manager or the project's files, starts the service, exports what the tests
# read, and appends its name to CAUSALCACHE_CI_SERVICES; stop_services (the EXIT trap) stops them all.
# tests/ci_services.py fails the run when a test of a listed service skips under CI=true.

CI_TMP="$(mktemp -d /tmp/causalcache-ci.XXXXXX)"
chmod 755 "$CI_TMP"
export CAUSALCACHE_CI_SERVICES=""
APT_UPDATED=0
PG_BIN=""
PG_DATA="$CI_TMP/pgdata"

_add_service() {
    CAUSALCACHE_CI_SERVICES="${CAUSALCACHE_CI_SERVICES:+$CAUSALCACHE_CI_SERVICES,}$1"
}

_as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi
}

apt_install() {
    # apt_install PACKAGE...: install the missing Debian packages (one apt-get update per run)
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$APT_UPDATED" = 0 ]; then
        _as_root apt-get update -qq
        APT_UPDATED=1
    fi
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

start_postgres() {
    apt_install postgresql
    PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    local user port
    user="$(id -un)"
    [ "$user" = root ] && user=postgres  # initdb refuses to run as root
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    mkdir -p "$PG_DATA"
    chown "$user" "$PG_DATA"
    _pg() { if [ "$(id -un)" = "$user" ]; then "$@"; else _as_root runuser -u "$user" -- "$@"; fi; }
    _pg "$PG_BIN/initdb" -D "$PG_DATA" -U causalcache --auth=trust -E UTF8 >/dev/null
    _pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/server.log" -w \
        -o "-p $port -k $PG_DATA -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
    PG_USER="$user"
    export CAUSALCACHE_POSTGRES_URI="postgresql://causalcache@127.0.0.1:$port/postgres"
    _add_service postgres
}

start_langgraph_server() {
    # the LangGraph server's own environment: langgraph-cli[inmem] pins protobuf/grpcio versions that
    # conflict with the test environment's
    local venv="${CAUSALCACHE_CI_LANGGRAPH_VENV:-.ci-langgraph-venv}"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e ".[langgraph-server]"  # no torch: the example needs none
    export CAUSALCACHE_LANGGRAPH_CLI="$PWD/$venv/bin/langgraph"
    _add_service langgraph-server
}

start_transformers_serve() {
    # `transformers serve` comes with the test extra (transformers[serving]) and its tests start it
    # (tests/services/test_transformers_serve.py); listed here so a missing extra fails CI, not skips
    _add_service transformers-serve
}

start_chromium() {
    apt_install chromium fonts-dejavu-core
    CAUSALCACHE_CHROMIUM="$(command -v chromium)"
    export CAUSALCACHE_CHROMIUM
    _add_service chromium
}

stop_services() {
    if [ -n "$PG_BIN" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
        if [ "$(id -un)" = "$PG_USER" ]; then
            "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null || true
        else
            _as_root runuser -u "$PG_USER" -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null || true
        fi
    fi
    rm -rf "$CI_TMP"
}
