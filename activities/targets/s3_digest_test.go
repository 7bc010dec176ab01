package targets

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"
)

// TestS3PutFailsWhenTheServerGetsOtherBytes: a proxy (or a faulty
// server's front) changes one byte of every upload's body. The upload
// fails, single-part and multipart alike: each request carries the MD5
// of what it sends (Content-MD5), which S3 servers check. Before, the
// object was stored with the hub's checksum label over other bytes, and a
// migrate released the file onto them (a reviewer's finding: the label is
// what the hub wrote, so a check of it after the upload proves nothing;
// a multipart upload's parts go unsigned over TLS).
func TestS3PutFailsWhenTheServerGetsOtherBytes(t *testing.T) {
	t.Parallel()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	inner := gofakes3.New(backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/objects/") {
			b, _ := io.ReadAll(r.Body)
			if len(b) > 0 {
				b[len(b)/2] ^= 1
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d, err := NewS3(Config{StorageType: "s3", Endpoint: srv.URL, Bucket: "hub", Region: "us-east-1",
		AccessKeyID: "test", SecretAccessKey: "test-secret"})
	require.NoError(t, err)
	d.multipartThreshold, d.partSize = 5<<20, 5<<20
	ctx := context.Background()
	for _, size := range []int{5000, 11<<20 + 7} {
		data := bytes.Repeat([]byte("x"), size)
		err := d.Put(ctx, "objects/ab/"+sum(data), bytes.NewReader(data), int64(size))
		require.Error(t, err, "%d bytes stored as others", size)
		_, err = d.Stat(ctx, "objects/ab/"+sum(data))
		require.ErrorIs(t, err, ErrNotFound, "%d bytes", size)
	}
}
