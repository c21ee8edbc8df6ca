// Run once by the mongo image when it initialises an empty /data/db: the application
// user may read and write its own database and nothing else.
db.getSiblingDB("admin").createUser({
  user: process.env.DATABASE_APP_USERNAME,
  pwd: process.env.DATABASE_APP_PASSWORD,
  roles: [{ role: "readWrite", db: process.env.MONGO_INITDB_DATABASE }],
});
