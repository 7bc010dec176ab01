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
// automount, a disk offline), or another filesystem is mounted in its
// place. Its folder holds none of its stubs, every reference of them
// looked leaked, and they were dropped: once the volume was back, none
// recalled (reviewers' findings, also against markers naming the device,
// which the kernel gives to the next volume mounted, and against a check
// that something is mounted there). A marker names the folder its volume
// is mounted at, a bind mount of the root's own filesystem included, and
// a reference is dropped only where the audit finds the site's records on
// a volume mounted there.
func TestAuditKeepsReferencesOfAVolumeNotMounted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		volume   func(t *testing.T) string
		replaced bool // another filesystem is mounted at the folder
	}{
		{"a filesystem of its own", func(t *testing.T) string { return mountTmpfs(t, t.TempDir()) }, false},
		{"another filesystem in its place", func(t *testing.T) string { return mountTmpfs(t, t.TempDir()) }, true},
		{"a folder of the root's filesystem", func(t *testing.T) string { return t.TempDir() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newAuditSite(t, dir, t.TempDir(), false)
			vol := tc.volume(t)
			mnt := filepath.Join(dir, "vol")
			bindMount(t, vol, mnt)
			files := map[string]string{"f.txt": "data on the mounted volume", "g.txt": "deleted for good"}
			s.migrateFiles(t, "vol", files)
			require.NoError(t, os.Remove(filepath.Join(mnt, "g.txt")))

			require.NoError(t, unix.Unmount(mnt, 0))
			if tc.replaced {
				require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
				require.NoError(t, os.WriteFile(filepath.Join(mnt, "x"), []byte("x"), 0o644))
			}
			ar := s.dropLeakedAndCollect(t)
			require.Len(t, ar.Leaked, 2, "%+v", ar)
			for _, l := range ar.Leaked {
				require.False(t, l.Dropped, "%+v", l)
				require.Contains(t, l.Kept, "not mounted now")
			}
			if tc.replaced {
				require.NoError(t, unix.Unmount(mnt, 0))
			}
			require.NoError(t, unix.Mount(vol, mnt, "", unix.MS_BIND, ""))
			s.requireRecalled(t, "vol", map[string]string{"f.txt": files["f.txt"]})
		})
	}
}

// TestAuditDropsTheLeakedReferencesOfAVolumeMountedAgain: a volume
// beneath the root mounted again under another device number (a reboot,
// an NFS remount): the leaked references of its stubs deleted since are
// dropped as any other, once the site's records are on it, and its stubs
// keep theirs.
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
	// The copy's inodes are new, so the copied records are not the
	// site's for those files (a real volume keeps its inodes): a stub
	// made there stands for them.
	s.migrateFiles(t, "vol", map[string]string{"h.txt": "migrated since"})

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

// retriedMigrate sets up a migrate of /a/f.txt killed long ago after
// writing its reference (its marker eight days old, no record), the file
// then renamed to /b/f.txt by its user when renamed. The returned target
// runs the retried migrate of the file right before the audit deletes
// that marker (a reference is named by file and content: the retry writes
// the very marker, records it and releases the file); ran says it did.
func retriedMigrate(t *testing.T, renamed bool) (s auditSite, data, key string, target *stepHook, ran *bool) {
	ctx := context.Background()
	dir := t.TempDir()
	s = newAuditSite(t, dir, t.TempDir(), false)
	data = "data of a file whose first migrate was killed"
	key = s.killedMigrate(t, "a/f.txt", data)
	s.ageMarker(t, key)
	abs := filepath.Join(dir, "a", "f.txt")
	at := "/a/f.txt"
	if renamed {
		at = "/b/f.txt"
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "b"), 0o755))
		require.NoError(t, os.Rename(abs, filepath.Join(dir, "b", "f.txt")))
	}
	ran = new(bool)
	target = &stepHook{Driver: s.target, onDel: func(k string) {
		if k != key || *ran {
			return
		}
		*ran = true
		res, err := Migrate(ctx, s.a.Root, []string{at}, s.target, "archive", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{at})
	}}
	return s, data, key, target, ran
}

