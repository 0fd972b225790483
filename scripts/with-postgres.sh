#!/usr/bin/env bash
# Run a command with a throw-away PostgreSQL server on 127.0.0.1.
#
#   bash scripts/with-postgres.sh CMD [ARGS...]
#
# Finds the PostgreSQL server binaries (installing the OS package `postgresql`
# with apt-get when they are missing and we are root), initialises a cluster in
# a fresh temporary directory, starts it on a free port of 127.0.0.1, exports
#
#   CONTEXT_PIPELINE_PG_URL=postgresql://postgres@127.0.0.1:PORT/postgres
#
# runs CMD, then stops the server and deletes the directory whatever happens,
# and exits with CMD's exit code. Every run gets its own cluster, so runs never
# share state and the script can be run again (or concurrently) at any time.
#
# When PostgreSQL cannot be made available, it warns loudly and runs CMD without
# it: the tests marked `postgres` then skip, or fail when CI or
# CONTEXT_PIPELINE_REQUIRE_PG=1 is set. When CONTEXT_PIPELINE_PG_URL is already
# set, that server is used as is and nothing is started.
#
# PG_BINDIR=/path/to/bin selects the server binaries explicitly.
set -uo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: bash scripts/with-postgres.sh CMD [ARGS...]" >&2
    exit 2
fi

log() { echo "with-postgres: $*" >&2; }

warn() {
    {
        echo
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        echo "!! with-postgres: $*"
        echo "!! Running WITHOUT PostgreSQL: tests marked 'postgres' will be SKIPPED"
        echo "!! (or FAIL when CI or CONTEXT_PIPELINE_REQUIRE_PG=1 is set)."
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        echo
    } >&2
}

# without_postgres MESSAGE CMD...: warn, then run CMD in place of this script.
without_postgres() {
    warn "$1"
    shift
    unset CONTEXT_PIPELINE_PG_URL
    exec "$@"
}

if [ -n "${CONTEXT_PIPELINE_PG_URL:-}" ]; then
    log "CONTEXT_PIPELINE_PG_URL is already set; using that server"
    exec "$@"
fi

# -- the server binaries ----------------------------------------------------------------

find_bindir() {
    if [ -n "${PG_BINDIR:-}" ]; then
        [ -x "$PG_BINDIR/pg_ctl" ] && [ -x "$PG_BINDIR/initdb" ] && echo "$PG_BINDIR"
        return
    fi
    local dir best=""
    # Debian/Ubuntu layout; the highest version wins.
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
        if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
            best="$dir"
        fi
    done
    if [ -z "$best" ] && command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        best="$(dirname "$(command -v pg_ctl)")"
    fi
    [ -n "$best" ] && echo "$best"
}

BINDIR="$(find_bindir)"
if [ -z "$BINDIR" ] && [ -n "${PG_BINDIR:-}" ]; then
    without_postgres "PG_BINDIR=$PG_BINDIR holds no pg_ctl and initdb" "$@"
fi
if [ -z "$BINDIR" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        without_postgres "PostgreSQL server binaries not found, and not root: cannot apt-get install postgresql" "$@"
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        without_postgres "PostgreSQL server binaries not found and apt-get is not available" "$@"
    fi
    log "PostgreSQL server binaries not found: installing the OS package 'postgresql'"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq >&2 &&
        apt-get install -y -qq --no-install-recommends postgresql >&2; }; then
        without_postgres "apt-get install postgresql failed" "$@"
    fi
    BINDIR="$(find_bindir)"
    if [ -z "$BINDIR" ]; then
        without_postgres "postgresql was installed but pg_ctl/initdb are still not found" "$@"
    fi
fi

# -- who runs the server: initdb and postgres refuse to run as root ---------------------

as_pg() { "$@"; }
PG_OWNER=""
if [ "$(id -u)" -eq 0 ]; then
    if id postgres >/dev/null 2>&1; then
        PG_OWNER=postgres
    else
        PG_OWNER=nobody
    fi
    if command -v runuser >/dev/null 2>&1; then
        as_pg() { runuser -u "$PG_OWNER" -- "$@"; }
    else
        as_pg() { su -s /bin/sh "$PG_OWNER" -c "$(printf '%q ' "$@")"; }
    fi
fi

# -- a throw-away cluster ---------------------------------------------------------------

PGTMP="$(mktemp -d "${TMPDIR:-/tmp}/context-pipeline-pg.XXXXXX")" || {
    without_postgres "cannot create a temporary directory" "$@"
}
DATA="$PGTMP/data"
STARTED=""

cleanup() {
    if [ -n "$STARTED" ]; then
        as_pg "$BINDIR/pg_ctl" -D "$DATA" -m immediate -w -t 30 stop >/dev/null 2>&1 ||
            log "pg_ctl stop failed; see $PGTMP/server.log"
    fi
    rm -rf "$PGTMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

chmod 700 "$PGTMP"
[ -n "$PG_OWNER" ] && chown "$PG_OWNER" "$PGTMP"

if ! as_pg "$BINDIR/initdb" -D "$DATA" -U postgres -A trust -E UTF8 --locale=C --no-sync \
    >"$PGTMP/initdb.log" 2>&1; then
    cat "$PGTMP/initdb.log" >&2
    trap - EXIT INT TERM HUP
    cleanup
    without_postgres "initdb failed (log above)" "$@"
fi

PYTHON_FOR_PORT=""
for candidate in "${PYTHON:-}" python3 python .venv/bin/python; do
    if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1; then
        PYTHON_FOR_PORT="$candidate"
        break
    fi
done

free_port() {
    if [ -z "$PYTHON_FOR_PORT" ]; then
        echo $((20000 + RANDOM % 30000))
        return
    fi
    "$PYTHON_FOR_PORT" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

PORT=""
for _ in 1 2 3; do
    PORT="$(free_port)" || break
    # -w waits until the server accepts connections; the port may have been
    # taken between choosing and binding it, so try again with another one.
    if as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$PGTMP/server.log" -w -t 60 -s \
        -o "-h 127.0.0.1 -p $PORT -k $PGTMP -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        start; then
        STARTED=1
        break
    fi
done
if [ -z "$STARTED" ]; then
    cat "$PGTMP/server.log" >&2 2>/dev/null
    trap - EXIT INT TERM HUP
    cleanup
    without_postgres "the PostgreSQL server did not start (log above)" "$@"
fi

export CONTEXT_PIPELINE_PG_URL="postgresql://postgres@127.0.0.1:$PORT/postgres"
log "PostgreSQL $("$BINDIR/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT (data in $PGTMP)"

# CMD runs in the foreground: Ctrl-C reaches it (and this script, whose trap then
# stops the server once CMD has finished). A TERM or HUP sent to this script alone
# is handled when CMD finishes, so CMD never loses its server while it runs.
"$@"
exit $?
