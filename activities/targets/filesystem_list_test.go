package targets

import (
	"context"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/fsutil"
)

// TestFilesystemListMatchesFullWalk compares List, which reads only the
// folders a page needs, with the plain answer (walk everything, keep the
// regular files under the prefix after the marker, sort) on random trees
// whose names hold the characters that sort before "/" ("!", " ", "-",
// "."), for random prefixes, markers and page sizes, pages through whole
// prefixes, and visits whole prefixes with Each.
func TestFilesystemListMatchesFullWalk(t *testing.T) {
	ctx := context.Background()
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		d, err := NewFilesystem(Config{MigrationTargetFolder: dir})
		require.NoError(t, err)
		alphabet := []string{"a", "b", "a.", "a-", "a!", "a b", "0", "ab", ".x"}
		var keys []string // every key written, to draw prefixes and markers from
		var grow func(rel string, depth int)
		grow = func(rel string, depth int) {
			for i := rng.Intn(5); i >= 0; i-- {
				name := alphabet[rng.Intn(len(alphabet))]
				if rng.Intn(3) == 0 {
					name += alphabet[rng.Intn(len(alphabet))]
				}
				p := filepath.Join(dir, filepath.FromSlash(rel+name))
				switch r := rng.Intn(10); {
				case r < 3 && depth < 4:
					if os.Mkdir(p, 0o755) == nil || isDir(p) {
						grow(rel+name+"/", depth+1)
					}
				case r == 4:
					_ = os.WriteFile(filepath.Join(filepath.Dir(p), fsutil.TmpPrefix+name), nil, 0o644) // being written
				default:
					if !isDir(p) && os.WriteFile(p, []byte(name), 0o644) == nil {
						keys = append(keys, rel+name)
					}
				}
			}
		}
		grow("", 0)
		outside := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), nil, 0o644))
		all := walkAll(t, dir)
		// A symlink inside the target is refused, not skipped: writes
		// follow it, so a listing that left out what is behind it would
		// let the collector free referenced content.
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
		_, _, err = d.List(ctx, "link/", "", 10)
		require.ErrorIs(t, err, ErrSymlinkInTarget, "a symlinked folder")
		_, _, err = d.List(ctx, "", "", 1<<20)
		require.ErrorIs(t, err, ErrSymlinkInTarget, "a folder holding a symlink")
		require.NoError(t, os.Remove(filepath.Join(dir, "link")))
		// The target's own folder named through a symlink is that folder.
		named := filepath.Join(outside, "named")
		require.NoError(t, os.Symlink(dir, named))
		through, err := NewFilesystem(Config{MigrationTargetFolder: named})
		require.NoError(t, err)
		objs, _, err := through.List(ctx, "", "", 1<<20)
		require.NoError(t, err)
		require.Len(t, objs, len(all))
		pick := func() string {
			if len(keys) == 0 || rng.Intn(5) == 0 {
				return alphabet[rng.Intn(len(alphabet))]
			}
			k := keys[rng.Intn(len(keys))]
			return k[:rng.Intn(len(k)+1)]
		}
		for i := 0; i < 200; i++ {
			prefix, marker, max := pick(), "", 1+rng.Intn(4)
			if rng.Intn(2) == 0 {
				marker = pick()
			}
			want := []string{}
			for _, k := range all {
				if strings.HasPrefix(k, prefix) && k > marker {
					want = append(want, k)
				}
			}
			objs, next, err := d.List(ctx, prefix, marker, max)
			require.NoError(t, err)
			got := []string{}
			for _, o := range objs {
				got = append(got, o.Key)
			}
			wantNext := ""
			if len(want) > max {
				want, wantNext = want[:max], want[max-1]
			}
			require.Equal(t, want, got, "seed %d: List(%q, %q, %d)", seed, prefix, marker, max)
			require.Equal(t, wantNext, next, "seed %d: List(%q, %q, %d)", seed, prefix, marker, max)
		}
		for _, prefix := range []string{"", "a", "a/", "a.", "b/"} {
			var got []string
			for marker := ""; ; {
				objs, next, err := d.List(ctx, prefix, marker, 2)
				require.NoError(t, err)
				for _, o := range objs {
					got = append(got, o.Key)
				}
				if next == "" {
					break
				}
				marker = next
			}
			want := []string(nil)
			for _, k := range all {
				if strings.HasPrefix(k, prefix) {
					want = append(want, k)
				}
			}
			require.Equal(t, want, got, "seed %d: paging through %q", seed, prefix)
		}
		for i := 0; i < 50; i++ {
			prefix := pick()
			want := []string(nil)
			for _, k := range all {
				if strings.HasPrefix(k, prefix) {
					want = append(want, k)
				}
			}
			var got []string
			require.NoError(t, d.Each(ctx, prefix, func(o Object) error {
				got = append(got, o.Key)
				return nil
			}))
			require.Equal(t, want, got, "seed %d: Each(%q)", seed, prefix)
		}
		if len(all) > 1 {
			stop := errors.New("stop")
			var got []string
			err := d.Each(ctx, "", func(o Object) error {
				got = append(got, o.Key)
				return stop
			})
			require.ErrorIs(t, err, stop, "seed %d: Each returns its function's error", seed)
			require.Equal(t, all[:1], got, "seed %d: and stops at it", seed)
		}
	}
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// walkAll is every object key of a filesystem target, sorted.
func walkAll(t *testing.T, dir string) []string {
	t.Helper()
	var all []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), fsutil.TmpPrefix) {
			rel, _ := filepath.Rel(dir, p)
			all = append(all, filepath.ToSlash(rel))
		}
		return nil
	}))
	sort.Strings(all)
	return all
}

