// Package dbtest runs a test body against every database the hub supports:
// a fresh sqlite file and a fresh PostgreSQL schema, both fully migrated.
//
// PostgreSQL comes from HUB_TEST_POSTGRES_URL (make test sets it). Without
// it the tests fail, unless HUB_TEST_SQLITE_ONLY=1 says on purpose that only
// sqlite is wanted: a missing database is never silently skipped.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/migrations"
	"github.com/thehub/hub/models"
)

// Dialects returns the names of the databases tests run against.
func Dialects(t testing.TB) []string {
	if os.Getenv("HUB_TEST_POSTGRES_URL") != "" {
		return []string{"sqlite", "postgres"}
	}
	if os.Getenv("HUB_TEST_SQLITE_ONLY") == "1" {
		return []string{"sqlite"}
	}
	t.Fatal("HUB_TEST_POSTGRES_URL is not set: run `make test`, or set HUB_TEST_SQLITE_ONLY=1 to test sqlite alone")
	return nil
}

// Run runs body once per database as a subtest named after it.
func Run(t *testing.T, body func(t *testing.T, db *bun.DB)) {
	t.Helper()
	for _, name := range Dialects(t) {
		t.Run(name, func(t *testing.T) {
			body(t, Open(t, name))
		})
	}
}

// Open returns a fresh, migrated database of the named kind that is
// removed when the test ends.
func Open(t testing.TB, kind string) *bun.DB {
	t.Helper()
	db, _ := OpenURL(t, kind)
	return db
}

// OpenURL is Open, with the database's URL (for another process).
func OpenURL(t testing.TB, kind string) (*bun.DB, string) {
	t.Helper()
	url := URL(t, kind)
	db, err := models.Open(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, migrations.Up(context.Background(), db))
	return db, url
}

// PostgresURL returns the URL of a fresh, empty PostgreSQL database for a
// test of PostgreSQL alone, and skips the test when only sqlite was asked
// for (HUB_TEST_SQLITE_ONLY): a gap, which make test and CI never leave,
// as they always set HUB_TEST_POSTGRES_URL.
func PostgresURL(t testing.TB) string {
	t.Helper()
	if !slices.Contains(Dialects(t), "postgres") {
		t.Skip("PostgreSQL is not configured (HUB_TEST_SQLITE_ONLY)")
	}
	return URL(t, "postgres")
}

// URL returns the URL of a fresh, empty database of the named kind.
func URL(t testing.TB, kind string) string {
	t.Helper()
	if kind == "sqlite" {
		return filepath.Join(t.TempDir(), "hub.db")
	}
	base := os.Getenv("HUB_TEST_POSTGRES_URL")
	require.NotEmpty(t, base, "HUB_TEST_POSTGRES_URL")
	require.True(t, strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://"),
		"HUB_TEST_POSTGRES_URL must be a postgres:// URL, got %q", base)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)

	admin, err := models.Open(base)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Exec("CREATE SCHEMA " + schema)
	require.NoError(t, err, "create test schema in %s", base)
	t.Cleanup(func() {
		admin, err := models.Open(base)
		if err == nil {
			_, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE")
			_ = admin.Close()
		}
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// BenchSize is full, or quick when HUB_BENCH_QUICK=1: `make test` runs
// every benchmark once at a small size (seconds), so that none rots;
// `make bench` runs them at the sizes the issue notes report.
func BenchSize(full, quick int) int {
	if os.Getenv("HUB_BENCH_QUICK") == "1" {
		return quick
	}
	return full
}

// RequireStatisticsOfRows checks that a job's statistics as the hub reads
// them (from the counts it keeps) equal a count of the job's stats, row by
// row, and returns them. Its tasks' figures are not compared.
func RequireStatisticsOfRows(t testing.TB, db bun.IDB, jobID int64, msgAndArgs ...any) *models.JobStatistics {
	t.Helper()
	ctx := context.Background()
	var stats []models.JobStat
	require.NoError(t, db.NewSelect().Model(&stats).Where("job_id = ?", jobID).Scan(ctx))
	got, err := models.GetJobStatistics(ctx, db, jobID)
	require.NoError(t, err)
	want := models.JobStatistics{ByState: map[string]int64{}, ByCode: map[string]int64{}, BytesByState: map[string]int64{},
		Tasks: got.Tasks, TaskByState: got.TaskByState, TaskByType: got.TaskByType}
	for _, st := range stats {
		var size int64
		if st.Size != nil {
			size = *st.Size
		}
		want.Files++
		want.ByState[st.State]++
		want.ByCode[st.Code]++
		want.BytesByState[st.State] += size
		want.Bytes += size
	}
	require.Equal(t, want, *got, msgAndArgs...)
	return got
}
