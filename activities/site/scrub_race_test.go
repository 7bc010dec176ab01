package site

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// scrubRace plays a migrate of the content stored at key, which finds the
// object there wrong, uploads the content again, verifies it and releases
// its file to a stub, at one instant of a scrub: during the scrub's at-th
// read of key (the read has opened the old object and the scrub has not
// received its bytes yet), or, with atDelete, as an S3 DELETE of key
// arrives.
type scrubRace struct {
	key      string
	at       int
	atDelete bool
	migrate  func() error

	mu       sync.Mutex
	reads    int
	busy     bool // the migrate runs: its own requests are not the scrub's
	uploaded bool
	err      error
}

// read counts a read of key and plays the migrate during the at-th.
func (r *scrubRace) read(key string) {
	r.mu.Lock()
	if key != r.key || r.busy {
		r.mu.Unlock()
		return
	}
	r.reads++
	if r.reads != r.at {
		r.mu.Unlock()
		return
	}
	r.play()
}

// play runs the migrate; r.mu is held, and released.
func (r *scrubRace) play() {
	r.busy = true
	r.mu.Unlock()
	err := r.migrate()
	r.mu.Lock()
	r.busy, r.uploaded, r.err = false, true, err
	r.mu.Unlock()
}

func (r *scrubRace) done() (uploaded bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.uploaded, r.err
}

// raceFS is a filesystem target whose reads of the key play the race once
// the file is open.
type raceFS struct {
	*targets.Filesystem
	race *scrubRace
}

func (f raceFS) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := f.Filesystem.Get(ctx, key)
	if err == nil {
		f.race.read(key)
	}
	return rc, err
}

func (f raceFS) GetPinned(ctx context.Context, key string) (io.ReadCloser, string, error) {
	rc, pin, err := f.Filesystem.GetPinned(ctx, key)
	if err == nil {
		f.race.read(key)
	}
	return rc, pin, err
}

// raceS3 is an S3 target (gofakes3, bucket "hub") whose server plays the
// race during a GET of the key after it read the object out, before the
// response leaves. A DELETE with If-Match deletes only the object with
// that ETag, as AWS S3 does (gofakes3 ignores the condition); with
// atDelete the migrate is played as the DELETE arrives.
func raceS3(t *testing.T, race *scrubRace) (scrubbed, raw targets.Driver) {
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	fake := gofakes3.New(backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/hub/")
		switch {
		case key != race.key:
		case r.Method == http.MethodGet:
			rec := httptest.NewRecorder()
			fake.ServeHTTP(rec, r)
			race.read(key)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		case r.Method == http.MethodDelete:
			if race.atDelete {
				race.mu.Lock()
				race.play()
			}
			if m := r.Header.Get("If-Match"); m != "" {
				if obj, err := backend.HeadObject("hub", key); err == nil && `"`+hex.EncodeToString(obj.Hash)+`"` != m {
					w.WriteHeader(http.StatusPreconditionFailed)
					_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>`)
					return
				}
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d, err := targets.Open(targets.Config{
		StorageType: "s3", Endpoint: srv.URL, Bucket: "hub",
		AccessKeyID: "test", SecretAccessKey: "test-secret",
	})
	require.NoError(t, err)
	return d, d
}

// TestScrubSparesAGoodCopyUploadedDuringItsLastRead: a migrate that finds
// its content's object wrong uploads the content again, verifies it and
// releases its file to a stub. When it does so while a quarantining scrub
// reads the old object, the scrub judges the old bytes bad, and must take
// away the old object only: it deleted the key, the new upload with it,
// and the stub had nothing to recall. The migrate is played during each
// of the scrub's reads of the object in turn, the n-th for n = 1, 2, ...
// until a scrub reads it fewer times, so the last read before the removal
// is among them whatever the path the scrub takes; on S3 also between the
// scrub's last look and its DELETE, where AWS S3's If-Match (played here)
// keeps the new object. After each, the stub recalls; a scrub in which
// nothing raced quarantines the bad object.
func TestScrubSparesAGoodCopyUploadedDuringItsLastRead(t *testing.T) {
	t.Parallel()
	kinds := map[string]func(t *testing.T, race *scrubRace) (scrubbed, raw targets.Driver){
		"filesystem": func(t *testing.T, race *scrubRace) (targets.Driver, targets.Driver) {
			d, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: t.TempDir()})
			require.NoError(t, err)
			return raceFS{d, race}, d
		},
		"s3": raceS3,
	}
	play := func(t *testing.T, mk func(t *testing.T, race *scrubRace) (targets.Driver, targets.Driver), at int, atDelete bool) (uploaded bool) {
		ctx := context.Background()
		const data = "the content a migrate uploads again"
		bad := strings.ToUpper(data)
		race := &scrubRace{key: contentKey(sumOf(data)), at: at, atDelete: atDelete}
		scrubbed, d := mk(t, race)
		dir := t.TempDir()
		root := newRoot(t, dir, false)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte(data), 0o644))
		require.NoError(t, d.Put(ctx, race.key, strings.NewReader(bad), int64(len(bad))))
		race.migrate = func() error {
			res, err := Migrate(ctx, root, []string{"/f.txt"}, d, "archive", StepOptions{})
			if err == nil && (len(res) != 1 || res[0].Code != CodeOK) {
				err = fmt.Errorf("migrate: %+v", res)
			}
			return err
		}

		got, err := Scrub(ctx, scrubbed, ScrubOptions{Quarantine: true})
		require.NoError(t, err)
		uploaded, err = race.done()
		require.NoError(t, err)
		require.Len(t, got.Bad, 1, "%+v", got)
		if !uploaded {
			_, err := d.Stat(ctx, race.key)
			require.ErrorIs(t, err, targets.ErrNotFound, "nothing raced: %+v", got.Bad[0])
			requireObject(t, d, got.Bad[0].Quarantined, bad)
			return false
		}
		requireObject(t, d, race.key, data)
		res, err := Recall(ctx, root, []string{"/f.txt"}, only("archive", d), StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{"/f.txt"})
		b, err := os.ReadFile(filepath.Join(dir, "f.txt"))
		require.NoError(t, err)
		require.Equal(t, data, string(b))
		require.Contains(t, got.Bad[0].Note, "rewritten since it was read", "%+v", got.Bad[0])
		return true
	}
	for name, mk := range kinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for at := 1; at <= 10; at++ {
				uploaded := false
				ok := t.Run(fmt.Sprintf("during-read-%d", at), func(t *testing.T) { uploaded = play(t, mk, at, false) })
				if !ok {
					break
				}
				if !uploaded {
					require.Greater(t, at, 1, "the migrate was played during no read")
					break
				}
			}
			if name == "s3" {
				t.Run("before-the-delete", func(t *testing.T) {
					require.True(t, play(t, mk, 0, true), "the migrate was not played")
				})
			}
		})
	}
}
