package models_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// TestPostgresLongStatement runs a PostgreSQL statement longer than the
// driver's default 10 s limit on waiting for an answer (a migration
// building an index over millions of rows takes that long): it succeeds
// (the hub allows 10 minutes), and a read_timeout in the URL still sets a
// limit.
func TestPostgresLongStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := dbtest.PostgresURL(t)
	db, err := models.Open(base)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx, "SELECT pg_sleep(10.5)")
	require.NoError(t, err)

	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("read_timeout", "1s")
	u.RawQuery = q.Encode()
	limited, err := models.Open(u.String())
	require.NoError(t, err)
	defer limited.Close()
	_, err = limited.ExecContext(ctx, "SELECT pg_sleep(3)")
	require.ErrorContains(t, err, "timeout")
}