// twoDrivers opens two drivers of one target folder, as two processes
// would.
func twoDrivers(t *testing.T) (dir string, a, b *Filesystem) {
	t.Helper()
	dir = t.TempDir()
	var err error
	a, err = NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	b, err = NewFilesystem(Config{MigrationTargetFolder: dir})
	require.NoError(t, err)
	return dir, a, b
}

// TestFilesystemLockFileRemoved: the lock file of a lock held is removed
// (by hand, "to free a stuck lock") and a second process takes a lock of
// the new file. The first holder is told at its next step (StillHeld) and
// its held context ends with ErrLockLost; the second holds. Before, both
// went on, each with a lock of its own file.
func TestFilesystemLockFileRemoved(t *testing.T) {
	dir, a, b := twoDrivers(t)
	ctx := context.Background()
	heldA, releaseA, err := a.TryLock(ctx, "collect")
	require.NoError(t, err)
	defer releaseA()
	require.NoError(t, StillHeld(heldA))
	require.NoError(t, os.Remove(filepath.Join(dir, lockPrefix+"collect")))
	heldB, releaseB, err := b.TryLock(ctx, "collect")
	require.NoError(t, err)
	defer releaseB()

	err = StillHeld(heldA)
	require.ErrorIs(t, err, ErrLockLost)
	require.ErrorContains(t, err, "removed or replaced")
	require.ErrorIs(t, context.Cause(heldA), ErrLockLost, "held ends too")
	require.NoError(t, StillHeld(heldB))
	require.NoError(t, StillHeld(ctx), "a context without a lock")
}

// TestFilesystemTryLock: a lock held (by this process or another) is
// refused at once with ErrLocked, taken again once released, and its file
// is in no listing.
func TestFilesystemTryLock(t *testing.T) {
	_, a, b := twoDrivers(t)
	ctx := context.Background()
	_, release, err := a.TryLock(ctx, "collect")
	require.NoError(t, err)
	_, _, err = b.TryLock(ctx, "collect")
	require.ErrorIs(t, err, ErrLocked)
	release()
	_, release, err = b.TryLock(ctx, "collect")
	require.NoError(t, err)
	defer release()
	objs, _, err := a.List(ctx, "", "", 100)
	require.NoError(t, err)
	require.Empty(t, objs)

	// A filesystem that takes no locks (NFS mounted nolock): refused,
	// never held without a lock.
	flock = func(int, int) error { return syscall.ENOLCK }
	t.Cleanup(func() { flock = syscall.Flock })
	_, _, err = a.TryLock(ctx, "other")
	require.ErrorIs(t, err, syscall.ENOLCK)
}
