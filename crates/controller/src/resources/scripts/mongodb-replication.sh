#!/usr/bin/env bash
# Runs before mongod in every instance of a replicated mongodb Database: writes the
# replica set's key where mongod reads it (--keyFile), readable by its owner only, as
# mongod demands. Members authenticate each other with it. Roles are the replica set's
# own business: elections decide the primary, and the operator only follows.
set -Eeuo pipefail
umask 077
keyfile=/etc/mongodb-keyfile/keyfile
printf '%s' "$DATABASE_REPLICA_SET_KEY" >"$keyfile.new"
chmod 400 "$keyfile.new"
mv -f "$keyfile.new" "$keyfile"
printf '%s [replication] the replica-set key is in place; the primary is elected\n' "$(date -u '+%F %T UTC')" >&2
