# Run once by the mysql image when it initialises an empty data directory, with the
# temporary server on its socket: the user replicas stream the binary log with and
# clone the primary's data as. It may do nothing else.
MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql --protocol=socket --socket="${SOCKET:-/var/run/mysqld/mysqld.sock}" -uroot <<SQL
CREATE USER 'replicator'@'%' IDENTIFIED BY '$DATABASE_REPLICATION_PASSWORD';
GRANT REPLICATION SLAVE, BACKUP_ADMIN ON *.* TO 'replicator'@'%';
SQL
