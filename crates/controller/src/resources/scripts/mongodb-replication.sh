#!/usr/bin/env bash
# Runs before mongod in every instance of a replicated mongodb Database: writes the
# replica set's key where mongod reads it (--keyFile), readable by its owner only, as
# mongod demands. Members authenticate each other with it. Roles are the replica set's
# own business: elections decide the primary, and the operator only follows. A member
# whose data the controller marked (it is too stale to catch up: the primary's oplog no
# longer holds the entries it lacks) starts empty, and copies the set anew.
set -Eeuo pipefail
log() { printf '%s [replication] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }
umask 077
keyfile=/etc/mongodb-keyfile/keyfile
printf '%s' "$DATABASE_REPLICA_SET_KEY" >"$keyfile.new"
chmod 400 "$keyfile.new"
mv -f "$keyfile.new" "$keyfile"

# The volume is mongod's dbPath; the mark is the controller's.
data=/data/db
if [ -e "$data/reseed" ]; then
	if [ "$(cat /etc/database/topology/primary)" = "$POD_NAME" ]; then
		# The named primary's data is the Database's: it is never emptied.
		rm -f "$data/reseed"
	else
		log "this member lacks oplog entries the primary no longer keeps; its data is emptied for a copy of the set"
		find "$data" -mindepth 1 -maxdepth 1 ! -name lost+found -exec rm -rf {} +
	fi
fi
log "the replica-set key is in place; the primary is elected"
