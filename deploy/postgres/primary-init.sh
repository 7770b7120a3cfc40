#!/bin/bash
# First start of the primary in deploy/compose-postgres.yaml (run by the postgres image's
# entrypoint from /docker-entrypoint-initdb.d, as the postgres user, on an empty volume only):
# the role and database kvconnect uses, a role for streaming replication, and the settings
# that make the standby synchronous from the next start on.
# Environment (postgres.env): KVCONNECT_PG_PASSWORD, REPLICATION_PASSWORD.
set -e

: "${KVCONNECT_PG_PASSWORD:?set KVCONNECT_PG_PASSWORD in postgres.env}"
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD in postgres.env}"

# kvconnect makes and migrates its own tables on first start; it needs a database it owns
# (PostgreSQL 15 lets only the database owner create tables in the public schema).
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v kv_password="$KVCONNECT_PG_PASSWORD" -v repl_password="$REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE kvconnect LOGIN PASSWORD :'kv_password';
CREATE DATABASE kvconnect OWNER kvconnect;
CREATE ROLE replicator REPLICATION LOGIN PASSWORD :'repl_password';
-- Takes effect at the next start (the image restarts the server after these scripts): set
-- now, the writes above would wait for a standby that does not exist yet. 'standby' is the
-- application_name in the standby's primary_conninfo (postgres/standby-entrypoint.sh).
ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby)';
ALTER SYSTEM SET synchronous_commit = 'on';
SQL

# Replication connections from the other containers, with a password. pg_basebackup copies
# this file to the standby too, so it accepts the same connections after a promotion.
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
