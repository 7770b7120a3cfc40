#!/bin/bash
# Entrypoint of the standby in deploy/compose-postgres.yaml. On an empty volume it copies the
# primary with pg_basebackup; --write-recovery-conf leaves standby.signal and a
# primary_conninfo (with application_name=standby, the name the primary's
# synchronous_standby_names waits for), so the server starts as a streaming hot standby.
# Then it hands over to the postgres image's own entrypoint with the given command.
# Environment (postgres.env): REPLICATION_PASSWORD.
set -e

: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD in postgres.env}"
: "${PGDATA:?PGDATA is not set}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -q -h primary -p 5432; do
    echo "standby: waiting for the primary"
    sleep 1
  done
  # pg_basebackup wants an empty or missing directory; the server wants mode 0700.
  rm -rf "$PGDATA"
  install -d -o postgres -g postgres -m 0700 "$PGDATA"
  PGPASSWORD="$REPLICATION_PASSWORD" gosu postgres pg_basebackup \
    --pgdata="$PGDATA" \
    --dbname="host=primary port=5432 user=replicator application_name=standby" \
    --write-recovery-conf --wal-method=stream --checkpoint=fast
  # The copy carries the primary's synchronous_standby_names. Cleared, so that after a
  # promotion this server does not wait for a standby that does not exist; it then runs
  # without a synchronous standby until another one is attached and named with
  # ALTER SYSTEM SET synchronous_standby_names.
  echo "synchronous_standby_names = ''" >> "$PGDATA/postgresql.auto.conf"
fi

exec docker-entrypoint.sh "$@"
