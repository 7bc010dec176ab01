package site

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// TestAuditRefs: files migrated, one stub removed by hand: the audit
// lists exactly that stub's reference (once it is old enough), not the
// others' nor those of another site sharing the target; --drop removes
// it, the collector then frees its content, and the other stubs still
// recall byte-identical.
func TestAuditRefs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := fsTarget(t)
	tf := only("archive", target)
	drivers := map[string]targets.Driver{"archive": target}

	dir := t.TempDir()
	files := map[string]string{"/a.txt": "first file", "/sub/b.txt": "second file", "/sub/c.txt": "third file, the one removed"}
	for p, data := range files {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
	}
	root := newRoot(t, dir, false)
	paths := []string{"/a.txt", "/sub/b.txt", "/sub/c.txt"}
	res, err := Migrate(ctx, root, paths, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	_, removed, err := root.Stat("/sub/c.txt")
	require.NoError(t, err)

	// Another site holds a stub of the same content as the removed file
	// (and so its own reference to it), and one of its own.
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "same.txt"), []byte(files["/sub/c.txt"]), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "own.txt"), []byte("the other site's"), 0o644))
	otherRoot := newRoot(t, other, false)
	res, err = Migrate(ctx, otherRoot, []string{"/same.txt", "/own.txt"}, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/same.txt", "/own.txt"})
	require.NoError(t, os.Remove(filepath.Join(other, "own.txt"))) // leaked, but not ours to drop

	require.NoError(t, os.Remove(filepath.Join(dir, "sub", "c.txt")))

	// Just removed: the reference may be a migrate in flight, too young.
	ar, err := AuditRefs(ctx, root, drivers, AuditOptions{})
	require.NoError(t, err)
	require.Equal(t, AuditResult{Records: 2, Refs: 5, Ours: 3, Young: 1, Leaked: []LeakedRef{}, UnreadablePaths: []string{}}, ar)

	later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
	ar, err = AuditRefs(ctx, root, drivers, AuditOptions{Now: later})
	require.NoError(t, err)
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	want := refKey(removed.Checksum, removed.Ref)
	require.Equal(t, want, ar.Leaked[0].Key)
	require.Equal(t, "/sub/c.txt", ar.Leaked[0].Path)
	require.Equal(t, "archive", ar.Leaked[0].Target)
	require.False(t, ar.Leaked[0].Dropped)
	require.Equal(t, 5, countRefs(t, target), "listing drops nothing")

	ar, err = AuditRefs(ctx, root, drivers, AuditOptions{Now: later, Drop: true})
	require.NoError(t, err)
	require.Len(t, ar.Leaked, 1)
	require.True(t, ar.Leaked[0].Dropped)
	require.Equal(t, 4, countRefs(t, target))
	_, err = target.Stat(ctx, want)
	require.ErrorIs(t, err, targets.ErrNotFound)

	ar, err = AuditRefs(ctx, root, drivers, AuditOptions{Now: later})
	require.NoError(t, err)
	require.Empty(t, ar.Leaked, "nothing left to drop")

	// The content stays: the other site's stub still refers to it.
	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	require.Zero(t, cr.Trashed+cr.Deleted, "%+v", cr)

	for _, p := range []string{"/a.txt", "/sub/b.txt"} {
		res, err := Recall(ctx, root, []string{p}, tf, StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{p})
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		require.NoError(t, err)
		require.Equal(t, files[p], string(got), p)
	}
	res, err = Recall(ctx, otherRoot, []string{"/same.txt"}, tf, StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/same.txt"})
	got, err := os.ReadFile(filepath.Join(other, "same.txt"))
	require.NoError(t, err)
	require.Equal(t, files["/sub/c.txt"], string(got))
}

// TestAuditRefsSparesUnownedAndMoved: a reference written before owners
// were recorded is never reported, and a file moved elsewhere in the
// tree keeps its reference.
func TestAuditRefsSparesUnownedAndMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := fsTarget(t)
	drivers := map[string]targets.Driver{"archive": target}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte("data"), 0o644))
	root := newRoot(t, dir, false)
	res, err := Migrate(ctx, root, []string{"/f.txt"}, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "elsewhere"), 0o755))
	require.NoError(t, os.Rename(filepath.Join(dir, "f.txt"), filepath.Join(dir, "elsewhere", "f.txt")))
	legacy := `{"path":"/gone.txt","ino":1,"created":"2020-01-01T00:00:00Z"}`
	require.NoError(t, target.Put(ctx, refKey(strings.Repeat("ab", 32), "0123"), strings.NewReader(legacy), int64(len(legacy))))

	later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
	ar, err := AuditRefs(ctx, root, drivers, AuditOptions{Now: later, Drop: true})
	require.NoError(t, err)
	require.Equal(t, AuditResult{Records: 1, Refs: 2, Ours: 1, Unowned: 1, Leaked: []LeakedRef{}, UnreadablePaths: []string{}}, ar)
	require.Equal(t, 2, countRefs(t, target))
}

