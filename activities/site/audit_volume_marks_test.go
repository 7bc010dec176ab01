package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Markers and what was mounted where (thirty-third session, a reviewer's
// findings: each of these dropped a stub's reference, and the collector
// freed its content).

// TestAuditKeepsStubsOfTheRootsFilesystemUnderAMountedVolume: stubs in a
// folder of the root's own filesystem, then the site's volume (its
// records on it) moved over that folder. The markers named no volume, the
// walks found the site's records there, and the hidden stubs' references
// were dropped. A marker now names the root's own filesystem ("/"), and
// is kept while its folder is on a volume.
func TestAuditKeepsStubsOfTheRootsFilesystemUnderAMountedVolume(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	hidden := map[string]string{"f.txt": "on the root's filesystem, under a folder a volume is mounted over"}
	s.migrateFiles(t, "d/inner", hidden)
	require.Equal(t, "/", markerBodyOf(t, s, "d/inner/f.txt").Vol)
	v := mountTmpfs(t, t.TempDir())
	bindMount(t, v, filepath.Join(dir, "vol"))
	s.migrateFiles(t, "vol", map[string]string{"g.txt": "a stub of the site's volume"})
	require.NoError(t, unix.Unmount(filepath.Join(dir, "vol"), 0))
	inner := filepath.Join(dir, "d", "inner")
	mountOver(t, v, inner, "", unix.MS_BIND, "")

	ar := s.dropLeakedAndCollect(t)
	requireNoneDropped(t, ar)
	require.NoError(t, unix.Unmount(inner, 0))
	s.requireRecalled(t, "d/inner", hidden)
}

// TestAuditKeepsAVolumeAMountHides: a volume at /v/sub, then a folder of
// the root's filesystem holding sub/ with a stub bind-mounted over /v.
// The hidden volume stayed in the mount table, /v/sub/… was taken for it,
// and the site's record found there made it look mounted. Only a mount
// its point's path leads to counts now.
func TestAuditKeepsAVolumeAMountHides(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	bindMount(t, mountTmpfs(t, t.TempDir()), filepath.Join(dir, "v"))
	bindMount(t, mountTmpfs(t, t.TempDir()), filepath.Join(dir, "v", "sub"))
	onSub := map[string]string{"f.txt": "on the volume at /v/sub"}
	s.migrateFiles(t, "v/sub", onSub)
	require.Equal(t, "/v/sub", markerBodyOf(t, s, "v/sub/f.txt").Vol)
	s.migrateFiles(t, "other/sub", map[string]string{"g.txt": "a stub of the root's filesystem"})
	mountOver(t, filepath.Join(dir, "other"), filepath.Join(dir, "v"), "", unix.MS_BIND, "")

	ar := s.dropLeakedAndCollect(t)
	requireNoneDropped(t, ar)
	require.NoError(t, unix.Unmount(filepath.Join(dir, "v"), 0))
	s.requireRecalled(t, "v/sub", onSub)
}

// TestAuditKeepsALegacyMarkerOfAPartOfItsVolume: a marker written before
// markers said what was mounted (vol, no vol_from), and a folder of its
// volume mounted in the volume's place: it is kept while the mount there
// is a folder of a filesystem, not a whole one.
func TestAuditKeepsALegacyMarkerOfAPartOfItsVolume(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	vol := mountTmpfs(t, t.TempDir())
	mnt := filepath.Join(dir, "vol")
	bindMount(t, vol, mnt)
	outside := map[string]string{"g.txt": "outside the part"}
	s.migrateFiles(t, "vol/part", map[string]string{"f.txt": "in the part"})
	s.migrateFiles(t, "vol", outside)
	body := markerBodyOf(t, s, "vol/g.txt")
	rec, err := s.a.Root.state.get(filepath.Join(mnt, "g.txt"), "vol/g.txt")
	require.NoError(t, err)
	body.VolFrom = "" // as written before
	require.NoError(t, putRef(context.Background(), s.target, rec.Checksum, rec.Ref, body))

	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, unix.Mount(filepath.Join(vol, "part"), mnt, "", unix.MS_BIND, ""))
	ar := s.dropLeakedAndCollect(t)
	requireNoneDropped(t, ar)
	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, unix.Mount(vol, mnt, "", unix.MS_BIND, ""))
	s.requireRecalled(t, "vol", outside)

	// The volume whole again: a legacy marker of a stub deleted goes.
	require.NoError(t, os.Remove(filepath.Join(mnt, "g.txt")))
	ar = s.dropLeakedAndCollect(t)
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	require.True(t, ar.Leaked[0].Dropped, "%+v", ar.Leaked[0])
}

