package site

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// scrubCase is a target on which content can be damaged behind the
// driver's back while the target keeps reporting the checksum it was
// written with: bit rot on a filesystem target (bytes changed, size and
// mtime kept), or an S3 object an earlier version labelled with the
// checksum its file had before it changed during the upload.
type scrubCase struct {
	target  targets.Driver
	corrupt func(t *testing.T, key string, data []byte)
}

func scrubCases(t *testing.T) map[string]func(t *testing.T) scrubCase {
	return map[string]func(t *testing.T) scrubCase{
		"filesystem": func(t *testing.T) scrubCase {
			tdir := t.TempDir()
			d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
			require.NoError(t, err)
			return scrubCase{target: d, corrupt: func(t *testing.T, key string, data []byte) {
				p := filepath.Join(tdir, filepath.FromSlash(key))
				fi, err := os.Stat(p)
				require.NoError(t, err)
				require.NoError(t, os.Chmod(p, 0o600))
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.WriteAt(data, 0)
				require.NoError(t, err)
				require.NoError(t, f.Close())
				require.NoError(t, os.Chmod(p, fi.Mode().Perm()))
				require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
			}}
		},
		"s3": func(t *testing.T) scrubCase {
			d, backend := s3TargetAndBackend(t)
			return scrubCase{target: d, corrupt: func(t *testing.T, key string, data []byte) {
				obj, err := backend.HeadObject("hub", key)
				require.NoError(t, err)
				_, err = backend.PutObject("hub", key, obj.Metadata, bytes.NewReader(data), int64(len(data)), nil)
				require.NoError(t, err)
			}}
		},
	}
}

func sumOf(data string) string {
	s := sha256.Sum256([]byte(data))
	return hex.EncodeToString(s[:])
}

// TestScrubQuarantinesBadContent: content whose bytes no longer hash to
// its name, while the target still reports its checksum, is trusted by
// every step: a migrate of another file with that content is released
// onto it. A scrub reads it, reports it, and with --quarantine moves it
// aside (kept in quarantine/), so the next migrate of that content
// uploads it again and its recall is byte-identical. Good content and
// the trash are read too; good content is left alone.
func TestScrubQuarantinesBadContent(t *testing.T) {
	t.Parallel()
	for name, mk := range scrubCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := mk(t)
			dir := t.TempDir()
			root := newRoot(t, dir, false)
			const data, other = "the content that rots", "content that stays fine"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte(data), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.txt"), []byte(other), 0o644))
			res, err := Migrate(ctx, root, []string{"/a.txt", "/ok.txt"}, c.target, "archive", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/a.txt", "/ok.txt"})
			bad := strings.Repeat("X", len(data))
			c.corrupt(t, contentKey(sumOf(data)), []byte(bad))
			obj, err := c.target.Stat(ctx, contentKey(sumOf(data)))
			require.NoError(t, err)
			require.Equal(t, sumOf(data), obj.Checksum, "the target still vouches for the damaged content")
			// Damaged content in the trash, too.
			const trashed = "content in the trash"
			require.NoError(t, c.target.Put(ctx, trashKey(sumOf(trashed)), strings.NewReader(strings.ToUpper(trashed)), int64(len(trashed))))

			got, err := Scrub(ctx, c.target, ScrubOptions{})
			require.NoError(t, err)
			require.Equal(t, 3, got.Objects)
			require.Len(t, got.Bad, 2, "%+v", got)
			require.Equal(t, contentKey(sumOf(data)), got.Bad[0].Key)
			require.Equal(t, sumOf(bad), got.Bad[0].SHA256)
			require.Empty(t, got.Bad[0].Quarantined, "only reported")
			require.Equal(t, trashKey(sumOf(trashed)), got.Bad[1].Key)

			got, err = Scrub(ctx, c.target, ScrubOptions{Quarantine: true})
			require.NoError(t, err)
			require.Len(t, got.Bad, 2, "%+v", got)
			for _, b := range got.Bad {
				require.True(t, strings.HasPrefix(b.Quarantined, quarantineDir), "%+v", b)
				_, err := c.target.Stat(ctx, b.Key)
				require.ErrorIs(t, err, targets.ErrNotFound, "%s is no longer where steps look", b.Key)
			}
			requireObject(t, c.target, got.Bad[0].Quarantined, bad)
			got, err = Scrub(ctx, c.target, ScrubOptions{})
			require.NoError(t, err)
			require.Empty(t, got.Bad)
			require.Equal(t, 1, got.Objects)

			// The same content migrated again is uploaded again.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b.txt"), []byte(data), 0o644))
			res, err = Migrate(ctx, root, []string{"/b.txt"}, c.target, "archive", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/b.txt"})
			res, err = Recall(ctx, root, []string{"/b.txt", "/ok.txt"}, only("archive", c.target), StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/b.txt", "/ok.txt"})
			for p, want := range map[string]string{"b.txt": data, "ok.txt": other} {
				b, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err)
				require.Equal(t, want, string(b), p)
			}
		})
	}
}

