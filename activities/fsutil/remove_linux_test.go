package fsutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tree makes a tree of four files, one in a read-only folder.
func tree(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "tree")
	for _, p := range []string{"a/b/c.txt", "a/d.txt", "e.txt", "ro/f.txt"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644))
	}
	require.NoError(t, os.Chmod(filepath.Join(dir, "ro"), 0o555))
	return dir
}

// TestRemoveAllOnOneMount: a tree with read-only folders goes whole; a
// tree with a filesystem mounted beneath it (a tmpfs, and a bind mount of
// a folder of the same filesystem, which has the same device) loses
// nothing of the mounted filesystem, whatever the mount table said when
// the removal was decided (os.RemoveAll deleted through both).
func TestRemoveAllOnOneMount(t *testing.T) {
	t.Run("one mount", func(t *testing.T) {
		dir := tree(t)
		require.NoError(t, RemoveAllOnOneMount(dir))
		_, err := os.Lstat(dir)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.NoError(t, RemoveAllOnOneMount(dir), "already gone")
	})
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	for _, kind := range []string{"tmpfs", "bind"} {
		t.Run(kind, func(t *testing.T) {
			dir := tree(t)
			shared := t.TempDir()
			if kind == "tmpfs" {
				require.NoError(t, unix.Mount("tmpfs", shared, "tmpfs", 0, "size=1m"))
				t.Cleanup(func() { _ = unix.Unmount(shared, unix.MNT_DETACH) })
			}
			require.NoError(t, os.WriteFile(filepath.Join(shared, "keep.txt"), []byte("shared data"), 0o644))
			at := filepath.Join(dir, "a", "b", "mnt")
			require.NoError(t, os.Mkdir(at, 0o755))
			require.NoError(t, unix.Mount(shared, at, "", unix.MS_BIND, ""))
			t.Cleanup(func() { _ = unix.Unmount(at, unix.MNT_DETACH) })

			err := RemoveAllOnOneMount(dir)
			require.ErrorIs(t, err, ErrOtherMount)
			got, err := os.ReadFile(filepath.Join(shared, "keep.txt"))
			require.NoError(t, err)
			require.Equal(t, "shared data", string(got))
			// Mounted at the folder itself: nothing on it is removed.
			require.NoError(t, unix.Unmount(at, 0))
			require.NoError(t, unix.Mount(shared, dir, "", unix.MS_BIND, ""))
			require.ErrorIs(t, RemoveAllOnOneMount(dir), ErrOtherMount)
			require.NoError(t, unix.Unmount(dir, 0))
			_, err = os.Stat(filepath.Join(shared, "keep.txt"))
			require.NoError(t, err, "a filesystem mounted at the folder itself keeps its files")
			// The folders left keep their modes (a reviewer's finding:
			// they were left 0700).
			for _, p := range []string{dir, filepath.Join(dir, "a"), filepath.Join(dir, "a", "b")} {
				fi, err := os.Lstat(p)
				require.NoError(t, err)
				require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), p)
			}
		})
	}
}

// TestRemoveAllOnOneMountBesideAnother: removals of one tree at once (a
// retried attempt beside a live one, a user's rm -rf) all succeed, as
// os.RemoveAll's do (a reviewer's finding: a folder the other removed
// failed the removal).
func TestRemoveAllOnOneMountBesideAnother(t *testing.T) {
	for range 5 {
		dir := filepath.Join(t.TempDir(), "tree")
		for i := range 200 {
			p := filepath.Join(dir, fmt.Sprintf("d%d", i%40), fmt.Sprintf("e%d", i%7), fmt.Sprintf("f%d", i))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, nil, 0o644))
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = RemoveAllOnOneMount(dir) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		_, err := os.Lstat(dir)
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}

// TestKillRemovingOnOneMount kills a removal at each entry it removes (a
// worker killed mid-removal), then removes again, as the retried step
// does: the rerun removes the rest, and a filesystem mounted beneath the
// tree keeps everything, killed or not.
func TestKillRemovingOnOneMount(t *testing.T) {
	removal := func(dir string, env ...string) (killed bool, out string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillRemovingChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), append(env, "HUB_REMOVE_CHILD_DIR="+dir)...)
		b, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				return true, string(b)
			}
		}
		return false, string(b)
	}
	trace := filepath.Join(t.TempDir(), "trace")
	killed, out := removal(tree(t), "HUB_FAULT_TRACE="+trace)
	require.False(t, killed, out)
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	points := strings.Fields(string(b))
	require.Len(t, points, 7, "four files and three folders")

	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			dir := tree(t)
			killed, out := removal(dir, "HUB_FAULT_POINT="+point)
			require.True(t, killed, "killed at %s: %s", point, out)
			require.NoError(t, RemoveAllOnOneMount(dir), "the rerun")
			require.NoDirExists(t, dir)
		})
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	for _, point := range points[:3] {
		t.Run("a tmpfs beneath/"+point, func(t *testing.T) {
			dir := tree(t)
			at := filepath.Join(dir, "a", "mnt")
			require.NoError(t, os.Mkdir(at, 0o755))
			require.NoError(t, unix.Mount("tmpfs", at, "tmpfs", 0, "size=1m"))
			t.Cleanup(func() { _ = unix.Unmount(at, unix.MNT_DETACH) })
			require.NoError(t, os.WriteFile(filepath.Join(at, "keep.txt"), []byte("shared data"), 0o644))
			killed, out := removal(dir, "HUB_FAULT_POINT="+point)
			require.True(t, killed, "killed at %s: %s", point, out)
			require.ErrorIs(t, RemoveAllOnOneMount(dir), ErrOtherMount, "the rerun")
			got, err := os.ReadFile(filepath.Join(at, "keep.txt"))
			require.NoError(t, err)
			require.Equal(t, "shared data", string(got))
		})
	}
}

// TestKillRemovingChild removes HUB_REMOVE_CHILD_DIR for
// TestKillRemovingOnOneMount; on its own it does nothing.
func TestKillRemovingChild(t *testing.T) {
	dir := os.Getenv("HUB_REMOVE_CHILD_DIR")
	if dir == "" {
		return
	}
	if err := RemoveAllOnOneMount(dir); err != nil && !errors.Is(err, ErrOtherMount) {
		t.Fatal(err)
	}
}