// killedMigrate writes the file rel with data and the marker a migrate
// of it writes first, as one killed right after: no record. It returns
// the marker's key.
func (s auditSite) killedMigrate(t *testing.T, rel, data string) (key string) {
	t.Helper()
	abs := filepath.Join(s.a.Root.Dir(), filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
	require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
	fi, err := os.Lstat(abs)
	require.NoError(t, err)
	sum := sumOf(data)
	ref, err := s.a.Root.refID(fi, birthTime(abs), sum)
	require.NoError(t, err)
	require.NoError(t, s.a.Root.addRef(context.Background(), s.target, sum, ref, rel, inode(fi)))
	return refKey(sum, ref)
}

// collectTwice runs the collector with no grace twice: what frees the
// content of a reference dropped.
func collectTwice(t *testing.T, target targets.Driver) {
	t.Helper()
	for range 2 {
		_, err := Collect(context.Background(), target, CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
}

// TestAuditFindsARetriedStepsRecordWhereverItIs: a migrate killed long
// ago after writing its reference left no record; the user then renamed
// the file. While the audit drops the old marker, the retried migrate of
// the file at its new path writes the same marker, records it and
// releases the file. The audit looked for a record at the path of the
// body it read before (the killed attempt's), found none, and the drop
// stood: the stub's content was collected (a reviewer's finding). A last
// walk after the drops finds the record wherever it is and puts the
// reference back.
func TestAuditFindsARetriedStepsRecordWhereverItIs(t *testing.T) {
	s, data, _, target, ran := retriedMigrate(t, true)
	ar, err := AuditRefs(context.Background(), s.a.Root, map[string]targets.Driver{"archive": target}, AuditOptions{Drop: true})
	require.NoError(t, err)
	require.True(t, *ran, "the race did not happen: %+v", ar)
	require.Len(t, ar.Leaked, 1)
	require.False(t, ar.Leaked[0].Dropped, "put back")
	collectTwice(t, s.target)
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

// TestAMarkerWrittenRightAfterAMountNamesItsVolume: the mount table is
// read at most every 5 seconds, and a marker written within them after a
// volume was mounted beneath the root named no volume: with the volume
// not mounted, an audit took it for a file of the root's own filesystem
// and dropped it, and the collector freed the stub's content. The file's
// own mount ID now says when the table read is stale. Also a volume
// unmounted and another mounted in its place within those seconds (the
// kernel may give it the freed mount ID).
func TestAMarkerWrittenRightAfterAMountNamesItsVolume(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	s.migrateFiles(t, "a", map[string]string{"x.txt": "read the mount table"})
	vol := mountTmpfs(t, t.TempDir())
	mnt := filepath.Join(dir, "vol")
	bindMount(t, vol, mnt)
	files := map[string]string{"f.txt": "written right after its volume was mounted"}
	s.migrateFiles(t, "vol", files)
	body := markerBodyOf(t, s, "vol/f.txt")
	require.Equal(t, "/vol", body.Vol)

	other := mountTmpfs(t, t.TempDir())
	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "vol2"), 0o755))
	require.NoError(t, unix.Mount(other, filepath.Join(dir, "vol2"), "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(dir, "vol2"), unix.MNT_DETACH) })
	s.migrateFiles(t, "vol2", map[string]string{"g.txt": "on another volume mounted right after"})
	require.Equal(t, "/vol2", markerBodyOf(t, s, "vol2/g.txt").Vol)

	ar := s.dropLeakedAndCollect(t) // vol is not mounted
	require.Len(t, ar.Leaked, 1, "%+v", ar)
	require.False(t, ar.Leaked[0].Dropped, "%+v", ar.Leaked[0])
	require.NoError(t, unix.Mount(vol, mnt, "", unix.MS_BIND, ""))
	s.requireRecalled(t, "vol", files)
}

// markerBodyOf reads the body of the marker of the file rel's record.
func markerBodyOf(t *testing.T, s auditSite, rel string) refBody {
	t.Helper()
	abs := filepath.Join(s.a.Root.Dir(), filepath.FromSlash(rel))
	rec, err := s.a.Root.state.get(abs, rel)
	require.NoError(t, err)
	require.NotNil(t, rec)
	body, err := readRefBody(context.Background(), s.target, refKey(rec.Checksum, rec.Ref))
	require.NoError(t, err)
	return body
}

// TestAuditKeepsAVolumesReferencesWhenAPartOfItIsInItsPlace: a subfolder
// of a volume bind-mounted where the volume was (an NFS export of a
// subdirectory is alike) holds records the site wrote for those very
// files, so the volume counted as seen, and the references of its stubs
// outside that part were dropped (a reviewer's scratch test, listed as
// left by the thirty-second session). A marker now says what was mounted
// at its volume (type, source, folder of it), and is kept while
// something else is.
func TestAuditKeepsAVolumesReferencesWhenAPartOfItIsInItsPlace(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	vol := mountTmpfs(t, t.TempDir())
	mnt := filepath.Join(dir, "vol")
	bindMount(t, vol, mnt)
	inPart := map[string]string{"f.txt": "in the part mounted in the volume's place"}
	outside := map[string]string{"g.txt": "outside that part"}
	s.migrateFiles(t, "vol/part", inPart)
	s.migrateFiles(t, "vol", outside)
	require.Equal(t, "tmpfs tmpfs /", markerBodyOf(t, s, "vol/g.txt").VolFrom)

	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, unix.Mount(filepath.Join(vol, "part"), mnt, "", unix.MS_BIND, ""))
	ar := s.dropLeakedAndCollect(t)
	require.Len(t, ar.Leaked, 1, "%+v", ar) // the part's file is found at another path
	requireNoneDropped(t, ar)
	require.Contains(t, ar.Leaked[0].Kept, "mounted from")

	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, unix.Mount(vol, mnt, "", unix.MS_BIND, ""))
	s.requireRecalled(t, "vol", outside)
	s.requireRecalled(t, "vol/part", inPart)
}
