package targets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
)

// newFakeS3 starts an in-process S3 server with one bucket and returns a
// Config pointing at it.
func newFakeS3(t testing.TB, useTLS bool) Config {
	t.Helper()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	faker := gofakes3.New(backend)
	var srv *httptest.Server
	if useTLS {
		srv = httptest.NewTLSServer(faker.Server())
	} else {
		srv = httptest.NewServer(faker.Server())
	}
	t.Cleanup(srv.Close)
	return Config{
		StorageType:     "s3",
		Endpoint:        srv.URL,
		Bucket:          "hub",
		Region:          "us-east-1",
		AccessKeyID:     "test",
		SecretAccessKey: "test-secret",
	}
}

// driverCases builds every driver the contract suite runs against.
func driverCases() []struct {
	name string
	open func(t *testing.T) Driver
} {
	return []struct {
		name string
		open func(t *testing.T) Driver
	}{
		{"filesystem", func(t *testing.T) Driver {
			d, err := Open(Config{StorageType: "filesystem", MigrationTargetFolder: t.TempDir()})
			require.NoError(t, err)
			return d
		}},
		{"filesystem-prefix", func(t *testing.T) Driver {
			d, err := Open(Config{StorageType: "filesystem", MigrationTargetFolder: t.TempDir(), Prefix: "/site-a/"})
			require.NoError(t, err)
			return d
		}},
		{"s3", func(t *testing.T) Driver {
			d, err := Open(newFakeS3(t, false))
			require.NoError(t, err)
			return d
		}},
		{"s3-tls-prefix", func(t *testing.T) Driver {
			cfg := newFakeS3(t, true)
			cfg.Prefix = "site-a"
			d, err := Open(cfg)
			require.NoError(t, err)
			return d
		}},
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func get(t *testing.T, d Driver, key string) []byte {
	t.Helper()
	rc, err := d.Get(context.Background(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

func TestDriverContract(t *testing.T) {
	t.Parallel()
	for _, dc := range driverCases() {
		t.Run(dc.name, func(t *testing.T) {
			t.Parallel()
			runDriverContract(t, dc.open)
		})
	}
}

// runDriverContract runs the behaviour every Driver must have; open returns
// a driver over an empty target for each sub-test.
func runDriverContract(t *testing.T, open func(t *testing.T) Driver) {
	ctx := context.Background()

	t.Run("round trip and stat", func(t *testing.T) {
		d := open(t)
		for _, size := range []int{0, 1, 100 << 10} {
			data := bytes.Repeat([]byte{byte(size)}, size)
			key := fmt.Sprintf("dir/sub/obj-%d.bin", size)
			require.NoError(t, d.Put(ctx, key, bytes.NewReader(data), int64(size)))
			require.Equal(t, data, get(t, d, key))
			obj, err := d.Stat(ctx, key)
			require.NoError(t, err)
			require.Equal(t, key, obj.Key)
			require.Equal(t, int64(size), obj.Size)
			require.False(t, obj.Mtime.IsZero())
			if obj.Checksum != "" {
				require.Equal(t, sum(data), obj.Checksum)
			}
		}
	})

	t.Run("overwrite is idempotent", func(t *testing.T) {
		d := open(t)
		for _, content := range []string{"first", "second", "second"} {
			require.NoError(t, d.Put(ctx, "k", strings.NewReader(content), int64(len(content))))
		}
		require.Equal(t, "second", string(get(t, d, "k")))
		objs, _, err := d.List(ctx, "", "", 10)
		require.NoError(t, err)
		require.Len(t, objs, 1)
	})

	t.Run("absent objects", func(t *testing.T) {
		d := open(t)
		_, err := d.Get(ctx, "missing/key")
		require.ErrorIs(t, err, ErrNotFound)
		_, err = d.Stat(ctx, "missing/key")
		require.ErrorIs(t, err, ErrNotFound)
		require.NoError(t, d.Delete(ctx, "missing/key"))

		require.NoError(t, d.Put(ctx, "gone", strings.NewReader("x"), 1))
		require.NoError(t, d.Delete(ctx, "gone"))
		require.NoError(t, d.Delete(ctx, "gone"))
		_, err = d.Stat(ctx, "gone")
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("list pages in key order", func(t *testing.T) {
		d := open(t)
		var want []string
		for i := range 25 {
			key := fmt.Sprintf("list/%02d/f", i)
			want = append(want, key)
			require.NoError(t, d.Put(ctx, key, strings.NewReader("x"), 1))
		}
		require.NoError(t, d.Put(ctx, "other/f", strings.NewReader("x"), 1))
		require.NoError(t, d.Put(ctx, "list-sibling", strings.NewReader("x"), 1))

		var got []string
		marker, pages := "", 0
		for {
			objs, next, err := d.List(ctx, "list/", marker, 10)
			require.NoError(t, err)
			pages++
			for _, o := range objs {
				got = append(got, o.Key)
				require.Equal(t, int64(1), o.Size)
			}
			if next == "" {
				break
			}
			marker = next
		}
		require.Equal(t, want, got)
		require.Equal(t, 3, pages)

		objs, _, err := d.List(ctx, "list/1", "", 100)
		require.NoError(t, err)
		require.Len(t, objs, 10)
		objs, _, err = d.List(ctx, "list", "", 100)
		require.NoError(t, err)
		require.Len(t, objs, 26)
	})

	t.Run("invalid keys", func(t *testing.T) {
		d := open(t)
		for _, key := range []string{"", ".", "..", "../x", "a/../../x", "/abs", "a//b", "a/./b", "a/"} {
			require.ErrorIs(t, d.Put(ctx, key, strings.NewReader("x"), 1), ErrInvalidKey, key)
			_, err := d.Get(ctx, key)
			require.ErrorIs(t, err, ErrInvalidKey, key)
			_, err = d.Stat(ctx, key)
			require.ErrorIs(t, err, ErrInvalidKey, key)
			require.ErrorIs(t, d.Delete(ctx, key), ErrInvalidKey, key)
		}
	})

	t.Run("wrong size leaves no object", func(t *testing.T) {
		d := open(t)
		require.Error(t, d.Put(ctx, "short", strings.NewReader("abc"), 10))
		require.Error(t, d.Put(ctx, "long", strings.NewReader("abcdef"), 2))
		for _, k := range []string{"short", "long"} {
			_, err := d.Stat(ctx, k)
			require.ErrorIs(t, err, ErrNotFound, k)
		}
	})

	t.Run("reader that cannot seek", func(t *testing.T) {
		d := open(t)
		data := bytes.Repeat([]byte("0123456789"), 1000)
		r := io.MultiReader(bytes.NewReader(data[:5000]), bytes.NewReader(data[5000:]))
		require.NoError(t, d.Put(ctx, "stream", r, int64(len(data))))
		require.Equal(t, data, get(t, d, "stream"))
	})

	t.Run("checksummed reader", func(t *testing.T) {
		d := open(t)
		data := []byte("known content")
		cr := &ChecksummedReader{ReadSeeker: bytes.NewReader(data), Sum: sum(data)}
		require.NoError(t, d.Put(ctx, "known", cr, int64(len(data))))
		obj, err := d.Stat(ctx, "known")
		require.NoError(t, err)
		if obj.Checksum != "" {
			require.Equal(t, sum(data), obj.Checksum)
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		d := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.Error(t, d.Put(cctx, "never", strings.NewReader("x"), 1))
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"unknown type", Config{StorageType: "tape"}, `unknown storage type "tape" (supported: filesystem, s3)`},
		{"not yet supported", Config{StorageType: "azure"}, `unknown storage type "azure"`},
		{"filesystem without folder", Config{StorageType: "filesystem"}, "MigrationTargetFolder is empty"},
		{"s3 without bucket", Config{StorageType: "s3"}, "Bucket is empty"},
		{"s3 bad scheme", Config{StorageType: "s3", Bucket: "b", Endpoint: "ftp://host"}, "scheme must be http or https"},
		{"prefix escaping", Config{StorageType: "filesystem", MigrationTargetFolder: "/tmp", Prefix: "../x"}, "invalid object key"},
		{"case insensitive type", Config{StorageType: " S3 ", Bucket: "b", Endpoint: "minio.local", Port: 9000, Scheme: "http"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Open(tt.cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, d)
		})
	}
}

func TestEndpointURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{Endpoint: "s3.example.org"}, "https://s3.example.org"},
		{Config{Endpoint: "minio", Port: 9000, Scheme: "http"}, "http://minio:9000"},
		{Config{Endpoint: "http://127.0.0.1:9000"}, "http://127.0.0.1:9000"},
		{Config{Endpoint: "https://host", Port: 8443}, "https://host:8443"},
	}
	for _, tt := range tests {
		got, err := endpointURL(tt.cfg)
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
}

func TestS3Multipart(t *testing.T) {
	t.Parallel()
	runS3Multipart(t, newFakeS3(t, false))
}

// runS3Multipart uploads ~12 MiB in 5 MiB parts through cfg's server from
// each kind of reader and reads it back.
func runS3Multipart(t *testing.T, cfg Config) {
	ctx := context.Background()
	d, err := NewS3(cfg)
	require.NoError(t, err)
	d.multipartThreshold, d.partSize = 5<<20, 5<<20 // S3's minimum part size

	data := make([]byte, 12<<20+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	file := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(file, data, 0o644))

	tests := []struct {
		name   string
		reader func() io.Reader
	}{
		{"file (ReaderAt)", func() io.Reader {
			f, err := os.Open(file)
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{"checksummed file", func() io.Reader {
			f, err := os.Open(file)
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
			return &ChecksummedReader{ReadSeeker: f, Sum: sum(data)}
		}},
		{"plain seeker", func() io.Reader { return struct{ io.ReadSeeker }{bytes.NewReader(data)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "big/" + strings.ReplaceAll(tt.name, " ", "-")
			require.NoError(t, d.Put(ctx, key, tt.reader(), int64(len(data))))
			require.Equal(t, data, get(t, d, key))
			obj, err := d.Stat(ctx, key)
			require.NoError(t, err)
			require.Equal(t, int64(len(data)), obj.Size)
			require.Equal(t, sum(data), obj.Checksum)
		})
	}

	// A file that changed after it was hashed, in one part or in many: what
	// would be sent does not match the checksum the object would be labelled
	// with, so nothing is stored (a later migration of a file with the first
	// content would trust it).
	changed := bytes.Clone(data)
	changed[len(changed)-1]++
	for _, size := range []int{100, len(data)} {
		key := fmt.Sprintf("changed/%d", size)
		err = d.Put(ctx, key, &ChecksummedReader{ReadSeeker: bytes.NewReader(changed[len(changed)-size:]), Sum: sum(data[len(data)-size:])}, int64(size))
		require.ErrorContains(t, err, "changed", key)
		_, err = d.Stat(ctx, key)
		require.ErrorIs(t, err, ErrNotFound, key)
	}
}

func TestFilesystemDetectsChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)

	t.Run("checksum mismatch refused", func(t *testing.T) {
		cr := &ChecksummedReader{ReadSeeker: strings.NewReader("actual"), Sum: sum([]byte("expected"))}
		require.ErrorContains(t, d.Put(ctx, "mismatch", cr, 6), "does not match")
		_, err := d.Stat(ctx, "mismatch")
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("rewritten object loses its recorded checksum", func(t *testing.T) {
		if !userXattrs(t, dir) {
			t.Skip("no user xattrs on this filesystem")
		}
		require.NoError(t, d.Put(ctx, "obj", strings.NewReader("hello"), 5))
		obj, err := d.Stat(ctx, "obj")
		require.NoError(t, err)
		require.Equal(t, sum([]byte("hello")), obj.Checksum)
		f, err := os.OpenFile(filepath.Join(dir, "obj"), os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.WriteString("!")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		obj, err = d.Stat(ctx, "obj")
		require.NoError(t, err)
		require.Empty(t, obj.Checksum)
	})

	t.Run("no temp files left and sync works", func(t *testing.T) {
		require.NoError(t, d.Sync(ctx))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			require.False(t, strings.HasPrefix(e.Name(), fsutil.TmpPrefix), e.Name())
		}
	})
}

// TestFilesystemChecksumAttribute: Put records an object's checksum in 48
// bytes, set once the object is in place and its temporary marker gone,
// so that it is the object's only attribute (ext4 keeps it in the inode:
// no block of its own per object); an object whose attribute is in the text form of before still
// reports its checksum; either form stops counting once the file's size
// or mtime is not what it names, and a value of neither form counts for
// nothing.
func TestFilesystemChecksumAttribute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	if !userXattrs(t, dir) {
		t.Skip("no user xattrs on this filesystem")
	}
	require.NoError(t, d.Put(ctx, "new", strings.NewReader("hello"), 5))
	p := filepath.Join(dir, "new")
	v, err := getxattr(p, sumXattr)
	require.NoError(t, err, "the object has no checksum attribute")
	require.Len(t, v, 48)
	// No more blocks than a file of the same content whose one
	// attribute is that value: where the filesystem keeps it in the
	// inode, so is the object's.
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, []byte("hello"), 0o600))
	require.NoError(t, unix.Setxattr(plain, sumXattr, v, 0))
	blocks := func(p string) int64 {
		f, err := os.Open(p)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Sync())
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(int(f.Fd()), &st))
		return st.Blocks
	}
	require.Equal(t, blocks(plain), blocks(p))
	checksum := func(key string) string {
		t.Helper()
		obj, err := d.Stat(ctx, key)
		require.NoError(t, err)
		return obj.Checksum
	}
	require.Equal(t, sum([]byte("hello")), checksum("new"))

	old := filepath.Join(dir, "old")
	require.NoError(t, os.WriteFile(old, []byte("before"), 0o600))
	fi, err := os.Stat(old)
	require.NoError(t, err)
	text := fmt.Sprintf("%s %d %d", sum([]byte("before")), fi.Size(), fi.ModTime().UnixNano())
	require.NoError(t, unix.Setxattr(old, sumXattr, []byte(text), 0))
	require.Equal(t, sum([]byte("before")), checksum("old"))

	for _, key := range []string{"new", "old"} {
		later := time.Now().Add(time.Hour)
		require.NoError(t, os.Chtimes(filepath.Join(dir, key), later, later))
		require.Empty(t, checksum(key), "%s: mtime changed", key)
	}
	for _, bad := range [][]byte{make([]byte, 48), []byte("short"), []byte(strings.Repeat("a", 64) + " 5 0")} {
		require.NoError(t, unix.Setxattr(p, sumXattr, bad, 0))
		require.Empty(t, checksum("new"), "%q", bad)
	}
}

// userXattrs tells whether dir's filesystem keeps user extended
// attributes, trying one on a file of its own.
func userXattrs(t *testing.T, dir string) bool {
	f, err := os.CreateTemp(dir, "probe")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	defer os.Remove(f.Name())
	return unix.Setxattr(f.Name(), "user.probe", []byte("1"), 0) == nil
}

// TestFilesystemPutAfterCrash: a Put replacing an object (through a
// temporary name) killed mid-write leaves its temporary file; the retried
// Put reuses it, so nothing is left behind, and concurrent Puts of one key
// each land whole. (A Put of a new object writes an unnamed file, which a
// kill leaves nowhere: TestKillAtEveryFaultPoint at put.written.)
func TestFilesystemPutAfterCrash(t *testing.T) {
	dir := t.TempDir()
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, d.Put(ctx, "a/f.bin", strings.NewReader("an older copy"), 13))
	leftover := fsutil.TempName(filepath.Join(dir, "a", "f.bin"))
	require.NoError(t, os.WriteFile(leftover, []byte("half of an old wri"), 0o600))
	require.NoError(t, unix.Setxattr(leftover, "user.hub.tmp", []byte("1"), 0), "a killed hub writer's file carries the marker")

	want := bytes.Repeat([]byte("x"), 10)
	require.NoError(t, d.Put(ctx, "a/f.bin", bytes.NewReader(want), int64(len(want))))
	require.Equal(t, want, get(t, d, "a/f.bin"))
	entries, err := os.ReadDir(filepath.Join(dir, "a"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")

	bodies := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, 256<<10)
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, d.Put(ctx, "a/g.bin", bytes.NewReader(bodies[i]), int64(len(bodies[i]))))
		}()
	}
	wg.Wait()
	got := get(t, d, "a/g.bin")
	require.Contains(t, bodies, got, "one writer's whole content")
	entries, err = os.ReadDir(filepath.Join(dir, "a"))
	require.NoError(t, err)
	require.Len(t, entries, 2)

	long := strings.Repeat("n", 250) // the temporary name would pass NAME_MAX
	require.NoError(t, d.Put(ctx, long, bytes.NewReader(want), int64(len(want))))
	require.Equal(t, want, get(t, d, long))
}

// TestFilesystemReplacementIsFlushedFirst: an object replaced at its key
// (which stubs may rely on, flushed long ago) gets its new bytes, whole,
// onto the disk before the rename that makes the old ones unreachable; a
// new object, which replaces nothing, is left to the batch's Sync.
func TestFilesystemReplacementIsFlushedFirst(t *testing.T) {
	dir := t.TempDir()
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	ctx := context.Background()
	type flush struct{ written, atKey []byte }
	var flushes []flush
	real := syncBeforeRename
	t.Cleanup(func() { syncBeforeRename = real })
	syncBeforeRename = func(f *os.File) error {
		written, err := os.ReadFile(f.Name())
		require.NoError(t, err)
		atKey, _ := os.ReadFile(filepath.Join(dir, "a", "f.bin"))
		flushes = append(flushes, flush{written, atKey})
		return real(f)
	}

	old := []byte("the copy stubs rely on")
	require.NoError(t, d.Put(ctx, "a/f.bin", bytes.NewReader(old), int64(len(old))))
	require.Empty(t, flushes, "a new object waits for the batch's Sync")

	replacement := bytes.Repeat([]byte("r"), 64<<10)
	require.NoError(t, d.Put(ctx, "a/f.bin", bytes.NewReader(replacement), int64(len(replacement))))
	require.Len(t, flushes, 1, "the replacement is flushed")
	require.Equal(t, replacement, flushes[0].written, "whole when flushed")
	require.Equal(t, old, flushes[0].atKey, "flushed before the rename")
	require.Equal(t, replacement, get(t, d, "a/f.bin"))

	syncBeforeRename = func(*os.File) error { return unix.EIO }
	require.Error(t, d.Put(ctx, "a/f.bin", bytes.NewReader(old), int64(len(old))), "a failed flush fails the Put")
	require.Equal(t, replacement, get(t, d, "a/f.bin"), "and replaces nothing")
	entries, err := os.ReadDir(filepath.Join(dir, "a"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
}

// TestFilesystemCreate: Create writes a new file, making its folders, and
// touches nothing that is already at its key: a file, a folder, or a
// symlink (whose destination stays as it was).
func TestFilesystemCreate(t *testing.T) {
	dir := t.TempDir()
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, d.Create(ctx, "refs/abc/r1", []byte("marker")))
	require.Equal(t, []byte("marker"), get(t, d, "refs/abc/r1"))

	require.Error(t, d.Create(ctx, "refs/abc/r1", []byte("other")))
	require.Equal(t, []byte("marker"), get(t, d, "refs/abc/r1"))

	require.NoError(t, os.Mkdir(filepath.Join(dir, "refs", "abc", "dir"), 0o755))
	require.Error(t, d.Create(ctx, "refs/abc/dir", []byte("other")))

	outside := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(outside, []byte("keep"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "refs", "abc", "link")))
	require.Error(t, d.Create(ctx, "refs/abc/link", []byte("other")))
	got, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, []byte("keep"), got)

	require.ErrorIs(t, d.Create(ctx, "../escape", nil), ErrInvalidKey)

	// A key's folders are made when missing, by Create and Put alike; a
	// file where a folder should be fails the write and stays as it was.
	require.NoError(t, d.Create(ctx, "refs/new/deeper/r2", []byte("m2")))
	require.Equal(t, []byte("m2"), get(t, d, "refs/new/deeper/r2"))
	require.NoError(t, d.Put(ctx, "objects/new/deeper/o", strings.NewReader("content"), 7))
	require.Equal(t, []byte("content"), get(t, d, "objects/new/deeper/o"))
	require.Error(t, d.Create(ctx, "refs/abc/r1/under", []byte("other")))
	require.Error(t, d.Put(ctx, "refs/abc/r1/under", strings.NewReader("other"), 5))
	require.Equal(t, []byte("marker"), get(t, d, "refs/abc/r1"))
}

