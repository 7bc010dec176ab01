package site

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/targets"
)

// TestAuditKeepsAStubMovedOnAnIndexSite: on a site keeping records in the
// state index (by path), a user moves a stub with mv; its record stays at
// the old path. The audit walked only the files, found no record naming
// the reference, and dropped it; the collector deleted the content, and
// the stub moved back (its record whole) no longer recalled (a reviewer's
// finding). An index record now counts while a file of its inode exists;
// a stub deleted for good still has its reference reported and dropped.
func TestAuditKeepsAStubMovedOnAnIndexSite(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), true)
	files := map[string]string{"f.txt": "the only copy of this data", "g.txt": "deleted for good"}
	s.migrateFiles(t, "d", files)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "e"), 0o755))
	require.NoError(t, os.Rename(filepath.Join(dir, "d", "f.txt"), filepath.Join(dir, "e", "f.txt")))
	require.NoError(t, os.Remove(filepath.Join(dir, "d", "g.txt")))

	ar := s.dropLeakedAndCollect(t)
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	require.Equal(t, "/d/g.txt", ar.Leaked[0].Path)
	require.True(t, ar.Leaked[0].Dropped)

	require.NoError(t, os.Rename(filepath.Join(dir, "e", "f.txt"), filepath.Join(dir, "d", "f.txt")))
	s.requireRecalled(t, "d", map[string]string{"f.txt": files["f.txt"]})
}

// TestAuditKeepsReferencesOfAVolumeNotMounted: stubs on a volume mounted
// beneath the root; the volume is not mounted while the audit runs (an
// automount, a disk offline). Its folder looked empty, every reference of
// its stubs leaked, and they were dropped: once the volume was back,
// none recalled (a reviewer's finding). A marker names the folder the
// volume is mounted at; a reference of a volume not mounted there is
// kept, and says why. Another volume mounted beneath the root meanwhile,
// which may take the first one's device number (as the kernel gives
// freed numbers to the next mount), changes nothing (a reviewer's
// finding against markers naming the device).
func TestAuditKeepsReferencesOfAVolumeNotMounted(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	// A filesystem of its own (a tmpfs), mounted beneath the root through
	// a bind mount that can go and come back with its files.
	vol := mountTmpfs(t, t.TempDir())
	mnt := filepath.Join(dir, "vol")
	bindMount(t, vol, mnt)
	files := map[string]string{"f.txt": "data on the mounted volume"}
	s.migrateFiles(t, "vol", files)

	require.NoError(t, unix.Unmount(mnt, 0))
	other := filepath.Join(dir, "other")
	mountTmpfsAt(t, other)
	require.NoError(t, os.WriteFile(filepath.Join(other, "x"), []byte("x"), 0o644))
	ar := s.dropLeakedAndCollect(t)
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	require.False(t, ar.Leaked[0].Dropped)
	require.Contains(t, ar.Leaked[0].Kept, "none is mounted there now")
	require.NoError(t, unix.Mount(vol, mnt, "", unix.MS_BIND, ""))

	s.requireRecalled(t, "vol", files)
}

// TestAuditDropsTheLeakedReferencesOfAVolumeMountedAgain: a volume
// beneath the root mounted again under another device number (a reboot,
// an NFS remount): the leaked references of its stubs deleted since are
// dropped as any other, and its stubs keep theirs.
func TestAuditDropsTheLeakedReferencesOfAVolumeMountedAgain(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	first := mountTmpfs(t, t.TempDir())
	mnt := filepath.Join(dir, "vol")
	bindMount(t, first, mnt)
	files := map[string]string{"f.txt": "deleted for good", "g.txt": "still a stub"}
	s.migrateFiles(t, "vol", files)
	require.NoError(t, os.Remove(filepath.Join(mnt, "f.txt")))
	before := lstatDev(t, mnt)

	// The same files on a volume of another device number.
	second := mountTmpfs(t, t.TempDir())
	require.NoError(t, exec.Command("cp", "-a", filepath.Join(first, "."), second).Run())
	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, unix.Mount(second, mnt, "", unix.MS_BIND, ""))
	require.NotEqual(t, before, lstatDev(t, mnt))

	ar := s.dropLeakedAndCollect(t)
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	require.Equal(t, "/vol/f.txt", ar.Leaked[0].Path)
	require.True(t, ar.Leaked[0].Dropped, "%+v", ar.Leaked[0])
}

func lstatDev(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return device(fi)
}

// TestAuditFindsARetriedStepsRecordWhereverItIs: a migrate killed long
// ago after writing its reference left no record; the user then renamed
// the file. While the audit drops the old marker, the retried migrate of
// the file at its new path writes the same marker (a reference is named
// by file and content), records it and releases the file. The audit
// looked for a record at the path of the body it read before (the killed
// attempt's), found none, and the drop stood: the stub's content was
// collected (a reviewer's finding). A last walk after the drops finds the
// record wherever it is and puts the reference back.
func TestAuditFindsARetriedStepsRecordWhereverItIs(t *testing.T) {
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	s := newAuditSite(t, dir, tdir, false)
	root, target := s.a.Root, s.target
	data := "data of a file whose first migrate was killed"
	abs := filepath.Join(dir, "a", "f.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
	require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
	fi, err := os.Lstat(abs)
	require.NoError(t, err)
	sum := sumOf(data)
	ref, err := root.refID(fi, birthTime(abs), sum)
	require.NoError(t, err)
	// The killed attempt: its marker, no record, eight days ago.
	require.NoError(t, root.addRef(ctx, target, sum, ref, "a/f.txt", fi))
	old := time.Now().Add(-8 * 24 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(tdir, filepath.FromSlash(refKey(sum, ref))), old, old))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "b"), 0o755))
	require.NoError(t, os.Rename(abs, filepath.Join(dir, "b", "f.txt")))

	ran := false
	hook := &stepHook{Driver: target, onDel: func(key string) {
		if key != refKey(sum, ref) || ran {
			return
		}
		ran = true // the retried migrate, between the audit's look and its delete
		res, err := Migrate(ctx, root, []string{"/b/f.txt"}, target, "archive", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{"/b/f.txt"})
	}}
	ar, err := AuditRefs(ctx, root, map[string]targets.Driver{"archive": hook}, AuditOptions{Drop: true})
	require.NoError(t, err)
	require.True(t, ran, "the race did not happen: %+v", ar)
	require.Len(t, ar.Leaked, 1)
	require.False(t, ar.Leaked[0].Dropped, "put back")
	for range 2 {
		_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
	s.requireRecalled(t, "b", map[string]string{"f.txt": data})
}

// TestANodeThatCannotReadXattrsRefusesTheRoot: records kept in extended
// attributes, and a node of the site that reaches the root through a
// mount without user xattrs (WithIndexState stands in for its probe's
// answer). It saw no record at all: its audit dropped every reference and
// the collector freed the content (a reviewer's finding). It now refuses
// the root.
func TestANodeThatCannotReadXattrsRefusesTheRoot(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	require.True(t, s.a.Root.state.xattr)
	// Opened before any record was kept, the root serves either way.
	other, err := NewRoot(dir, WithIndexState())
	require.NoError(t, err)
	require.Equal(t, "index", other.StateBackend())
	files := map[string]string{"f.txt": "kept in xattrs"}
	s.migrateFiles(t, "d", files)

	_, err = NewRoot(dir, WithIndexState())
	require.ErrorIs(t, err, ErrXattrsUnreadable)
	s.auditAndCollect(t)
	s.requireRecalled(t, "d", files)
}
