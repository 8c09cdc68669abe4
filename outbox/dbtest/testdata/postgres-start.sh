#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 server for the outbox tests, installing
# Debian's postgresql-15 first when it is missing, and prints the exports
# to eval:
#
#	eval "$(outbox/dbtest/testdata/postgres-start.sh)"
#	(cd outbox/dbtest && go test -race ./...)
#	outbox/dbtest/testdata/postgres-stop.sh
#
# The server runs as user postgres with trust authentication and fsync=off
# (the tests kill relays, never the server; QUEEN_OUTBOX_PG_FSYNC=on for
# benchmarks), listens on
# 127.0.0.1 only, on a free port, with its data in a temporary directory
# that postgres-stop.sh removes. It fails (non-zero, with the reason on
# stderr) when the server cannot be started.
set -euo pipefail
bin=/usr/lib/postgresql/15/bin
if [ ! -x "$bin/initdb" ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo -n"; fi
  ($SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15) >&2
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
st=$(mktemp -d "${TMPDIR:-/tmp}/queen-outbox-pg.XXXXXX")
chmod 755 "$st"
mkdir -p "$st/pg"
run() { # runs a command as postgres (as we are, when we are not root)
  if [ "$(id -u)" = 0 ]; then chown postgres "$st/pg"; su postgres -c "$*"; else "$@"; fi
}
run "$bin/initdb -D $st/pg -U postgres --auth=trust" >"$st/initdb.log" 2>&1 || { cat "$st/initdb.log" >&2; exit 1; }
cat >>"$st/pg/postgresql.conf" <<CONF
listen_addresses='127.0.0.1'
port=$port
max_connections=200
unix_socket_directories='$st/pg'
fsync=${QUEEN_OUTBOX_PG_FSYNC:-off}
CONF
run "$bin/pg_ctl -D $st/pg -l $st/pg/pg.log -w start" >&2 || { tail -20 "$st/pg/pg.log" >&2; exit 1; }
echo "export QUEEN_OUTBOX_PG='postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable' QUEEN_OUTBOX_PG_STATE='$st'"
