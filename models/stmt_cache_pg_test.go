package models_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// TestStmtCacheOnPostgres: on PostgreSQL a SELECT is prepared when its
// text comes a second time (the server's own view of the session,
// pg_prepared_statements, shows it), a kept statement reads the rows as
// they are, follows a schema change that alters its columns, and serves a
// transaction, seeing its writes and not after its rollback.
func TestStmtCacheOnPostgres(t *testing.T) {
	ctx := context.Background()
	db, err := models.Open(dbtest.PostgresURL(t))
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.DB.Conn(ctx) // one session, as prepared statements are
	require.NoError(t, err)
	defer conn.Close()
	exec := func(q string) {
		t.Helper()
		_, err := conn.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	exec("CREATE TABLE t (a INTEGER)")
	exec("INSERT INTO t (a) VALUES (1), (2), (3)")
	prepared := func(q string) bool {
		t.Helper()
		var n int
		// With an argument: never kept itself.
		require.NoError(t, conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_prepared_statements WHERE statement = $1", q).Scan(&n))
		return n > 0
	}
	q := "SELECT a FROM t ORDER BY a"
	require.Equal(t, 6, models.SumRows(t, conn, q))
	require.False(t, prepared(q), "a text run once is not prepared")
	require.Equal(t, 6, models.SumRows(t, conn, q))
	require.True(t, prepared(q), "a text run twice is")
	exec("INSERT INTO t (a) VALUES (10)")
	require.Equal(t, 16, models.SumRows(t, conn, q), "a kept statement reads the table as it is now")

	star := "SELECT * FROM t ORDER BY a"
	columns := func() []string {
		t.Helper()
		rows, err := conn.QueryContext(ctx, star)
		require.NoError(t, err)
		defer rows.Close()
		cols, err := rows.Columns()
		require.NoError(t, err)
		return cols
	}
	require.Equal(t, []string{"a"}, columns())
	require.Equal(t, []string{"a"}, columns())
	require.True(t, prepared(star))
	exec("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'")
	require.Equal(t, []string{"a", "b"}, columns(), "a kept statement follows a schema change of its columns")
	require.Equal(t, []string{"a", "b"}, columns())
	require.Equal(t, []string{"a", "b"}, columns())

	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	require.Equal(t, 16, models.SumRows(t, tx, q), "a kept statement inside a transaction")
	_, err = tx.ExecContext(ctx, "DELETE FROM t WHERE a = 10")
	require.NoError(t, err)
	require.Equal(t, 6, models.SumRows(t, tx, q), "inside a transaction, its own writes")
	require.NoError(t, tx.Rollback())
	require.Equal(t, 16, models.SumRows(t, conn, q))
}

// TestPostgresKeepsConnectionsForConcurrentRequests: eight requests at
// once, again and again, reuse their connections (and so their prepared
// statements) instead of closing all but two after each burst.
func TestPostgresKeepsConnectionsForConcurrentRequests(t *testing.T) {
	db, err := models.Open(dbtest.PostgresURL(t))
	require.NoError(t, err)
	defer db.Close()
	for range 5 {
		var g errgroup.Group
		for range 8 {
			g.Go(func() error {
				_, err := db.ExecContext(context.Background(), "SELECT pg_sleep(0.01)")
				return err
			})
		}
		require.NoError(t, g.Wait())
	}
	st := db.DB.Stats()
	require.Zero(t, st.MaxIdleClosed, "connections closed for want of idle room: %+v", st)
	require.LessOrEqual(t, st.OpenConnections, 8)
}
