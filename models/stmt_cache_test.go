package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// openCached opens a sqlite file through the statement cache with room for
// size statements, on one connection as Open does.
func openCached(t *testing.T, size int) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "c.db")
	db := sql.OpenDB(&stmtCacheConnector{connect: func(context.Context) (driver.Conn, error) { return sqliteshim.Driver().Open(dsn) }, drv: sqliteshim.Driver(), size: size})
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	_, err := db.Exec("CREATE TABLE t (a INTEGER)")
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO t (a) VALUES (1), (2), (3)")
	require.NoError(t, err)
	return db
}

// driverConn is db's one connection (database/sql hands the same one out
// again), to look at its kept statements between queries.
func driverConn(t *testing.T, db *sql.DB) (c *stmtCacheConn) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.Raw(func(dc any) error { c = dc.(*stmtCacheConn); return nil }))
	return c
}

// cached is the text of the connection's kept statements, most recent first.
func cached(t *testing.T, db *sql.DB) (texts []string) {
	t.Helper()
	for e := driverConn(t, db).lru.Front(); e != nil; e = e.Next() {
		texts = append(texts, e.Value.(*cachedStmt).text)
	}
	return texts
}

// SumRows is the sum of the integers query selects through q (a
// database, a connection or a transaction).
func SumRows(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string) (total int) {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), query)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var a int
		require.NoError(t, rows.Scan(&a))
		total += a
	}
	require.NoError(t, rows.Err())
	return total
}

func TestStmtCacheReusesAndSeesNewRows(t *testing.T) {
	db := openCached(t, 8)
	q := "SELECT a FROM t"
	require.Equal(t, 6, SumRows(t, db, q))
	_, err := db.Exec("INSERT INTO t (a) VALUES (10)")
	require.NoError(t, err)
	require.Equal(t, 16, SumRows(t, db, q), "a kept statement reads the table as it is now")
	require.Equal(t, []string{q}, cached(t, db), "one statement kept for the query run twice; the writes are not kept")

	_, err = db.Exec("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'")
	require.NoError(t, err)
	rows, err := db.Query("SELECT * FROM t")
	require.NoError(t, err)
	cols, err := rows.Columns()
	require.NoError(t, err)
	require.NoError(t, rows.Close())
	require.Equal(t, []string{"a", "b"}, cols)
	_, err = db.Exec("ALTER TABLE t DROP COLUMN b")
	require.NoError(t, err)
	rows, err = db.Query("SELECT * FROM t")
	require.NoError(t, err)
	cols, err = rows.Columns()
	require.NoError(t, err)
	require.NoError(t, rows.Close())
	require.Equal(t, []string{"a"}, cols, "a kept statement follows a schema change")

	kept := driverConn(t, db).byText[q].Value.(*cachedStmt).stmt
	require.NoError(t, db.Close())
	require.Zero(t, reflect.ValueOf(kept).Elem().FieldByName("psql").Uint(), "closing the connection finalizes its kept statements")
}

func TestStmtCacheSameQueryWhileRowsOpen(t *testing.T) {
	db := openCached(t, 8)
	q := "SELECT a FROM t ORDER BY a"
	tx, err := db.Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	outer, err := tx.Query(q)
	require.NoError(t, err)
	var seen []int
	for outer.Next() {
		var a int
		require.NoError(t, outer.Scan(&a))
		seen = append(seen, a)
		require.Equal(t, 6, SumRows(t, tx, q), "the same query inside the loop runs on a statement of its own")
	}
	require.NoError(t, outer.Err())
	require.NoError(t, outer.Close())
	require.Equal(t, []int{1, 2, 3}, seen, "the outer rows were not disturbed")
	require.Equal(t, 6, SumRows(t, tx, q))
}

func TestStmtCacheEvictsLeastRecent(t *testing.T) {
	db := openCached(t, 2)
	conn := driverConn(t, db)
	q1, q2, q3 := "SELECT a FROM t WHERE a >= 1", "SELECT a FROM t WHERE a >= 2", "SELECT a FROM t WHERE a >= 3"
	tx, err := db.Begin()
	require.NoError(t, err)
	open, err := tx.Query(q1) // q1 is busy while it is evicted
	require.NoError(t, err)
	first := conn.byText[q1].Value.(*cachedStmt).stmt
	require.Equal(t, 5, SumRows(t, tx, q2))
	require.Equal(t, 3, SumRows(t, tx, q3))
	total := 0
	for open.Next() {
		var a int
		require.NoError(t, open.Scan(&a))
		total += a
	}
	require.NoError(t, open.Close())
	require.Equal(t, 6, total, "an evicted statement's open rows read to the end")
	// modernc's stmt zeroes its SQL text pointer when it is finalized
	require.Zero(t, reflect.ValueOf(first).Elem().FieldByName("psql").Uint(), "the evicted statement is finalized once its rows close")
	require.NoError(t, tx.Commit())
	require.Equal(t, []string{q3, q2}, cached(t, db))
	require.Equal(t, 6, SumRows(t, db, q1))
	require.Equal(t, []string{q1, q3}, cached(t, db))
}

func TestStmtCacheCanceledQuery(t *testing.T) {
	db := openCached(t, 8)
	q := "SELECT a FROM t ORDER BY a"
	ctx, cancel := context.WithCancel(context.Background())
	rows, err := db.QueryContext(ctx, q)
	require.NoError(t, err)
	require.True(t, rows.Next())
	cancel() // database/sql closes the rows of a canceled query
	require.Eventually(t, func() bool { return !rows.Next() }, time.Second, time.Millisecond)
	require.ErrorIs(t, rows.Err(), context.Canceled)
	require.NoError(t, rows.Close())
	require.Equal(t, 6, SumRows(t, db, q), "the kept statement still works, from its first row")
	require.Equal(t, []string{q}, cached(t, db))

	long := "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT COUNT(*) FROM c"
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = db.QueryRowContext(ctx, long).Scan(new(int))
	require.ErrorIs(t, err, context.DeadlineExceeded, "a query interrupted while it steps")
	require.Equal(t, 6, SumRows(t, db, q))
}
