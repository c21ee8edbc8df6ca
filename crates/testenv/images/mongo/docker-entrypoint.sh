#!/usr/bin/env bash
# Entrypoint of the locally built mongo image. It keeps the contract the official image
# documents: MONGO_INITDB_ROOT_USERNAME and MONGO_INITDB_ROOT_PASSWORD create a root user
# in `admin` and turn on authentication; MONGO_INITDB_DATABASE is the database the
# scripts in /docker-entrypoint-initdb.d (*.js, *.sh) run against, once, on an empty
# /data/db; mongod listens on every address unless told otherwise.
set -Eeuo pipefail

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }

if [ "${1:0:1}" = '-' ]; then
	set -- mongod "$@"
fi
if [ "$1" != 'mongod' ]; then
	exec "$@"
fi

if [ "$(id -u)" = '0' ]; then
	mkdir -p /data/db /data/configdb
	chown mongodb:mongodb /data/db /data/configdb
	exec setpriv --reuid=mongodb --regid=mongodb --init-groups "$BASH_SOURCE" "$@"
fi

has_arg() {
	local wanted="$1" arg
	shift
	for arg; do
		case "$arg" in "$wanted" | "$wanted"=*) return 0 ;; esac
	done
	return 1
}

if ! has_arg --bind_ip "$@" && ! has_arg --bind_ip_all "$@"; then
	set -- "$@" --bind_ip_all
fi

user="${MONGO_INITDB_ROOT_USERNAME:-}"
password="${MONGO_INITDB_ROOT_PASSWORD:-}"
if { [ -n "$user" ] && [ -z "$password" ]; } || { [ -z "$user" ] && [ -n "$password" ]; }; then
	log "MONGO_INITDB_ROOT_USERNAME and MONGO_INITDB_ROOT_PASSWORD must be set together"
	exit 1
fi
if [ -n "$user" ] && ! has_arg --auth "$@"; then
	set -- "$@" --auth
fi

initialised=
for marker in WiredTiger journal local.0 storage.bson; do
	if [ -e "/data/db/$marker" ]; then initialised=1; fi
done

if [ -z "$initialised" ] && { [ -n "$user" ] || compgen -G '/docker-entrypoint-initdb.d/*' >/dev/null; }; then
	log "initialising /data/db"
	mongod --dbpath /data/db --bind_ip 127.0.0.1 --port 27017 --fork \
		--logpath /tmp/docker-initdb.log --pidfilepath /tmp/docker-initdb.pid
	shell=(mongosh --host 127.0.0.1 --port 27017 --quiet)
	for _ in $(seq 30); do
		if "${shell[@]}" admin --eval 'quit(db.runCommand({ ping: 1 }).ok ? 0 : 2)' >/dev/null 2>&1; then break; fi
		sleep 1
	done
	if [ -n "$user" ]; then
		"${shell[@]}" admin --eval '
			db.createUser({
				user: process.env.MONGO_INITDB_ROOT_USERNAME,
				pwd: process.env.MONGO_INITDB_ROOT_PASSWORD,
				roles: [{ role: "root", db: "admin" }],
			})' >/dev/null
		shell+=(--username "$user" --password "$password" --authenticationDatabase admin)
	fi
	database="${MONGO_INITDB_DATABASE:-test}"
	for script in /docker-entrypoint-initdb.d/*; do
		case "$script" in
			*.sh) log "running $script"; . "$script" ;;
			*.js) log "running $script"; "${shell[@]}" "$database" "$script" ;;
			*) [ -e "$script" ] && log "ignoring $script" ;;
		esac
	done
	mongod --dbpath /data/db --shutdown
	log "initialisation done; starting mongod"
fi

exec "$@"
