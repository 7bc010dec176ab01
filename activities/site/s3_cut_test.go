package site

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// cutWriter passes headers through and only the first keep bytes of a
// body: the client sees the whole Content-Length and a connection that
// ends early (a proxy's timeout, a server restarted mid-GET).
type cutWriter struct {
	http.ResponseWriter
	keep, n int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	k := max(0, min(len(p), c.keep-c.n))
	c.n += k
	if k > 0 {
		if _, err := c.ResponseWriter.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// s3CuttingTarget is an S3 target (the in-process fake behind a proxy)
// whose GETs under objects/ end after *cut bytes while *cut is set.
func s3CuttingTarget(t *testing.T, cut *atomic.Int64) targets.Driver {
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	inner := gofakes3.New(backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := cut.Load()
		if k == 0 || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/objects/") {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		for name, v := range rec.Header() {
			w.Header()[name] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
		w.WriteHeader(rec.Code)
		_, _ = (&cutWriter{ResponseWriter: w, keep: int(k)}).Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	d, err := targets.Open(targets.Config{StorageType: "s3", Endpoint: srv.URL, Bucket: "hub", AccessKeyID: "test", SecretAccessKey: "test-secret"})
	require.NoError(t, err)
	return d
}

// TestACutReadNeverMakesATouchedStubItsOwnData: a stub that keeps bytes,
// whose mtime its user changed, is compared with the target's first bytes
// of its data. A read of those that the server cut short was taken for
// "the bytes differ": the stub was uploaded as the file's new content, its
// data's reference dropped, and the collector deleted the data (a
// reviewer's finding). The path now fails, and the data stays.
func TestACutReadNeverMakesATouchedStubItsOwnData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var cut atomic.Int64
	target := s3CuttingTarget(t, &cut)
	dir := t.TempDir()
	root := newRoot(t, dir, false)
	abs := filepath.Join(dir, "f.txt")
	data := strings.Repeat("the data of a stub its user only touched. ", 100)
	require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
	res, err := Migrate(ctx, root, []string{"/f.txt"}, target, "t", StepOptions{StubSize: 64})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	now := time.Now()
	require.NoError(t, os.Chtimes(abs, now, now)) // touched, not written

	cut.Store(10)
	res, err = Premigrate(ctx, root, []string{"/f.txt"}, target, "t", StepOptions{})
	cut.Store(0)
	require.NoError(t, err)
	requireAll(t, res, CodeFailed, []string{"/f.txt"})
	require.Contains(t, res[0].Message, "ended early")

	for range 2 {
		_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
	_, err = target.Stat(ctx, contentKey(sumOf(data)))
	require.NoError(t, err, "the data of a stub its user only touched is gone from the target")

	// Read whole, it is a stub still: skipped as migrated, its record
	// the data's.
	res, err = Premigrate(ctx, root, []string{"/f.txt"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeSkipped, []string{"/f.txt"})
	rec, err := root.state.get(abs, "/f.txt")
	require.NoError(t, err)
	require.Equal(t, Migrated, rec.State)
	require.Equal(t, sumOf(data), rec.Checksum)
}