// stampedTarget is a filesystem target in a new folder, on a filesystem
// with user xattrs (the test is skipped elsewhere: there no checksum is
// trusted unread, and no stamp relied on).
func stampedTarget(t *testing.T) (string, *Filesystem) {
	t.Helper()
	dir := t.TempDir()
	if !userXattrs(t, dir) {
		t.Skip("no user xattrs on this filesystem: no checksum is trusted unread")
	}
	d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	return dir, d
}

// unflushedObject is Stat's Unflushed of the object at key, which must
// have a checksum attribute.
func unflushedObject(t *testing.T, d *Filesystem, key string) bool {
	t.Helper()
	obj, err := d.Stat(context.Background(), key)
	require.NoError(t, err)
	require.NotEmpty(t, obj.Checksum, key)
	return obj.Unflushed
}

// putFlushed puts content at key and flushes it, past the stamp's tick:
// the object is then trusted.
func putFlushed(t *testing.T, d *Filesystem, key, content string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, d.Put(ctx, key, strings.NewReader(content), int64(len(content))))
	time.Sleep(3 * clockTick)
	require.NoError(t, d.Sync(ctx))
	require.False(t, unflushedObject(t, d, key), "flushed")
}

// TestFilesystemTrustsChecksumsOnlyOnceFlushed: an object's checksum
// attribute is written with its bytes, and a crash before the target is
// flushed can keep the attribute and lose the bytes (a filesystem that
// does not write data first: ext4 without a journal, ext2). Stat reports
// such an object Unflushed until a Sync that began after it ended, also
// to a driver opened afterwards (a restart: it reads the stamp); a flush
// that failed stamps nothing, and the stamps stay out of listings.
func TestFilesystemTrustsChecksumsOnlyOnceFlushed(t *testing.T) {
	ctx := context.Background()
	dir, d := stampedTarget(t)
	require.NoError(t, d.Put(ctx, "a", strings.NewReader("first"), 5))
	require.True(t, unflushedObject(t, d, "a"), "written, not flushed")
	// Timestamps move by clock ticks: an object changed in the tick before
	// its flush began counts as unflushed.
	time.Sleep(3 * clockTick)
	require.NoError(t, d.Sync(ctx))
	require.False(t, unflushedObject(t, d, "a"), "flushed")
	// The stamp holds a time before the flush began, a tick before the
	// time read then, not its own (its atime: read as the flush ended).
	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(dir, flushedStamp), &st))
	require.LessOrEqual(t, st.Mtim.Nano(), st.Atim.Nano()-int64(clockTick))
	leftovers, err := filepath.Glob(filepath.Join(dir, stampPrefix+"-new-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers)
	require.NoError(t, d.Put(ctx, "b", strings.NewReader("second"), 6))
	require.True(t, unflushedObject(t, d, "b"), "written after the flush")

	restarted, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	require.False(t, unflushedObject(t, restarted, "a"), "the stamp tells a new driver")
	require.True(t, unflushedObject(t, restarted, "b"))

	real := syncFS
	t.Cleanup(func() { syncFS = real })
	syncFS = func(*os.File) error { return unix.EIO }
	require.Error(t, d.Sync(ctx))
	again, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	require.True(t, unflushedObject(t, again, "b"), "a failed flush stamps nothing")
	require.True(t, unflushedObject(t, d, "b"))
	syncFS = real

	objs, _, err := d.List(ctx, "", "", 100)
	require.NoError(t, err)
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	require.Equal(t, []string{"a", "b"}, keys, "the stamps are not objects")
}

// TestClockSteppedBackTrustsNothing: objects take their ctimes from the
// clock, which may be stepped back after a flush was stamped (a clock
// set right at boot, by hand): an object written then has a ctime before
// the stamp, though no flush has covered it. Put lowers the stamp before
// the object has a name, so that it is reported Unflushed, also after a
// restart (a crash right after the Put), until a flush after it is
// stamped. Stepping the clock itself is not done here: the stamp is set
// an hour ahead, which is what the target sees.
func TestClockSteppedBackTrustsNothing(t *testing.T) {
	ctx := context.Background()
	dir, d := stampedTarget(t)
	putFlushed(t, d, "a", "first")

	stamp := filepath.Join(dir, flushedStamp)
	ahead := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(stamp, ahead, ahead))
	require.False(t, unflushedObject(t, d, "a"))
	other, err := NewFilesystem(Config{MigrationTargetFolder: dir}) // another process
	require.NoError(t, err)
	require.False(t, unflushedObject(t, other, "a"))

	require.NoError(t, d.Put(ctx, "b", strings.NewReader("second"), 6))
	require.True(t, unflushedObject(t, d, "b"), "written after the clock went back")
	require.True(t, unflushedObject(t, other, "b"), "the stamp lowered by another process")
	restarted, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	require.True(t, unflushedObject(t, restarted, "b"), "the lowered stamp is on disk")

	time.Sleep(3 * clockTick)
	require.NoError(t, d.Sync(ctx))
	require.False(t, unflushedObject(t, d, "b"), "a flush after it is stamped")
	require.False(t, unflushedObject(t, d, "a"))

	// The clock stepped back an hour while a flush ran, and an object
	// was written after the flush had begun: the stamp names the flush's
	// start by the clock's later reading.
	realSync, realClock := syncFS, readClock
	t.Cleanup(func() { syncFS, readClock = realSync, realClock })
	readClock = func(name string) (time.Time, error) {
		now, err := realClock(name)
		return now.Add(time.Hour), err // before the step
	}
	syncFS = func(dir *os.File) error {
		err := realSync(dir)
		readClock = realClock // the step
		require.NoError(t, d.Put(ctx, "c", strings.NewReader("third"), 5))
		return err
	}
	time.Sleep(stampEvery)
	require.NoError(t, d.Sync(ctx))
	require.True(t, unflushedObject(t, d, "c"), "written during a flush the clock went back in")
	require.False(t, unflushedObject(t, d, "b"))
}

