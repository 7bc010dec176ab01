package site

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// raceFor is how long each swap race below runs: long enough that a check
// followed by a use by name loses the race many times over.
const raceFor = 1500 * time.Millisecond

// removalRaceFor is longer: a removal by name loses its race less often
// (it must meet the swapped link twice, at its check and at its use).
const removalRaceFor = 3 * time.Second

// swapForLink swaps the folder dir for a symlink to target and back, over
// and over, until the returned stop is called.
func swapForLink(dir, target string) (stop func()) {
	return keepSwapping(func() {
		if os.Rename(dir, dir+".real") != nil {
			return
		}
		_ = os.Symlink(target, dir)
		spin()
		_ = os.Remove(dir)
		_ = os.Rename(dir+".real", dir)
	})
}

// spin holds a swapped state for a few microseconds, from none to about
// as long as the hub takes from a check to its use, without yielding the
// core: the varying hold meets check-to-use windows of every length.
func spin() {
	hold := time.Duration(rand.IntN(40)) * time.Microsecond
	for start := time.Now(); time.Since(start) < hold; {
		runtime.Gosched()
	}
}

// swapFileForLink swaps the regular file name for a symlink to target and
// back, over and over.
func swapFileForLink(name, target string) (stop func()) {
	return keepSwapping(func() {
		_ = os.Remove(name)
		_ = os.Symlink(target, name)
		runtime.Gosched()
		_ = os.Remove(name)
		_ = os.WriteFile(name, nil, 0o644)
	})
}

// treeOf lists every path below dir with its size, to compare a folder
// outside the root before and after a race.
func treeOf(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel] = fi.Size()
		return nil
	}))
	return got
}

// outsideTree makes a folder outside any root with a file and a folder
// named like the ones the races aim at.
func outsideTree(t *testing.T, names ...string) (string, map[string]int64) {
	t.Helper()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "outside-secret.txt"), []byte("keep"), 0o644))
	for _, n := range names {
		require.NoError(t, os.MkdirAll(filepath.Join(outside, n), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(outside, n, "victim"), []byte("keep"), 0o644))
	}
	return outside, treeOf(t, outside)
}

// TestSpaceRemovalSwapRace: removing a C+J space (rmdir, or a move to the
// site's trash when it holds data) while its parent folder is swapped for
// a symlink to a folder outside the root never removes or moves anything
// there.
func TestSpaceRemovalSwapRace(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	outside, before := outsideTree(t, "s")
	_, err := a.CJApply(ctx, CJChange{Type: CJSpaces, Name: "s", Space: &CJSpace{Name: "s"}})
	require.NoError(t, err)

	stop := swapForLink(filepath.Join(a.Root.Dir(), cjSpacesDir), outside)
	deadline := time.Now().Add(removalRaceFor)
	for i := 0; time.Now().Before(deadline); i++ {
		// Now and then the space is made again, holding a folder (so it
		// goes to the trash) or not; most removals find it gone, which is
		// when a removal by name would reach the folder outside.
		sp := &CJSpace{Name: "s"}
		if i%32 == 0 {
			sp.Directories = []string{"d"}
		}
		if i%16 == 0 {
			_, _ = a.CJApply(ctx, CJChange{Type: CJSpaces, Name: "s", Space: sp})
		}
		_, _ = a.CJApply(ctx, CJChange{Type: CJSpaces, Name: "s", Space: sp, Delete: true})
	}
	stop()
	require.Equal(t, before, treeOf(t, outside), "nothing outside the root removed or moved")
}

// TestRemoveSpaceDirSwapRace: RemoveSpaceDir removes an empty space
// folder; swapping its parent for a symlink to a folder outside holding
// an empty folder of the same name never removes that one.
func TestRemoveSpaceDirSwapRace(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	outside := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(outside, "m"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(a.Root.Dir(), "sw"), 0o755))

	stop := swapForLink(filepath.Join(a.Root.Dir(), "sw"), outside)
	deadline := time.Now().Add(removalRaceFor)
	for i := 0; time.Now().Before(deadline); i++ {
		if i%16 == 0 {
			_, _ = a.CreateSpaceDir(ctx, SpaceDirInput{Mountpoint: "/sw/m"})
		}
		_, _ = a.RemoveSpaceDir(ctx, SpaceDirInput{Mountpoint: "/sw/m"})
	}
	stop()
	require.DirExists(t, filepath.Join(outside, "m"), "the folder outside the root is never removed")
}

