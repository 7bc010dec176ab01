package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// TestStepMarkersShareBodies: a premigrate's markers on a filesystem
// target are names of a few shared bodies (hard links), not a file each,
// and every marker still reads as its own: its line names its file and
// proves the site wrote it. An audit drops one leaked marker of a shared
// body and leaves the others, and a body linked under a name it has no
// line for counts as nobody's, so it is never dropped.
func TestStepMarkersShareBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tdir := t.TempDir()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	drivers := map[string]targets.Driver{"archive": target}
	dir := t.TempDir()
	const n = 200
	var paths []string
	for i := range n {
		p := fmt.Sprintf("/f%03d.txt", i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte("content "+p), 0o644))
		paths = append(paths, p)
	}
	root := newRoot(t, dir, false)
	res, err := Premigrate(ctx, root, paths, target, "archive", StepOptions{Workers: 2})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)

	// Each marker's body, read through its own name.
	inodes := map[uint64]uint64{} // inode -> links
	byPath := map[string]string{} // file -> its marker's key
	require.NoError(t, eachObject(ctx, target, refsDir, func(o targets.Object) error {
		fi, err := os.Stat(filepath.Join(tdir, filepath.FromSlash(o.Key)))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		inodes[st.Ino] = uint64(st.Nlink)
		sum, ref, ok := parseRefKey(o.Key)
		require.True(t, ok, o.Key)
		body, err := readRefBody(ctx, target, o.Key)
		require.NoError(t, err)
		owner, err := root.refOwner(sum, ref)
		require.NoError(t, err)
		require.Equal(t, owner, body.Owner, o.Key)
		rec, err := root.state.get(filepath.Join(dir, filepath.FromSlash(body.Path)), strings.TrimPrefix(body.Path, "/"))
		require.NoError(t, err)
		require.NotNil(t, rec, body.Path)
		require.Equal(t, [2]string{rec.Checksum, rec.Ref}, [2]string{sum, ref}, body.Path)
		byPath[body.Path] = o.Key
		return nil
	}))
	require.Len(t, byPath, n, "one marker per file, each naming its file")
	require.LessOrEqual(t, len(inodes), n/refsPerBody+2, "markers share bodies: %v", inodes)
	for ino, links := range inodes {
		require.LessOrEqual(t, links, uint64(refsPerBody), "inode %d", ino)
	}

	// A body linked under another marker's name it has no line for
	// (someone's copy, or a body edited by hand): nobody's.
	stranger := refKey(strings.Repeat("ab", 32), strings.Repeat("cd", 16))
	require.NoError(t, os.MkdirAll(filepath.Join(tdir, "refs", "ab"), 0o755))
	require.NoError(t, os.Link(filepath.Join(tdir, filepath.FromSlash(byPath["/f000.txt"])), filepath.Join(tdir, filepath.FromSlash(stranger))))

	// One file leaves the site: only its marker is leaked.
	gone := "/f007.txt"
	require.NoError(t, os.Remove(filepath.Join(dir, gone)))
	later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
	ar, err := AuditRefs(ctx, root, drivers, AuditOptions{Now: later, Drop: true})
	require.NoError(t, err)
	require.Equal(t, n+1, ar.Refs)
	require.Equal(t, n, ar.Ours)
	require.Equal(t, 1, ar.Unowned)
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	require.Equal(t, byPath[gone], ar.Leaked[0].Key)
	require.Equal(t, gone, ar.Leaked[0].Path)
	require.True(t, ar.Leaked[0].Dropped)
	require.Equal(t, n, countRefs(t, target), "the others, and the stranger, stay")

	// The markers left read as before; every other file is released
	// onto its marker and recalls byte-identical.
	ar, err = AuditRefs(ctx, root, drivers, AuditOptions{Now: later})
	require.NoError(t, err)
	require.Equal(t, AuditResult{Records: n - 1, Refs: n, Ours: n - 1, Unowned: 1, Leaked: []LeakedRef{}, UnreadablePaths: []string{}}, ar)
	left := slices.DeleteFunc(paths, func(p string) bool { return p == gone })
	res, err = Migrate(ctx, root, left, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, left)
	res, err = Recall(ctx, root, left, only("archive", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, left)
	for _, p := range left {
		got, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		require.Equal(t, "content "+p, string(got))
	}
}

// TestStepMarkersOneByOne: a target that cannot share a body (no unnamed
// files) gets a file per marker, each with a body of its own.
func TestStepMarkersOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tdir := t.TempDir()
	fs, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: tdir})
	require.NoError(t, err)
	target := markersOneByOne{fs}
	dir := t.TempDir()
	paths := []string{"/a.txt", "/b.txt", "/c.txt"}
	for _, p := range paths {
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644))
	}
	root := newRoot(t, dir, false)
	res, err := Premigrate(ctx, root, paths, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	markers := 0
	require.NoError(t, eachObject(ctx, target, refsDir, func(o targets.Object) error {
		fi, err := os.Stat(filepath.Join(tdir, filepath.FromSlash(o.Key)))
		require.NoError(t, err)
		require.EqualValues(t, 1, fi.Sys().(*syscall.Stat_t).Nlink, o.Key)
		body, err := readRefBody(ctx, target, o.Key)
		require.NoError(t, err)
		require.NotEmpty(t, body.Owner)
		require.Empty(t, body.Ref, "a body of its own names no marker")
		markers++
		return nil
	}))
	require.Equal(t, len(paths), markers)
}