// TestFlushStampsOfTwoProcesses: two drivers on one target (two workers,
// two sites) write and flush at once, stamping the same file. At every
// instant the stamp names a flush that had begun (its mtime no later than
// the start of a flush that ended), whichever driver stamped last; and
// once both are done, a flush of either, stamped, covers what both wrote.
func TestFlushStampsOfTwoProcesses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if !userXattrs(t, dir) {
		t.Skip("no user xattrs on this filesystem: no checksum is trusted unread")
	}
	var ended atomic.Int64 // the latest start of a flush that ended
	real := syncFS
	t.Cleanup(func() { syncFS = real })
	syncFS = func(d *os.File) error {
		start := time.Now().UnixNano()
		err := real(d)
		for cur := ended.Load(); err == nil && start > cur && !ended.CompareAndSwap(cur, start); cur = ended.Load() {
		}
		return err
	}
	drivers := make([]*Filesystem, 2)
	for i := range drivers {
		d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
		require.NoError(t, err)
		drivers[i] = d
	}
	stop := make(chan struct{})
	var checks atomic.Int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			fi, err := os.Stat(filepath.Join(dir, flushedStamp))
			if err != nil {
				continue
			}
			if stamped := fi.ModTime().UnixNano(); stamped > 0 {
				assert.LessOrEqual(t, stamped, ended.Load(), "the stamp names a flush that had not ended")
				checks.Add(1)
			}
		}
	}()
	var wg sync.WaitGroup
	for i, d := range drivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 4 {
				key := fmt.Sprintf("d%d-%d", i, n)
				assert.NoError(t, d.Put(ctx, key, strings.NewReader(key), int64(len(key))))
				assert.NoError(t, d.Sync(ctx))
				time.Sleep(stampEvery / 2)
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	require.Positive(t, checks.Load())

	time.Sleep(stampEvery)
	require.NoError(t, drivers[0].Sync(ctx))
	for i := range drivers {
		for n := range 4 {
			obj, err := drivers[1].Stat(ctx, fmt.Sprintf("d%d-%d", i, n))
			require.NoError(t, err)
			require.False(t, obj.Unflushed, "d%d-%d", i, n)
		}
	}
}

