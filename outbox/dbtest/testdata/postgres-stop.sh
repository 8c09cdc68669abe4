#!/usr/bin/env bash
# Stops the server postgres-start.sh started (QUEEN_OUTBOX_PG_STATE) and
# removes its data directory.
set -u
: "${QUEEN_OUTBOX_PG_STATE:?run postgres-start.sh first}"
st=$QUEEN_OUTBOX_PG_STATE
if [ "$(id -u)" = 0 ]; then
  su postgres -c "/usr/lib/postgresql/15/bin/pg_ctl -D $st/pg -m fast stop" >/dev/null 2>&1
else
  /usr/lib/postgresql/15/bin/pg_ctl -D "$st/pg" -m fast stop >/dev/null 2>&1
fi
rm -rf "$st"
