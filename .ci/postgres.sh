#!/usr/bin/env bash
# Starts the machine's PostgreSQL cluster when it is stopped and creates the
# role and database the test suite uses. Prints the URL to use. Fails (never
# skips) when PostgreSQL cannot be made reachable.
set -euo pipefail

user=${HUB_TEST_PG_USER:-hub}
pass=${HUB_TEST_PG_PASSWORD:-hub}
db=${HUB_TEST_PG_DB:-hub_test}
url="postgres://$user:$pass@127.0.0.1:5432/$db?sslmode=disable"

as_postgres() {
  if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sudo -n -u postgres sh -c "$*"; fi
}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi
}

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if command -v pg_lsclusters >/dev/null; then
    read -r ver name _ < <(pg_lsclusters --no-header | head -n 1) || true
    if [ -n "${ver:-}" ]; then
      # pg_ctlcluster talks on stdout ("Removed stale pid file."): keep stdout
      # for the URL alone. A crashed server can leave a socket lock file whose
      # owner is gone; remove such a lock and try once more.
      if ! as_root pg_ctlcluster "$ver" "$name" start >&2; then
        for lock in /var/run/postgresql/.s.PGSQL.*.lock; do
          [ -e "$lock" ] || continue
          pid=$(head -n 1 "$lock")
          if ! kill -0 "$pid" 2>/dev/null; then echo "removing stale $lock" >&2; as_root rm -f "$lock"; fi
        done
        as_root pg_ctlcluster "$ver" "$name" start >&2
      fi
    fi
  fi
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 >&2 || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }

as_postgres "psql -v ON_ERROR_STOP=1 -q -d postgres" >&2 <<SQL
DO \$\$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$user') THEN
    CREATE ROLE $user LOGIN PASSWORD '$pass';
  END IF;
END\$\$;
SQL
if ! as_postgres "psql -tAq -d postgres -c \"SELECT 1 FROM pg_database WHERE datname = '$db'\"" | grep -q 1; then
  as_postgres "createdb -O $user $db" >&2
fi
echo "$url"