// TestPowerCutTrustsNothingWrittenBefore: an object written after the
// last stamped flush, and not flushed when the power was cut, may come
// back with its attribute and without its bytes. The first flush after
// the reboot stamped a time after it, and it was trusted unread. Now
// that flush first records the window from the last stamp to the boot,
// and an object changed in it stays Unflushed, also to a driver opened
// afterwards; one written after the boot is trusted once flushed. (The
// power cut is played by a boot of another id that began after the
// object was written.)
func TestPowerCutTrustsNothingWrittenBefore(t *testing.T) {
	ctx := context.Background()
	dir, d := stampedTarget(t)
	putFlushed(t, d, "a", "flushed")
	require.NoError(t, d.Put(ctx, "x", strings.NewReader("cut"), 3))
	require.True(t, unflushedObject(t, d, "x"))

	real := thisBoot
	t.Cleanup(func() { thisBoot = real })
	rebooted := boot{id: "the-boot-after-the-cut", at: time.Now().Add(clockTick).UnixNano()}
	thisBoot = func() boot { return rebooted }
	time.Sleep(stampEvery)
	require.NoError(t, d.Put(ctx, "y", strings.NewReader("after"), 5))
	time.Sleep(3 * clockTick)
	require.NoError(t, d.Sync(ctx))
	restarted, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	for _, d := range []*Filesystem{d, restarted} {
		require.True(t, unflushedObject(t, d, "x"), "written before the cut, after the last stamp")
		require.False(t, unflushedObject(t, d, "a"), "stamped before the cut")
		require.False(t, unflushedObject(t, d, "y"), "written and flushed after the boot")
	}
	// A later boot keeps the window.
	thisBoot = func() boot { return boot{id: "a-boot-after-that", at: time.Now().UnixNano()} }
	time.Sleep(stampEvery)
	require.NoError(t, d.Sync(ctx))
	require.True(t, unflushedObject(t, d, "x"))
}

