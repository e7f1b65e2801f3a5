#!/bin/sh
# The development PostgreSQL of the local node (Debian's postgresql-15), with
# the official image's contract: POSTGRES_PASSWORD (required), POSTGRES_USER
# (default postgres), POSTGRES_DB (default: the user) and PGDATA. Runs as the
# image's uid 70 on a writable PGDATA; the root filesystem may be read-only.
set -eu
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA" && chmod 0700 "$PGDATA"
  password_file=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$password_file"
  initdb --username="$user" --pwfile="$password_file" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --no-instructions -D "$PGDATA"
  rm -f "$password_file"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$database" != postgres ]; then
    echo "CREATE DATABASE \"$database\";" | postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
