package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/targets"
)

// testFile is one file of a generated tree.
type testFile struct {
	data  []byte
	mtime time.Time
}

// makeTree writes n files spread over nested directories under dir and
// returns them by API path. Sizes come from size(i); contents and mtimes
// (with nanoseconds, to check exact restoration) are distinct per file.
func makeTree(t testing.TB, dir string, n int, size func(i int) int) map[string]testFile {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	files := make(map[string]testFile, n)
	base := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		rel := fmt.Sprintf("d%02d/e%02d/f%04d.bin", i%10, (i/10)%7, i)
		data := make([]byte, size(i))
		for j := range data {
			data[j] = byte(rng.UintN(256))
		}
		abs := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, data, 0o644))
		mtime := base.Add(time.Duration(i)*time.Minute + time.Duration(i*7919)%time.Second)
		require.NoError(t, os.Chtimes(abs, mtime, mtime))
		files["/"+rel] = testFile{data: data, mtime: mtime}
	}
	return files
}

func sortedPaths(files map[string]testFile) []string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// requireFiles checks every file is byte-identical with its original mtime.
func requireFiles(t *testing.T, dir string, files map[string]testFile) {
	t.Helper()
	for p, f := range files {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		got, err := os.ReadFile(abs)
		require.NoError(t, err, p)
		require.Equal(t, f.data, got, p)
		fi, err := os.Stat(abs)
		require.NoError(t, err)
		require.True(t, f.mtime.Equal(fi.ModTime()), "%s mtime %v, want %v", p, fi.ModTime(), f.mtime)
	}
}

func requireAll(t testing.TB, res []Result, code Code, paths []string) {
	t.Helper()
	require.Len(t, res, len(paths))
	for i, r := range res {
		require.Equal(t, paths[i], r.Path)
		require.Equal(t, code, r.Code, "%s: %s", r.Path, r.Message)
	}
}

// walkAll returns every entry of a walk by path, failing on duplicates.
func walkAll(t *testing.T, root *Root, paths []string, opts WalkOptions) map[string]Entry {
	t.Helper()
	out := map[string]Entry{}
	var mu sync.Mutex
	err := Walk(context.Background(), root, paths, opts, func(batch []Entry) error {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range batch {
			_, dup := out[e.Path]
			require.False(t, dup, "entry %s reported twice", e.Path)
			out[e.Path] = e
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func newRoot(t testing.TB, dir string, indexState bool) *Root {
	t.Helper()
	var opts []RootOption
	if indexState {
		opts = append(opts, WithIndexState())
	}
	r, err := NewRoot(dir, opts...)
	require.NoError(t, err)
	return r
}

// targetKinds makes a target of each kind, for tests that run on both.
var targetKinds = map[string]func(testing.TB) targets.Driver{"filesystem": fsTarget, "s3": s3Target}

func fsTarget(t testing.TB) targets.Driver {
	t.Helper()
	d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: t.TempDir()})
	require.NoError(t, err)
	return d
}

func s3Target(t testing.TB) targets.Driver {
	t.Helper()
	d, _ := s3TargetAndBackend(t)
	return d
}

// s3TargetAndBackend is s3Target with the fake server's storage, bucket
// "hub", to write to behind the driver's back.
func s3TargetAndBackend(t testing.TB) (targets.Driver, *s3mem.Backend) {
	t.Helper()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	d, err := targets.Open(targets.Config{
		StorageType: "s3", Endpoint: srv.URL, Bucket: "hub",
		AccessKeyID: "test", SecretAccessKey: "test-secret",
	})
	require.NoError(t, err)
	return d, backend
}

func only(name string, d targets.Driver) TargetFunc {
	return func(n string) (targets.Driver, error) {
		if n != name {
			return nil, fmt.Errorf("unknown target %q", n)
		}
		return d, nil
	}
}

// countObjects lists the whole target.
func countObjects(t *testing.T, d targets.Driver) int {
	t.Helper()
	n, marker := 0, ""
	for {
		objs, next, err := d.List(context.Background(), "", marker, 1000)
		require.NoError(t, err)
		n += len(objs)
		if next == "" {
			return n
		}
		marker = next
	}
}

// countContent counts the content objects of the hub's layout.
func countContent(t *testing.T, d targets.Driver) int { return countUnder(t, d, objectsDir) }

// countRefs counts the references of the hub's layout.
func countRefs(t *testing.T, d targets.Driver) int { return countUnder(t, d, refsDir) }

func countUnder(t *testing.T, d targets.Driver, prefix string) int {
	t.Helper()
	n := 0
	require.NoError(t, eachObject(context.Background(), d, prefix, func(targets.Object) error { n++; return nil }))
	return n
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// distinctContents counts the different contents among files.
func distinctContents(files map[string]testFile) int {
	seen := map[string]bool{}
	for _, f := range files {
		seen[sha(f.data)] = true
	}
	return len(seen)
}

// putContent stores data on the filesystem target folder tdir as content
// (objects/<aa>/<sha256>), as a send's source put it there, and answers
// its SHA-256.
func putContent(t *testing.T, tdir string, data []byte) string {
	t.Helper()
	sum := sha(data)
	require.NoError(t, os.MkdirAll(filepath.Join(tdir, "objects", sum[:2]), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tdir, contentKey(sum)), data, 0o644))
	return sum
}

// mountTmpfs mounts a small tmpfs at dir/mnt, a filesystem of its own
// beneath dir, and answers its path; it skips the test without root.
func mountTmpfs(t *testing.T, dir string) string {
	t.Helper()
	mnt := filepath.Join(dir, "mnt")
	mountTmpfsAt(t, mnt)
	return mnt
}

// mountTmpfsAt mounts a tmpfs at the new folder mnt (root only).
func mountTmpfsAt(t *testing.T, mnt string) {
	t.Helper()
	mountAt(t, "tmpfs", mnt, "tmpfs", 0, "size=16m")
}

// bindMount mounts the folder from at the new folder at (root only).
func bindMount(t *testing.T, from, at string) {
	t.Helper()
	mountAt(t, from, at, "", unix.MS_BIND, "")
}

// mountAt makes the folder at and mounts source there until the test
// ends; without root the test is skipped.
func mountAt(t *testing.T, source, at, fstype string, flags uintptr, data string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	require.NoError(t, os.Mkdir(at, 0o755))
	require.NoError(t, unix.Mount(source, at, fstype, flags, data))
	t.Cleanup(func() { _ = unix.Unmount(at, unix.MNT_DETACH) })
}

func blocks(t *testing.T, abs string) int64 {
	t.Helper()
	fi, err := os.Stat(abs)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Blocks
}

// keepSwapping calls swap over and over on its own goroutine, as a user
// racing the hub would, until the returned stop is called.
func keepSwapping(swap func()) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
				swap()
			}
		}
	}()
	return func() { close(done); <-stopped }
}
