#!/usr/bin/env bash
# Entrypoint of the locally built mysql image. It keeps the contract the official image
# documents: MYSQL_ROOT_PASSWORD (or MYSQL_ALLOW_EMPTY_PASSWORD / MYSQL_RANDOM_ROOT_PASSWORD),
# MYSQL_ROOT_HOST (default %), MYSQL_DATABASE, MYSQL_USER and MYSQL_PASSWORD; arguments
# go to mysqld (`--datadir=...` included); an empty data directory is initialised, an
# existing one is started as it is; scripts in /docker-entrypoint-initdb.d run once.
set -Eeuo pipefail

log() { printf '%s [entrypoint] %s\n' "$(date -u '+%F %T UTC')" "$*" >&2; }

if [ "${1:0:1}" = '-' ]; then
	set -- mysqld "$@"
fi
if [ "$1" != 'mysqld' ]; then
	exec "$@"
fi

# The value mysqld would use for `name`, given the arguments and the config files: from
# the table of variables that ends `mysqld --verbose --help`.
setting() {
	"$@" --verbose --help 2>/dev/null | awk -v name="$setting_name" '
		/^Variables \(--variable-name=value\)/ { table = 1; next }
		table && $1 == name { sub(/^[^ \t]+[ \t]+/, ""); print; exit }'
}
setting_name=datadir DATADIR="$(setting "$@")"
setting_name=socket SOCKET="$(setting "$@")"
DATADIR="${DATADIR%/}"

if [ "$(id -u)" = '0' ]; then
	mkdir -p "$DATADIR"
	chown mysql:mysql "$DATADIR"
	exec setpriv --reuid=mysql --regid=mysql --init-groups "$BASH_SOURCE" "$@"
fi

if [ -d "$DATADIR/mysql" ]; then
	log "data directory $DATADIR is initialised; initialisation skipped"
	exec "$@"
fi

if [ -z "${MYSQL_ROOT_PASSWORD:-}" ] && [ -z "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" ] && [ -z "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ]; then
	log "the database is uninitialised and none of MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD or MYSQL_RANDOM_ROOT_PASSWORD is set"
	exit 1
fi
if [ -n "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ]; then
	MYSQL_ROOT_PASSWORD="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
	log "generated root password: $MYSQL_ROOT_PASSWORD"
fi

mkdir -p "$DATADIR"
log "initialising $DATADIR"
# mysqld refuses a data directory with anything in it but dot files.
"$@" --initialize-insecure --default-time-zone=SYSTEM

log "starting a temporary server on $SOCKET only"
"$@" --daemonize --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET"
client=(mysql --protocol=socket --socket="$SOCKET" -uroot --database=mysql)
for attempt in $(seq 60); do
	if "${client[@]}" -e 'SELECT 1' >/dev/null 2>&1; then break; fi
	if [ "$attempt" = 60 ]; then
		log "the temporary server did not answer on $SOCKET within a minute"
		exit 1
	fi
	sleep 1
done

if [ -z "${MYSQL_INITDB_SKIP_TZINFO:-}" ]; then
	mysql_tzinfo_to_sql /usr/share/zoneinfo 2>/dev/null | sed 's/Local time zone must be set--see zic manual page/FCTY/' | "${client[@]}"
fi

sql_string() { printf "'%s'" "${1//\'/\'\'}"; }
root_host="${MYSQL_ROOT_HOST:-%}"
{
	echo "SET @@SESSION.SQL_LOG_BIN=0;"
	echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(sql_string "${MYSQL_ROOT_PASSWORD:-}");"
	if [ "$root_host" != 'localhost' ]; then
		echo "CREATE USER 'root'@$(sql_string "$root_host") IDENTIFIED BY $(sql_string "${MYSQL_ROOT_PASSWORD:-}");"
		echo "GRANT ALL ON *.* TO 'root'@$(sql_string "$root_host") WITH GRANT OPTION;"
	fi
	if [ -n "${MYSQL_DATABASE:-}" ]; then
		echo "CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE//\`/\`\`}\`;"
	fi
	if [ -n "${MYSQL_USER:-}" ] && [ -n "${MYSQL_PASSWORD:-}" ]; then
		echo "CREATE USER $(sql_string "$MYSQL_USER")@'%' IDENTIFIED BY $(sql_string "$MYSQL_PASSWORD");"
		if [ -n "${MYSQL_DATABASE:-}" ]; then
			echo "GRANT ALL ON \`${MYSQL_DATABASE//\`/\`\`}\`.* TO $(sql_string "$MYSQL_USER")@'%';"
		fi
	fi
	echo "FLUSH PRIVILEGES;"
} | "${client[@]}"

export MYSQL_PWD="${MYSQL_ROOT_PASSWORD:-}"
for script in /docker-entrypoint-initdb.d/*; do
	case "$script" in
		*.sh) log "running $script"; . "$script" ;;
		*.sql) log "running $script"; "${client[@]}" ${MYSQL_DATABASE:+--database="$MYSQL_DATABASE"} <"$script" ;;
		*.sql.gz) log "running $script"; gunzip -c "$script" | "${client[@]}" ${MYSQL_DATABASE:+--database="$MYSQL_DATABASE"} ;;
		*) [ -e "$script" ] && log "ignoring $script" ;;
	esac
done

mysqladmin --protocol=socket --socket="$SOCKET" -uroot shutdown
unset MYSQL_PWD
log "initialisation done; starting mysqld"
exec "$@"
