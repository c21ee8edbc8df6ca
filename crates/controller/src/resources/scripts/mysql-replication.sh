#!/usr/bin/env bash
# Runs before the server in every mysql instance of a replicated Database and writes
# its replication settings: its own server id, a GTID binary log, the clone and
# semi-synchronous plugins, and read-only unless the topology ConfigMap names it the
# primary. So an old primary that comes back never takes writes; the operator makes
# it a replica of the named primary (cloning it anew if its history has diverged).
set -Eeuo pipefail
log() { printf '%s [replication] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }

ordinal="${POD_NAME##*-}"
primary="$(cat /etc/database/topology/primary)"
read_only=ON
super_read_only=OFF
if [ "$primary" = "$POD_NAME" ]; then
	read_only=OFF
	log "this instance is the primary; it starts writable"
else
	log "the primary is $primary; this instance starts read-only"
	# Even root may not write, once the image's first-start initialisation (which
	# writes as root) is behind it.
	if [ -d /var/lib/mysql/data/mysql ] || [ -d /var/lib/mysql/mysql ]; then
		super_read_only=ON
	fi
fi
cat >/etc/mysql/conf.d/replication.cnf <<CNF
[mysqld]
server-id=$((ordinal + 1))
gtid-mode=ON
enforce-gtid-consistency=ON
report-host=$POD_NAME.$SERVICE_NAME
read-only=$read_only
super-read-only=$super_read_only
plugin-load-add=mysql_clone.so
plugin-load-add=semisync_source.so
plugin-load-add=semisync_replica.so
# loose-: the first start's --initialize loads no plugin and would refuse these.
loose-rpl-semi-sync-replica-enabled=ON
# In sync mode a commit waits for a replica however long it takes, never falling
# back to asynchronous replication.
loose-rpl-semi-sync-source-timeout=4294967295
CNF
