#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests (tests/pg.py starts one per pytest session).
#
#   scripts/pg-test-server.sh start DIR   # initdb (first time) + start; prints the DSN
#   scripts/pg-test-server.sh url DIR     # prints the DSN of the server in DIR
#   scripts/pg-test-server.sh stop DIR    # stops it (the data in DIR is left for the caller to remove)
#
# The server uses the distribution's binaries (initdb/pg_ctl on PATH, else the newest
# /usr/lib/postgresql/*/bin; installed with apt-get when missing and we are root), keeps its data in
# DIR/data, listens only on 127.0.0.1 on a free port (and on a unix socket in DIR), trusts every
# local connection (superuser "postgres", no password) and runs with fsync off: it is for tests only.
# initdb refuses to run as root, so as root the server runs as the "postgres" system user (or a
# dedicated "minicache-pg" user created for it); if that user cannot reach DIR (a parent directory
# is private, as pytest's temporary directories are), the data goes to a private directory under
# /tmp that DIR/rundir points to and `stop` removes.
#
# PG_BINDIR=/path/to/bin picks the PostgreSQL binaries explicitly (and installs nothing).
#
# Exit status: 0 ok, 2 usage, 3 no PostgreSQL binaries (and none can be installed), 1 other errors.
set -euo pipefail

say() { printf '[pg-test-server] %s\n' "$*" >&2; }
die() { say "error: $1"; exit "${2:-1}"; }

usage() { echo "usage: $0 start|stop|url DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
case "$cmd" in start | stop | url) ;; *) usage ;; esac
mkdir -p "$2"
DIR=$(cd "$2" && pwd -P)

# -- binaries --------------------------------------------------------------------------------------
find_bindir() {
    local d
    if [ -n "${PG_BINDIR:-}" ]; then  # an explicit choice: that directory or nothing
        [ -x "$PG_BINDIR/initdb" ] && [ -x "$PG_BINDIR/pg_ctl" ] && [ -x "$PG_BINDIR/postgres" ] &&
            { echo "$PG_BINDIR"; return 0; }
        return 1
    fi
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        d=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
        [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
    fi
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -n -r); do
        [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && { echo "$d"; return 0; }
    done
    return 1
}

BINDIR=$(find_bindir || true)
if [ -z "$BINDIR" ] && [ "$cmd" = start ]; then
    if [ -z "${PG_BINDIR:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "PostgreSQL is not installed: installing it with apt-get (once)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq --no-install-recommends postgresql >&2
        BINDIR=$(find_bindir || true)
    fi
    [ -n "$BINDIR" ] || die "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or under /usr/lib/postgresql/*/bin; install PostgreSQL (e.g. sudo apt-get install postgresql)" 3
fi

# -- who runs the server, and where ------------------------------------------------------------
RUN_USER=""
if [ "$(id -u)" = 0 ]; then
    if id -u postgres >/dev/null 2>&1; then
        RUN_USER=postgres
    else
        id -u minicache-pg >/dev/null 2>&1 ||
            useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin minicache-pg 2>/dev/null ||
            useradd -r -M -d / -s /bin/false minicache-pg
        RUN_USER=minicache-pg
    fi
fi

as_user() {  # run "$@" as the server's user, from a directory that user can read
    # (fd 9, the start lock, must not leak into the server: it would hold the lock forever)
    if [ -z "$RUN_USER" ]; then
        (cd / && "$@") 9>&-
    elif command -v runuser >/dev/null 2>&1; then
        (cd / && runuser -u "$RUN_USER" -- "$@") 9>&-
    else
        (cd / && su -s /bin/bash "$RUN_USER" -c "$(printf '%q ' "$@")") 9>&-
    fi
}

# RUN holds data/, the log, the port file and the unix socket.
rundir() {
    if [ -f "$DIR/rundir" ] && [ -d "$(cat "$DIR/rundir")" ]; then cat "$DIR/rundir"; else echo "$DIR"; fi
}
RUN=$(rundir)

dsn() { echo "postgresql://postgres@127.0.0.1:$(cat "$RUN/port")/postgres"; }

running() {
    [ -n "$BINDIR" ] && [ -f "$RUN/data/PG_VERSION" ] && as_user "$BINDIR/pg_ctl" status -D "$RUN/data" >/dev/null 2>&1
}

free_port() {
    local py
    py=$(command -v python3 || command -v python || true)
    if [ -n "$py" ]; then
        "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
        return
    fi
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 40000))
        (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
    die "no free port found"
}

start() {
    # One `start` at a time per DIR.
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$DIR/.lock"
        flock 9
    fi
    RUN=$(rundir)
    if running; then
        dsn
        return
    fi
    if [ ! -f "$RUN/data/PG_VERSION" ]; then
        if [ -n "$RUN_USER" ]; then
            chown "$RUN_USER" "$DIR"
            if ! as_user test -w "$DIR" -a -x "$DIR"; then
                RUN=$(mktemp -d /tmp/minicache-pg.XXXXXX)
                chown "$RUN_USER" "$RUN"
                echo "$RUN" >"$DIR/rundir"
                say "$RUN_USER cannot reach $DIR; the server's files are in $RUN"
            fi
        fi
        rm -rf "$RUN/data"
        say "initdb ($("$BINDIR/postgres" --version)) in $RUN/data"
        as_user "$BINDIR/initdb" -D "$RUN/data" -U postgres --auth=trust --encoding=UTF8 --locale=C \
            --no-sync >"$RUN/initdb.log" 2>&1 || { cat "$RUN/initdb.log" >&2; die "initdb failed"; }
        local sockets="$RUN"
        if [ ${#RUN} -gt 80 ]; then  # a socket path is limited to ~107 bytes: TCP only, then
            say "$RUN is too long a path for a unix socket; the server listens on TCP only"
            sockets=""
        fi
        cat >>"$RUN/data/postgresql.conf" <<EOF

# pg-test-server.sh: a throwaway server for tests
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sockets'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
log_connections = off
EOF
    fi
    local port tries=0
    while :; do
        port=$(free_port)
        echo "$port" >"$RUN/port"
        [ -z "$RUN_USER" ] || chown "$RUN_USER" "$RUN/port"
        if as_user "$BINDIR/pg_ctl" start -D "$RUN/data" -l "$RUN/postgres.log" -w -t 30 -s -o "-p $port" >&2; then
            break
        fi
        tries=$((tries + 1))
        if [ "$tries" -ge 3 ] || ! grep -q "Address already in use" "$RUN/postgres.log" 2>/dev/null; then
            tail -n 20 "$RUN/postgres.log" >&2 2>/dev/null || true
            die "the PostgreSQL server in $RUN/data did not start (log: $RUN/postgres.log)"
        fi
    done
    dsn
}

stop() {
    if running; then
        as_user "$BINDIR/pg_ctl" stop -D "$RUN/data" -m immediate -w -t 30 -s >&2
    fi
    if [ -f "$DIR/rundir" ]; then
        case "$RUN" in /tmp/minicache-pg.*) rm -rf "$RUN" ;; esac
        rm -f "$DIR/rundir"
    fi
}

case "$cmd" in
    start) start ;;
    stop) stop ;;
    url)
        [ -f "$RUN/port" ] || die "no server in $DIR (run: $0 start $DIR)"
        dsn
        ;;
esac
