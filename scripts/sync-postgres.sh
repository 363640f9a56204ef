#!/usr/bin/env bash
# A private PostgreSQL for the sync demo, tests and benchmark (docs/sync.md):
#   scripts/sync-postgres.sh start DIR [postgres -c options…]   initdb in DIR/data, start on a free
#                                                                loopback port, create database
#                                                                'ledger' (user 'ledger'); prints the port
#   scripts/sync-postgres.sh stop DIR
#   scripts/sync-postgres.sh restart DIR [options…]                 the stopped cluster again, same port
# Run as root, the cluster runs as the unprivileged user 'nobody' (PostgreSQL refuses root).
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
shift 2
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -x "$PGBIN/initdb" ] || { echo "sync-postgres: PostgreSQL not found (apt-get install postgresql)" >&2; exit 3; }
as_db_user() { if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi }

case $cmd in
start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown nobody "$dir"
    as_db_user test -w "$dir" || { echo "sync-postgres: $dir is not writable by the database user (are its parents o+x?)" >&2; exit 3; }
    as_db_user "$PGBIN/initdb" -D "$dir/data" -U ledger -A trust --no-sync >"$dir/initdb.log" 2>&1
    extra=()
    for option in "$@"; do extra+=("-c" "$option"); done
    for attempt in 1 2 3 4 5 6 7 8; do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        if as_db_user "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 ${extra[*]:-}" start >/dev/null 2>&1; then
            as_db_user "$PGBIN/createdb" -h 127.0.0.1 -p "$port" -U ledger ledger
            echo "$port" >"$dir/port"
            echo "$port"
            exit 0
        fi
    done
    echo "sync-postgres: could not start PostgreSQL; see $dir/postgres.log" >&2
    exit 1
    ;;
stop)
    [ -d "$dir/data" ] && as_db_user "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
restart)
    # After `stop`: the same cluster on the same port (an outage ends).
    port=$(cat "$dir/port")
    extra=()
    for option in "$@"; do extra+=("-c" "$option"); done
    as_db_user "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 ${extra[*]:-}" start >/dev/null
    echo "$port"
    ;;
*)
    echo "usage: $0 start|stop|restart DIR" >&2
    exit 2
    ;;
esac