func requireObject(t *testing.T, d targets.Driver, key, want string) {
	t.Helper()
	rc, err := d.Get(context.Background(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.Equal(t, want, string(b), key)
}

// rewriteDriver uploads the good content again the moment a scrub starts
// copying the bad one to the quarantine, as a step that found the content
// missing or wrong would.
type rewriteDriver struct {
	targets.Driver
	key, good string
}

func (r *rewriteDriver) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if strings.HasPrefix(key, quarantineDir) {
		if err := r.Driver.Put(ctx, r.key, strings.NewReader(r.good), int64(len(r.good))); err != nil {
			return err
		}
	}
	return r.Driver.Put(ctx, key, body, size)
}

// TestScrubLeavesContentUploadedAgain: content uploaded again between the
// scrub's read and its quarantine is the good content: it is left in
// place. Without the check before the deletion, the scrub deleted it.
func TestScrubLeavesContentUploadedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tdir := t.TempDir()
	d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	const good = "good content"
	key := contentKey(sumOf(good))
	require.NoError(t, d.Put(ctx, key, strings.NewReader("BAD CONTENT!"), int64(len(good))))
	got, err := Scrub(ctx, &rewriteDriver{Driver: d, key: key, good: good}, ScrubOptions{Quarantine: true})
	require.NoError(t, err)
	require.Len(t, got.Bad, 1)
	require.Contains(t, got.Bad[0].Note, "rewritten since it was read")
	requireObject(t, d, key, good)
}

// TestScrubChild is the process TestKillScrubbing kills.
func TestScrubChild(t *testing.T) {
	tdir := os.Getenv("HUB_SCRUB_CHILD_TARGET")
	if tdir == "" {
		return
	}
	d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	_, err = Scrub(context.Background(), d, ScrubOptions{Quarantine: true})
	require.NoError(t, err)
}

// TestKillScrubbing kills a quarantining scrub at each of its fault
// points and runs it again: the bad content is out of objects/ and kept
// (once or twice) in quarantine/, and the good content is untouched.
func TestKillScrubbing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const good = "good content"
	bad := "a damaged content"
	setup := func(t *testing.T) (string, targets.Driver) {
		tdir := t.TempDir()
		d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
		require.NoError(t, err)
		require.NoError(t, d.Put(ctx, contentKey(sumOf(good)), strings.NewReader(good), int64(len(good))))
		require.NoError(t, d.Put(ctx, contentKey(sumOf("damaged content")), strings.NewReader(bad), int64(len(bad))))
		return tdir, d
	}
	tdir, _ := setup(t)
	trace := filepath.Join(t.TempDir(), "trace")
	require.False(t, runChild(t, "^TestScrubChild$", "HUB_SCRUB_CHILD_TARGET="+tdir, "HUB_FAULT_TRACE="+trace))
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	points := strings.Fields(string(b))
	require.Contains(t, points, "scrub.copied@1")
	require.Contains(t, points, "pinned.renamed@1")
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			tdir, d := setup(t)
			require.True(t, runChild(t, "^TestScrubChild$", "HUB_SCRUB_CHILD_TARGET="+tdir, "HUB_FAULT_POINT="+point), "killed at %s", point)
			require.False(t, runChild(t, "^TestScrubChild$", "HUB_SCRUB_CHILD_TARGET="+tdir), "the rerun")
			requireObject(t, d, contentKey(sumOf(good)), good)
			_, err := d.Stat(ctx, contentKey(sumOf("damaged content")))
			require.ErrorIs(t, err, targets.ErrNotFound)
			var kept int
			err = eachObject(ctx, d, quarantineDir, func(o targets.Object) error {
				requireObject(t, d, o.Key, bad)
				kept++
				return nil
			})
			require.NoError(t, err)
			require.NotZero(t, kept)
		})
	}
}

// TestScrubPutsBackGoodContentLeftInQuarantine: a scrub killed between
// MovePinned's two renames leaves a good upload (one a step released its
// file onto) in quarantine/ and its key empty. The stub still recalls,
// from that copy; a scrub lists the copy as misplaced and with quarantine
// puts it back, checked, and leaves bad bytes in quarantine/ where they
// are.
func TestScrubPutsBackGoodContentLeftInQuarantine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tdir := t.TempDir()
	d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	dir := t.TempDir()
	root := newRoot(t, dir, false)
	const data = "content a scrub moved to quarantine by mistake"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte(data), 0o644))
	res, err := Migrate(ctx, root, []string{"/f.txt"}, d, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	sum, key := sumOf(data), contentKey(sumOf(data))
	left := fmt.Sprintf("%s%s.%d", quarantineDir, sum, time.Now().UnixNano())
	require.NoError(t, os.MkdirAll(filepath.Join(tdir, quarantineDir), 0o755))
	require.NoError(t, os.Rename(filepath.Join(tdir, filepath.FromSlash(key)), filepath.Join(tdir, filepath.FromSlash(left))))
	rotten := sumOf("other content")
	badLeft := fmt.Sprintf("%s%s.%d", quarantineDir, rotten, time.Now().UnixNano())
	require.NoError(t, d.Put(ctx, badLeft, strings.NewReader("rotten bytes"), 12))

	res, err = Recall(ctx, root, []string{"/f.txt"}, only("archive", d), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	b, err := os.ReadFile(filepath.Join(dir, "f.txt"))
	require.NoError(t, err)
	require.Equal(t, data, string(b))

	got, err := Scrub(ctx, d, ScrubOptions{})
	require.NoError(t, err)
	require.Equal(t, []Misplaced{{Quarantined: left, Key: key}}, got.Misplaced)
	_, err = d.Stat(ctx, key)
	require.ErrorIs(t, err, targets.ErrNotFound, "a scrub without quarantine changes nothing")

	got, err = Scrub(ctx, d, ScrubOptions{Quarantine: true})
	require.NoError(t, err)
	require.Equal(t, []Misplaced{{Quarantined: left, Key: key, Restored: true}}, got.Misplaced)
	require.Empty(t, got.Bad)
	requireObject(t, d, key, data)
	requireObject(t, d, left, data)
	requireObject(t, d, badLeft, "rotten bytes")
	_, err = d.Stat(ctx, contentKey(rotten))
	require.ErrorIs(t, err, targets.ErrNotFound)

	got, err = Scrub(ctx, d, ScrubOptions{Quarantine: true})
	require.NoError(t, err)
	require.Empty(t, got.Misplaced)
}