// TestTornRefMarker: a reference marker is created in place, so a crash
// between its creation and its write leaves it empty or cut short. Such a
// marker still keeps its content (an audit counts it unowned and never
// drops it), and the step's retry replaces it with a whole one.
func TestTornRefMarker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tdir := t.TempDir()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	drivers := map[string]targets.Driver{"archive": target}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte("data"), 0o644))
	root := newRoot(t, dir, false)
	res, err := Premigrate(ctx, root, []string{"/f.txt"}, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	var marker string
	require.NoError(t, eachObject(ctx, target, refsDir, func(o targets.Object) error { marker = o.Key; return nil }))
	abs := filepath.Join(tdir, filepath.FromSlash(marker))
	whole, err := os.ReadFile(abs)
	require.NoError(t, err)
	away := filepath.Join(t.TempDir(), "f.txt") // outside the site

	for _, torn := range []int{0, len(whole) / 2} {
		require.NoError(t, os.Truncate(abs, int64(torn)))
		// Audited as it is, the torn marker is unowned and stays, even
		// with its record gone (the file was moved off the site) and past the age limit.
		require.NoError(t, os.Rename(filepath.Join(dir, "f.txt"), away))
		later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
		ar, err := AuditRefs(ctx, root, drivers, AuditOptions{Now: later, Drop: true})
		require.NoError(t, err)
		require.Equal(t, AuditResult{Refs: 1, Unowned: 1, Leaked: []LeakedRef{}, UnreadablePaths: []string{}}, ar)
		require.Equal(t, 1, countRefs(t, target))
		require.NoError(t, os.Rename(away, filepath.Join(dir, "f.txt")))

		// The retried upload writes the marker again, whole.
		res, err = Premigrate(ctx, root, []string{"/f.txt"}, target, "archive", StepOptions{Overwrite: true})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{"/f.txt"})
		got, err := os.ReadFile(abs)
		require.NoError(t, err)
		// Written first in a shared body (its line names the marker),
		// again in a body of its own.
		sum, ref, _ := parseRefKey(marker)
		before, after := findRefBody(whole, sum, ref), findRefBody(got, sum, ref)
		require.Equal(t, [2]string{sum, ref}, [2]string{before.Sum, before.Ref})
		require.NotEmpty(t, after.Owner)
		after.Created, after.Sum, after.Ref = before.Created, before.Sum, before.Ref
		require.Equal(t, before, after)
	}
}

// TestAuditDropsNothingWhileARecordIsUnreadable: a stub whose record its
// owner overwrote with garbage names a reference nobody can read. The
// audit lists its reference as leaked (as it does the stub removed by
// hand) and counts the file unreadable; --drop then drops nothing (the
// content stays through a collection), and once the record is repaired
// it drops only the removed stub's reference and the stub recalls.
func TestAuditDropsNothingWhileARecordIsUnreadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := fsTarget(t)
	drivers := map[string]targets.Driver{"archive": target}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kept.txt"), []byte("data of the stub whose record is garbage"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gone.txt"), []byte("data of the stub removed by hand"), 0o644))
	root := newRoot(t, dir, false)
	paths := []string{"/kept.txt", "/gone.txt"}
	res, err := Migrate(ctx, root, paths, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	kept := filepath.Join(dir, "kept.txt")
	good, err := lgetxattr(kept, recordXattr)
	require.NoError(t, err)
	require.NoError(t, lsetxattr(kept, recordXattr, []byte("not a record")))
	require.NoError(t, os.Remove(filepath.Join(dir, "gone.txt")))

	later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
	ar, err := AuditRefs(ctx, root, drivers, AuditOptions{Now: later})
	require.NoError(t, err)
	require.Len(t, ar.Leaked, 2, "%+v", ar)
	require.Equal(t, 1, ar.Unreadable)
	require.Equal(t, []string{"/kept.txt"}, ar.UnreadablePaths)

	ar, err = AuditRefs(ctx, root, drivers, AuditOptions{Now: later, Drop: true})
	require.ErrorIs(t, err, ErrUnreadableRecords)
	require.Equal(t, 1, ar.Unreadable)
	for _, l := range ar.Leaked {
		require.False(t, l.Dropped, l.Key)
	}
	require.Equal(t, 2, countRefs(t, target), "nothing dropped")
	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	require.Zero(t, cr.Trashed+cr.Deleted, "%+v", cr)

	require.NoError(t, lsetxattr(kept, recordXattr, good))
	ar, err = AuditRefs(ctx, root, drivers, AuditOptions{Now: later, Drop: true})
	require.NoError(t, err)
	require.Zero(t, ar.Unreadable)
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	require.Equal(t, "/gone.txt", ar.Leaked[0].Path)
	require.True(t, ar.Leaked[0].Dropped)
	res, err = Recall(ctx, root, []string{"/kept.txt"}, only("archive", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/kept.txt"})
	got, err := os.ReadFile(kept)
	require.NoError(t, err)
	require.Equal(t, "data of the stub whose record is garbage", string(got))
}
