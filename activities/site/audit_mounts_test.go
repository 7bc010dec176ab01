package site

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/targets"
)

// mountOver mounts source over the existing folder at until the test
// ends.
func mountOver(t *testing.T, src, at, fstype string, flags uintptr, data string) {
	t.Helper()
	require.NoError(t, unix.Mount(src, at, fstype, flags, data))
	t.Cleanup(func() { _ = unix.Unmount(at, unix.MNT_DETACH) })
}

// TestAuditKeepsTheReferencesOfStubsAMountHides: a filesystem mounted
// over a folder holding stubs (inside a volume, or on the root's own
// filesystem) hides them from both walks, and their references were
// dropped (a reviewer's finding). A reference whose file's folder is now
// on another mount than its marker names is kept.
func TestAuditKeepsTheReferencesOfStubsAMountHides(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root")
	}
	for _, nested := range []bool{true, false} {
		t.Run(fmt.Sprintf("nested=%v", nested), func(t *testing.T) {
			dir := t.TempDir()
			s := newAuditSite(t, dir, t.TempDir(), false)
			base := "d"
			if nested {
				bindMount(t, mountTmpfs(t, t.TempDir()), filepath.Join(dir, "vol"))
				base = "vol"
			}
			s.migrateFiles(t, base, map[string]string{"a.txt": "another stub on the same volume"})
			files := map[string]string{"f.txt": "the only copy, under a folder that gets mounted over"}
			s.migrateFiles(t, base+"/inner", files)
			inner := filepath.Join(dir, base, "inner")
			mountOver(t, "tmpfs", inner, "tmpfs", 0, "size=1m")
			s.a.Root.forgetMounts()

			ar := s.dropLeakedAndCollect(t)
			requireNoneDropped(t, ar)
			require.NoError(t, unix.Unmount(inner, 0))
			s.requireRecalled(t, base+"/inner", files)
		})
	}
}

// TestAuditKeepsAVolumesReferencesWhenAnotherWithRecordsIsInItsPlace: the
// volume is not mounted, and another filesystem carrying records (another
// site's volume, an older copy of this one) is mounted in its place. Any
// record found there counted as the volume seen, and its other
// references were dropped (a reviewer's finding): only records the site
// wrote for the very files count.
func TestAuditKeepsAVolumesReferencesWhenAnotherWithRecordsIsInItsPlace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root")
	}
	for _, kind := range []string{"another site's volume", "an older copy of the volume"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s := newAuditSite(t, dir, t.TempDir(), false)
			v1 := mountTmpfs(t, t.TempDir())
			mnt := filepath.Join(dir, "vol")
			bindMount(t, v1, mnt)
			files := map[string]string{"f.txt": "stub of site A, old", "g.txt": "stub of site A, newer"}
			s.migrateFiles(t, "vol", map[string]string{"f.txt": files["f.txt"]})
			v2 := mountTmpfs(t, t.TempDir())
			if kind == "another site's volume" {
				dirB := t.TempDir()
				b := newAuditSite(t, dirB, t.TempDir(), false)
				bindMount(t, v2, filepath.Join(dirB, "vol"))
				b.migrateFiles(t, "vol", map[string]string{"h.txt": "a stub of site B"})
			} else {
				// a backup/replica taken now, holding f.txt's stub only
				out, err := exec.Command("cp", "-a", filepath.Join(v1, "f.txt"), v2).CombinedOutput()
				require.NoError(t, err, string(out))
			}
			s.migrateFiles(t, "vol", map[string]string{"g.txt": files["g.txt"]})

			require.NoError(t, unix.Unmount(mnt, 0))
			mountOver(t, v2, mnt, "", unix.MS_BIND, "")
			s.a.Root.forgetMounts()
			ar := s.dropLeakedAndCollect(t)
			requireNoneDropped(t, ar)
			require.NoError(t, unix.Unmount(mnt, 0))
			require.NoError(t, unix.Mount(v1, mnt, "", unix.MS_BIND, ""))
			s.requireRecalled(t, "vol", files)
		})
	}
}

// failingDelete is a target whose Delete of some keys fails.
type failingDelete struct {
	targets.Driver
	fail func(key string) error
}

func (d failingDelete) Delete(ctx context.Context, key string) error {
	if err := d.fail(key); err != nil {
		return err
	}
	return d.Driver.Delete(ctx, key)
}

// TestAuditPutsBackWhatItDroppedWhenADropFails:
// TestAuditFindsARetriedStepsRecordWhereverItIs, plus one more leaked
// reference whose delete fails (a transient target error) after the
// renamed stub's marker was dropped: the audit returned before its last
// walk, and the reference the stub relies on stayed dropped (a
// reviewer's finding). The last walk runs whatever stopped the drops.
func TestAuditPutsBackWhatItDroppedWhenADropFails(t *testing.T) {
	s, data, key, target, ran := retriedMigrate(t, true)
	dir, root := s.a.Root.Dir(), s.a.Root
	// A stub deleted for good, whose marker sorts after the first.
	other := ""
	for i := 0; other == "" || refKey(sumOf(other), "") < key; i++ {
		other = fmt.Sprintf("deleted for good %d", i)
	}
	s.migrateFiles(t, "c", map[string]string{"g.txt": other})
	rec, err := root.state.get(filepath.Join(dir, "c", "g.txt"), "c/g.txt")
	require.NoError(t, err)
	otherKey := refKey(rec.Checksum, rec.Ref)
	s.ageMarker(t, otherKey)
	require.NoError(t, os.Remove(filepath.Join(dir, "c", "g.txt")))

	d := failingDelete{Driver: target, fail: func(key string) error {
		if key == otherKey {
			return errors.New("503 slow down")
		}
		return nil
	}}
	ar, err := AuditRefs(context.Background(), root, map[string]targets.Driver{"archive": d}, AuditOptions{Drop: true})
	require.ErrorContains(t, err, "503 slow down", "%+v", ar.Leaked)
	require.True(t, *ran)
	collectTwice(t, s.target)
	s.requireRecalled(t, "b", map[string]string{"f.txt": data})
}

// requireNoneDropped requires that the audit dropped no leaked reference.
func requireNoneDropped(t *testing.T, ar AuditResult) {
	t.Helper()
	for _, l := range ar.Leaked {
		require.False(t, l.Dropped, "dropped: %+v", l)
	}
}
