# Run once by the postgres image when it initialises an empty data directory, after it
# created POSTGRES_DB: the application user becomes that database's owner and gets
# nothing else (no superuser, no other database, no role creation); the replication
# user may stream the log and nothing else.
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres \
	--set app_user="$DATABASE_APP_USERNAME" \
	--set app_password="$DATABASE_APP_PASSWORD" \
	--set app_database="$POSTGRES_DB" \
	--set replication_password="$DATABASE_REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE :"app_user" LOGIN PASSWORD :'app_password';
ALTER DATABASE :"app_database" OWNER TO :"app_user";
REVOKE ALL ON DATABASE :"app_database" FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE :"app_database" TO :"app_user";
CREATE ROLE replicator REPLICATION LOGIN PASSWORD :'replication_password';
SQL
printf '\nhost replication replicator all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
