#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised (the image runs
# /docker-entrypoint-initdb.d/*): Temporal's own role and its two
# databases beside the hub's. Their schema is set up by temporal-sql-tool
# (the temporal-schema service of compose.yaml).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE temporal LOGIN PASSWORD '${TEMPORAL_DB_PASSWORD}';
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;
SQL
