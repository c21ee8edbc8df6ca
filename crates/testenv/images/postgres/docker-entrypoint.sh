#!/usr/bin/env bash
# Entrypoint of the locally built postgres image. It keeps the contract the official
# image documents: POSTGRES_PASSWORD, POSTGRES_USER (default postgres), POSTGRES_DB
# (default the user), POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD, PGDATA; an empty
# data directory is initialised, an existing one is started as it is; scripts in
# /docker-entrypoint-initdb.d run once, at initialisation.
set -Eeuo pipefail

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }

# `docker run image -c key=value` means arguments for postgres.
if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi
if [ "$1" != 'postgres' ]; then
	exec "$@"
fi

# Run as root: make the folders the server needs and drop to the postgres user.
if [ "$(id -u)" = '0' ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 00700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

# From 18 the volume belongs at /var/lib/postgresql; data mounted at the old path would be
# ignored and a new, empty cluster started beside it.
if [ "${PG_MAJOR%%.*}" -ge 18 ] && mountpoint -q /var/lib/postgresql/data 2>/dev/null; then
	log "a volume is mounted at /var/lib/postgresql/data; from postgres 18 the data volume belongs at /var/lib/postgresql (PGDATA is $PGDATA)"
	exit 1
fi

mkdir -p "$PGDATA"
chmod 00700 "$PGDATA" 2>/dev/null || true
# On an emptyDir this fails and does not matter.
chmod 03775 /var/run/postgresql 2>/dev/null || true

if [ -s "$PGDATA/PG_VERSION" ]; then
	log "data directory $PGDATA holds postgres $(cat "$PGDATA/PG_VERSION"); initialisation skipped"
	exec "$@"
fi

: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != 'trust' ]; then
	log "the database is uninitialised and POSTGRES_PASSWORD is not set; set it (or POSTGRES_HOST_AUTH_METHOD=trust, which lets anyone in)"
	exit 1
fi

log "initialising $PGDATA for user $POSTGRES_USER"
# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of arguments.
initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
	${POSTGRES_INITDB_ARGS:-}
printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"

# A temporary server on the unix socket only, for the database and the init scripts.
pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -p 5432" start
export PGPASSWORD="${POSTGRES_PASSWORD:-}"
psql_init=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres)
if [ "$POSTGRES_DB" != 'postgres' ]; then
	"${psql_init[@]}" --set db="$POSTGRES_DB" <<-'SQL'
		CREATE DATABASE :"db";
	SQL
fi
for script in /docker-entrypoint-initdb.d/*; do
	case "$script" in
		*.sh) log "running $script"; . "$script" ;;
		*.sql) log "running $script"; "${psql_init[@]}" --dbname "$POSTGRES_DB" -f "$script" ;;
		*.sql.gz) log "running $script"; gunzip -c "$script" | "${psql_init[@]}" --dbname "$POSTGRES_DB" ;;
		*) [ -e "$script" ] && log "ignoring $script" ;;
	esac
done
unset PGPASSWORD
pg_ctl -D "$PGDATA" -m fast -w stop
log "initialisation done; starting postgres"
exec "$@"