// TestListDirSwapRace: listing a folder while it is swapped for a symlink
// to a folder outside the root never lists what is outside.
func TestListDirSwapRace(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	outside, _ := outsideTree(t)
	sw := filepath.Join(a.Root.Dir(), "sw")
	require.NoError(t, os.Mkdir(sw, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sw, "inside.txt"), []byte("in"), 0o644))

	stop := swapForLink(sw, outside)
	deadline := time.Now().Add(raceFor)
	listed := 0
	for time.Now().Before(deadline) {
		out, err := a.ListDir(ctx, ListDirInput{Path: "/sw"})
		if err != nil {
			continue
		}
		listed++
		for _, c := range out.Children {
			require.NotEqual(t, "outside-secret.txt", c.Name, "a folder outside the root was listed")
		}
	}
	stop()
	require.NotZero(t, listed, "the folder was listed at least once")
}

// TestExposerCheckSwapRace: an exposer's folder is checked through a
// descriptor: a file swapped for a symlink to a folder outside the root
// is never written into an export as a folder of the space.
func TestExposerCheckSwapRace(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	outside, _ := outsideTree(t)
	_, err := a.CJApply(ctx, CJChange{Type: CJSpaces, Name: "s", Space: &CJSpace{Name: "s"}})
	require.NoError(t, err)
	data := filepath.Join(a.Root.Dir(), cjSpacesDir, "s", "data")
	require.NoError(t, os.WriteFile(data, nil, 0o644))

	stop := swapFileForLink(data, outside)
	deadline := time.Now().Add(raceFor)
	wrote := 0
	for time.Now().Before(deadline) {
		if _, err := a.CJApply(ctx, CJChange{Type: CJExposers, Name: "e", Exposer: &CJExposer{Name: "e", Kind: CJNFS, Space: "s", Path: "data"}}); err == nil {
			wrote++
		}
	}
	stop()
	require.Zero(t, wrote, "an export of a path that was never a folder of the space")
}

// TestShareCheckSwapRace: the same for a hub share's folder.
func TestShareCheckSwapRace(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	outside, _ := outsideTree(t)
	require.NoError(t, os.Mkdir(filepath.Join(a.Root.Dir(), "sp"), 0o755))
	data := filepath.Join(a.Root.Dir(), "sp", "data")
	require.NoError(t, os.WriteFile(data, nil, 0o644))

	stop := swapFileForLink(data, outside)
	deadline := time.Now().Add(raceFor)
	wrote := 0
	for time.Now().Before(deadline) {
		in := ShareConfig{Kind: ShareNFS, ID: 1, Path: "/sp/data", NFSClients: []NFSExportClient{{Hosts: "*", Options: "ro"}}}
		if _, err := a.WriteShare(ctx, in); err == nil {
			wrote++
		}
	}
	stop()
	require.Zero(t, wrote, "a share of a path that was never a folder")
}

// TestConfigWriteSwapRace: the site's configuration files are written
// beneath the configuration folder: swapping one of its folders for a
// symlink to a folder outside never writes or removes anything there.
func TestConfigWriteSwapRace(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	outside, before := outsideTree(t)
	require.NoError(t, os.Mkdir(filepath.Join(a.Root.Dir(), "sp"), 0o755))
	_, err := a.CJApply(ctx, CJChange{Type: CJSpaces, Name: "s", Space: &CJSpace{Name: "s"}})
	require.NoError(t, err)
	for _, d := range []string{sharesDir, cjExportsDir, cjQuotasDir} {
		require.NoError(t, os.MkdirAll(filepath.Join(a.ConfigDir, d), 0o750))
	}
	quota := int64(10)

	var stops []func()
	for _, d := range []string{sharesDir, cjExportsDir, cjQuotasDir} {
		stops = append(stops, swapForLink(filepath.Join(a.ConfigDir, d), outside))
	}
	deadline := time.Now().Add(raceFor)
	for i := 0; time.Now().Before(deadline); i++ {
		share := ShareConfig{Kind: ShareNFS, ID: 1, Path: "/sp", NFSClients: []NFSExportClient{{Hosts: "*", Options: "ro"}}}
		_, _ = a.WriteShare(ctx, share)
		_, _ = a.CJApply(ctx, CJChange{Type: CJExposers, Name: "e", Exposer: &CJExposer{Name: "e", Kind: CJNFS, Space: "s"}})
		_, _ = a.CJApply(ctx, CJChange{Type: CJSpaces, Name: "s", Space: &CJSpace{Name: "s", Quota: &quota}})
		if i%2 == 1 {
			_, _ = a.RemoveShare(ctx, share)
			_, _ = a.CJApply(ctx, CJChange{Type: CJExposers, Name: "e", Exposer: &CJExposer{Name: "e", Kind: CJNFS, Space: "s"}, Delete: true})
		}
	}
	for _, stop := range stops {
		stop()
	}
	require.Equal(t, before, treeOf(t, outside), "nothing written or removed outside the configuration folder")
	for name := range treeOf(t, outside) {
		require.False(t, strings.HasPrefix(name, ".hub-tmp-"), name)
	}
}