// TestNetworkTargetTrustsOnlyWhatIsOnDisk: a target on NFS written by a
// worker on the server's host (local writes, flushed and stamped there)
// and by workers on clients. A client's flush does not reach the server's
// cache, so it never stamps, and another host's object it has not seen
// stamped is NotDurable (to be written again, not read back from that
// cache). Its own objects are flushed before they are named, which their
// attribute says: trusted at once, by every host.
func TestNetworkTargetTrustsOnlyWhatIsOnDisk(t *testing.T) {
	ctx := context.Background()
	dir, server := stampedTarget(t)
	putFlushed(t, server, "old", "flushed and stamped on the server's host")
	time.Sleep(stampEvery)
	require.NoError(t, server.Put(ctx, "a", strings.NewReader("not flushed yet"), 15))

	real := networkFS
	t.Cleanup(func() { networkFS = real })
	networkFS = func(string) bool { return true }
	client, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	stat := func(d *Filesystem, key string) Object {
		t.Helper()
		o, err := d.Stat(ctx, key)
		require.NoError(t, err)
		require.NotEmpty(t, o.Checksum, key)
		return o
	}
	require.True(t, stat(client, "a").NotDurable, "another host's unflushed object")
	require.False(t, stat(server, "a").NotDurable, "its own host flushes it")
	require.False(t, stat(client, "old").Unflushed)

	require.NoError(t, client.Put(ctx, "b", strings.NewReader("the client's"), 12))
	for _, d := range []*Filesystem{client, server} {
		o := stat(d, "b")
		require.False(t, o.Unflushed || o.NotDurable, "flushed before it was named")
	}

	stamp := filepath.Join(dir, flushedStamp)
	before, err := os.Stat(stamp)
	require.NoError(t, err)
	require.NoError(t, client.Sync(ctx))
	after, err := os.Stat(stamp)
	require.NoError(t, err)
	require.Equal(t, before.ModTime(), after.ModTime(), "a client's flush does not stamp")
	require.True(t, stat(client, "a").NotDurable)

	time.Sleep(3 * clockTick)
	require.NoError(t, server.Sync(ctx))
	require.False(t, stat(client, "a").Unflushed, "stamped by the server's host")
}

// TestFailedFlushDistrustsFromWhereItsDriverBegan: an object's writeback
// fails, another process's flush (which did not hear of it) stamps a time
// after the object, and then the writer's own flush fails. The window it
// records reaches back to the stamp its driver found, not only to the
// last one, which came after the object: the object stays distrusted.
func TestFailedFlushDistrustsFromWhereItsDriverBegan(t *testing.T) {
	ctx := context.Background()
	dir, _ := stampedTarget(t)
	first, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	putFlushed(t, first, "old", "flushed")
	writer, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	time.Sleep(stampEvery)
	require.NoError(t, writer.Put(ctx, "x", strings.NewReader("lost on the way"), 15))

	other, err := NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	time.Sleep(3 * clockTick)
	require.NoError(t, other.Sync(ctx))
	require.False(t, unflushedObject(t, other, "x"), "stamped by a flush that heard nothing")

	real := syncFS
	t.Cleanup(func() { syncFS = real })
	syncFS = func(*os.File) error { return unix.EIO }
	require.Error(t, writer.Sync(ctx))
	syncFS = real
	require.True(t, unflushedObject(t, other, "x"), "the writer's failed flush distrusts it")
	require.False(t, unflushedObject(t, other, "old"), "flushed before the writer's driver was made")
}
