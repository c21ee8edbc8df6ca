#!/usr/bin/env bash
# Runs before the server in every postgres instance of a replicated Database. The
# topology ConfigMap names the primary; every other instance starts as its standby:
# an empty volume is cloned from the primary, and data that followed another primary
# (or was one) is rewound onto the current primary's history first. So an old primary
# that comes back never takes writes: it starts as a standby. Data the controller marked
# (it lacks log the primary no longer keeps) is cloned anew.
set -Eeuo pipefail
log() { printf '%s [replication] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }

# From postgres 18 the data directory's parent is a folder on the volume of its own
# (`18/`), absent until the server's first start makes it.
mkdir -p "$(dirname "$PGDATA")"
passfile="$(dirname "$PGDATA")/replication.pgpass"
reseed="$(dirname "$PGDATA")/reseed"
printf '*:*:*:replicator:%s\n' "$DATABASE_REPLICATION_PASSWORD" >"$passfile"
chmod 0600 "$passfile"

# Wait for the primary, reading the topology again each time: a failover may name
# another one meanwhile.
while :; do
	primary="$(cat /etc/database/topology/primary)"
	if [ "$primary" = "$POD_NAME" ]; then
		# A primary's data is the Database's: it is never cloned over.
		rm -f "$reseed"
		if [ -e "$PGDATA/standby.signal" ]; then
			log "this instance is the primary; it leaves recovery when it starts"
			rm -f "$PGDATA/standby.signal"
		fi
		exit 0
	fi
	host="$primary.$SERVICE_NAME"
	if pg_isready -q -h "$host" -p 5432; then
		break
	fi
	log "waiting for the primary $primary"
	sleep 2
done
follow="host=$host port=5432 user=replicator passfile=$passfile application_name=$POD_NAME"

clone() {
	log "cloning the primary $primary"
	rm -rf "$PGDATA"
	pg_basebackup -d "$follow" -D "$PGDATA" -X stream -c fast
	chmod 0700 "$PGDATA"
}

if [ -e "$reseed" ]; then
	log "this instance lacks log the primary no longer keeps; cloning it anew"
	clone
	rm -f "$reseed"
elif [ ! -s "$PGDATA/PG_VERSION" ]; then
	clone
elif ! PGPASSWORD="$POSTGRES_PASSWORD" pg_rewind -D "$PGDATA" \
	--source-server="host=$host port=5432 user=$POSTGRES_USER dbname=postgres" 2>&1; then
	log "this instance's history cannot be rewound onto the primary's; cloning it anew"
	clone
fi

# Follow the current primary: standby mode, and its address (the log is fetched with
# the replication user's password from the passfile, never on a command line).
touch "$PGDATA/standby.signal"
sed -i '/^primary_conninfo/d' "$PGDATA/postgresql.auto.conf"
printf "primary_conninfo = '%s'\n" "$follow" >>"$PGDATA/postgresql.auto.conf"
log "following the primary $primary"