// TestAMarkerOfAFileOnADetachedVolumeIsRefused: a volume unmounted lazily
// (umount -l) while a step works on one of its files through its pinned
// folder: the file's path beneath the root leads nowhere, and the marker
// named no volume (an audit then dropped it while the volume was down). A
// step's marker of a file on a filesystem not mounted beneath the root
// fails.
func TestAMarkerOfAFileOnADetachedVolumeIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	mnt := filepath.Join(dir, "vol")
	bindMount(t, mountTmpfs(t, t.TempDir()), mnt)
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "f.txt"), []byte("on a volume"), 0o644))
	l, err := s.a.Root.locate("/vol/f.txt")
	require.NoError(t, err)
	defer l.close()
	fi, err := os.Lstat(l.path())
	require.NoError(t, err)
	body, err := s.a.Root.refBodyAt(l.path(), true, sumOf("on a volume"), "r", "vol/f.txt", inode(fi))
	require.NoError(t, err)
	require.Equal(t, "/vol", body.Vol)

	require.NoError(t, unix.Unmount(mnt, unix.MNT_DETACH))
	_, err = s.a.Root.refBodyAt(l.path(), true, sumOf("on a volume"), "r", "vol/f.txt", inode(fi))
	require.ErrorContains(t, err, "not mounted beneath the site root")
}

// TestAStubReceivedRightAfterItsVolumesMountNamesIt: a received stub's
// marker is written before the stub is at its path; the volume was then
// told by the path from the mount table read up to 5 seconds before, and
// one mounted since was missed: the marker named the root's filesystem,
// an audit while the volume was down dropped it, and the stub's recall
// failed (a reviewer's finding). The mount of the folder it goes to is
// looked up instead.
func TestAStubReceivedRightAfterItsVolumesMountNamesIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	s.migrateFiles(t, "d", map[string]string{"a.txt": "reads the mount table"})
	vol := mountTmpfs(t, t.TempDir())
	mnt := filepath.Join(dir, "v")
	bindMount(t, vol, mnt)
	data := "received onto a volume mounted a moment ago"
	sum := putContent(t, s.tdir, []byte(data))
	l, err := s.a.Root.locate("/v/f.txt")
	require.NoError(t, err)
	f := SentFile{Path: "/v/f.txt", Type: TypeFile, Target: "archive", Key: contentKey(sum),
		Size: int64(len(data)), Mtime: time.Now().UnixNano(), Checksum: sum}
	require.NoError(t, s.a.makeStub(ctx, l, f, s.target))
	l.close()
	require.Equal(t, "/v", markerBodyOf(t, s, "v/f.txt").Vol)

	require.NoError(t, unix.Unmount(mnt, 0))
	ar := s.dropLeakedAndCollect(t)
	requireNoneDropped(t, ar)
	require.NoError(t, unix.Mount(vol, mnt, "", unix.MS_BIND, ""))
	s.requireRecalled(t, "v", map[string]string{"f.txt": data})
}

// TestRemovingASpaceWhoseVolumeIsNotMountedKeepsItsStubsRecords: a space
// whose folder is the mount point of a volume (records in the root's state
// index, stubs on the volume), removed while the volume is not mounted.
// The bare mount point is empty, so it went, and every record of the
// volume's stubs was dropped with it: mounted again, the stubs read as
// empty resident files (a reviewer's scratch test). Their records stay,
// the removal says so, and an audit meanwhile drops nothing the stubs need.
func TestRemovingASpaceWhoseVolumeIsNotMountedKeepsItsStubsRecords(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	ctx := context.Background()
	dir, vol := t.TempDir(), t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), true)
	_, err := s.a.cjSpace(ctx, &CJSpace{Name: "lab"}, false)
	require.NoError(t, err)
	mp := filepath.Join(dir, "spaces", "lab")
	require.NoError(t, unix.Mount(vol, mp, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(mp, unix.MNT_DETACH) })
	s.migrateFiles(t, "spaces/lab", auditSpaceFiles)
	s.migrateFiles(t, "spaces/other", map[string]string{"h.txt": "a file of another space"})
	require.NoError(t, unix.Unmount(mp, 0))

	msg, err := s.a.cjSpace(ctx, &CJSpace{Name: "lab"}, true)
	require.NoError(t, err)
	require.Contains(t, msg, "keeps the records of 2 stubs")
	requireNoneDropped(t, s.dropLeakedAndCollect(t))

	require.NoError(t, os.Mkdir(mp, 0o755))
	require.NoError(t, unix.Mount(vol, mp, "", unix.MS_BIND, ""))
	s.requireRecalled(t, "spaces/lab", auditSpaceFiles)
	s.requireRecalled(t, "spaces/other", map[string]string{"h.txt": "a file of another space"})
}
