package site

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestATriggeredPolicyTakesOnlyFilesOfThePoolItMeasures: a trigger
// measures the pool of the site root's filesystem, and a space on a volume
// mounted beneath the root frees nothing there. Its files were selected,
// the pool never fell, and each check migrated another slice of that
// volume, until all of it was (a reviewer's finding). A triggered policy
// now selects only files on the measured filesystem; a folder of that
// filesystem mounted elsewhere beneath the root (a bind mount; a btrfs
// subvolume, which has a device number of its own) is the same pool.
func TestATriggeredPolicyTakesOnlyFilesOfThePoolItMeasures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	mountAt(t, "tmpfs", vol, "tmpfs", 0, "size=16m")
	old := time.Now().Add(-100 * 24 * time.Hour)
	for _, p := range []string{"vol/a.bin", "vol/b.bin", "here/c.bin", "here/d.bin", "elsewhere/e.bin"} {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, make([]byte, 1<<20), 0o644))
		require.NoError(t, os.Chtimes(abs, old, old))
	}
	bindMount(t, filepath.Join(dir, "elsewhere"), filepath.Join(dir, "bound"))
	a := &Activities{Root: newRoot(t, dir, false), Site: "west",
		// Always full: the bound is never reached, and every file the
		// policy may take is taken.
		Utilisation: func(context.Context, string) (int64, int64, error) { return 99 << 30, 100 << 30, nil }}
	in := DiscoverInput{JobID: 9, Run: 1, Mode: "policy", Paths: []string{"/vol", "/here", "/bound"}, BatchSize: 100,
		Policy: &PolicySelect{Triggers: []PolicyTrigger{{Pool: "system", Upper: 80, Lower: 60, Premigrate: 60}},
			States: []string{"resident", "premigrated"}}}
	out, err := discover(t, a, in)
	require.NoError(t, err)
	require.True(t, out.Fired)
	got := batchedPaths(t, a, in, out)
	require.ElementsMatch(t, []string{"/here/c.bin", "/here/d.bin", "/bound/e.bin"}, got[PolicyRuleAction])

	// Without triggers, the policy takes what its conditions select,
	// wherever it is.
	in.JobID, in.Policy = 10, &PolicySelect{States: []string{"resident", "premigrated"}}
	out, err = discover(t, a, in)
	require.NoError(t, err)
	got = batchedPaths(t, a, in, out)
	require.ElementsMatch(t, []string{"/vol/a.bin", "/vol/b.bin", "/here/c.bin", "/here/d.bin", "/bound/e.bin"}, got[PolicyRuleAction])
}

// TestATriggeredPolicyTakesFilesOfABtrfsSubvolume: a btrfs subvolume has
// a device number of its own but is the root's pool (statfs counts the
// whole filesystem); compared by device, its files were never taken and
// the pool never fell (a reviewer's finding on the first mend).
func TestATriggeredPolicyTakesFilesOfABtrfsSubvolume(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	img := filepath.Join(t.TempDir(), "b.img")
	require.NoError(t, os.WriteFile(img, nil, 0o600))
	require.NoError(t, os.Truncate(img, 300<<20))
	out, err := exec.Command("mkfs.btrfs", "-q", img).CombinedOutput()
	require.NoError(t, err, string(out))
	loop, err := exec.Command("losetup", "-f", "--show", img).Output()
	require.NoError(t, err)
	dev := strings.TrimSpace(string(loop))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	dir := filepath.Join(t.TempDir(), "root")
	mountAt(t, dev, dir, "btrfs", 0, "")
	out, err = exec.Command("btrfs", "subvolume", "create", filepath.Join(dir, "sub")).CombinedOutput()
	require.NoError(t, err, string(out))
	old := time.Now().Add(-100 * 24 * time.Hour)
	for _, p := range []string{"sub/a.bin", "here/c.bin"} {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, make([]byte, 1<<20), 0o644))
		require.NoError(t, os.Chtimes(abs, old, old))
	}
	a := &Activities{Root: newRoot(t, dir, false), Site: "west",
		Utilisation: func(context.Context, string) (int64, int64, error) { return 99 << 30, 100 << 30, nil }}
	in := DiscoverInput{JobID: 9, Run: 1, Mode: "policy", Paths: []string{"/sub", "/here"}, BatchSize: 100,
		Policy: &PolicySelect{Triggers: []PolicyTrigger{{Pool: "system", Upper: 80, Lower: 60, Premigrate: 60}},
			States: []string{"resident", "premigrated"}}}
	o, err := discover(t, a, in)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"/sub/a.bin", "/here/c.bin"}, batchedPaths(t, a, in, o)[PolicyRuleAction])
}

// TestATriggeredPolicyTellsFilesystemsByDeviceNumber: on a root that is a
// tmpfs, another tmpfs mounted beneath it (same type and source) is
// another filesystem, and one hidden by a folder of the root's own
// filesystem bound over it is not where its point's path leads (a
// reviewer's findings on a comparison by type and source).
func TestATriggeredPolicyTellsFilesystemsByDeviceNumber(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "root")
	mountAt(t, "tmpfs", dir, "tmpfs", 0, "size=64m")
	mountAt(t, "tmpfs", filepath.Join(dir, "vol"), "tmpfs", 0, "size=16m")
	mountAt(t, "tmpfs", filepath.Join(dir, "x"), "tmpfs", 0, "size=16m")
	old := time.Now().Add(-100 * 24 * time.Hour)
	for _, p := range []string{"vol/a.bin", "here/c.bin", "own/e.bin"} {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, make([]byte, 1<<20), 0o644))
		require.NoError(t, os.Chtimes(abs, old, old))
	}
	require.NoError(t, unix.Mount(filepath.Join(dir, "own"), filepath.Join(dir, "x"), "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(dir, "x"), unix.MNT_DETACH) })
	require.Equal(t, []string{"/vol"}, foreignVolumes(dir))

	a := &Activities{Root: newRoot(t, dir, false), Site: "west",
		Utilisation: func(context.Context, string) (int64, int64, error) { return 99 << 30, 100 << 30, nil }}
	in := DiscoverInput{JobID: 9, Run: 1, Mode: "policy", Paths: []string{"/vol", "/here", "/x"}, BatchSize: 100,
		Policy: &PolicySelect{Triggers: []PolicyTrigger{{Pool: "system", Upper: 80, Lower: 60, Premigrate: 60}},
			States: []string{"resident", "premigrated"}}}
	o, err := discover(t, a, in)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"/here/c.bin", "/x/e.bin"}, batchedPaths(t, a, in, o)[PolicyRuleAction])
}
