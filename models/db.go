// Package models holds the hub's bun models and the query functions over them.
//
// Query functions take bun.IDB so they compose inside transactions, and the
// same code runs on PostgreSQL (production) and sqlite (the embedded default).
package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// Sentinel errors that the API maps to HTTP statuses in one place.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the write would break a uniqueness rule.
	ErrConflict = errors.New("conflict")
)

// Open connects to the database named by url: a postgres:// URL selects
// PostgreSQL, anything else is a sqlite file path (optionally prefixed with
// sqlite:// or file:).
//
// A PostgreSQL statement may run up to pgReadTimeout, or less if its
// caller's context ends first: the driver's own default, 10 s, would fail
// a migration building an index over millions of rows, or any long
// statement, as a network error. The URL's read_timeout sets another.
func Open(url string) (*bun.DB, error) {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		pg := pgdriver.NewConnector(pgdriver.WithReadTimeout(pgReadTimeout), pgdriver.WithDSN(url))
		sqldb := sql.OpenDB(&stmtCacheConnector{connect: pg.Connect, drv: pg.Driver(), size: 128, server: true})
		// database/sql keeps two idle connections by default: with more
		// requests at once, each burst opened connections (a login each)
		// and closed them, with their prepared statements.
		sqldb.SetMaxIdleConns(pgIdleConns)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		return register(bun.NewDB(sqldb, pgdialect.New())), nil
	}
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if path == "" {
		return nil, errors.New("empty database path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create database folder: %w", err)
	}
	// One connection with WAL and a busy timeout: sqlite serialises writers
	// anyway, and a single connection avoids SQLITE_BUSY storms. It keeps
	// up to 64 MiB of pages (the default 2 MiB made lists over 100,000
	// jobs read their pages again with pread); the file is not mapped, as
	// mapped pages counted in the process's resident memory (a million-
	// path job peaked at 1 GiB with 256 MiB mapped).
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)" +
		"&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate" +
		"&_pragma=cache_size(-65536)"
	drv := sqliteshim.Driver()
	connect := func(context.Context) (driver.Conn, error) { return drv.Open(dsn) }
	sqldb := sql.OpenDB(&stmtCacheConnector{connect: connect, drv: drv, size: 128})
	sqldb.SetMaxOpenConns(1)
	return register(bun.NewDB(sqldb, sqlitedialect.New())), nil
}

// pgIdleConns is how many idle PostgreSQL connections a process keeps.
const pgIdleConns = 16

// pgReadTimeout bounds the wait for a PostgreSQL answer: long enough for
// any statement the hub runs (an API request's own context ends sooner),
// short enough that a loop without a deadline does not wait the better
// part of an hour for TCP to notice a database that vanished.
const pgReadTimeout = 10 * time.Minute

// register tells bun about the join tables of many-to-many relations.
func register(db *bun.DB) *bun.DB {
	db.RegisterModel((*UserGroup)(nil), (*GroupPermission)(nil), (*NodeQueue)(nil))
	db.RegisterModel((*SpaceSite)(nil), (*ExternalTargetSite)(nil))
	return db
}

// IsPostgres reports whether db talks to PostgreSQL.
func IsPostgres(db bun.IDB) bool {
	_, ok := db.Dialect().(*pgdialect.Dialect)
	return ok
}

// dbErr translates driver errors into the package's sentinel errors.
func dbErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	}
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) && pgErr.Field('C') == "23505" {
		return fmt.Errorf("%w: %s", ErrConflict, pgErr.Field('D'))
	}
	if strings.Contains(err.Error(), "UNIQUE constraint failed") {
		return fmt.Errorf("%w: %s", ErrConflict, err.Error())
	}
	return err
}
