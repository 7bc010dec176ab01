package fsutil

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestVisibleMatchesTheKernel builds mounts of many shapes (stacked,
// over a folder above, moved, moved onto a covered folder, recursive
// binds, shared and slave copies, odd names, a mount beneath another,
// file binds, a folder renamed into a covered one, a filesystem mounted
// over "/") and compares, for each, Visible's answer with the kernel's:
// the mount ID statx gives at its point. In a mount namespace of its own
// (unshare), a child process of the test.
func TestVisibleMatchesTheKernel(t *testing.T) {
	if os.Getenv("HUB_VISIBLE_CHILD") == "" {
		if os.Geteuid() != 0 {
			t.Skip("mounting needs root")
		}
		cmd := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0],
			"-test.run=^TestVisibleMatchesTheKernel$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "HUB_VISIBLE_CHILD=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestVisibleMatchesTheKernel/over_the_root")
		return
	}
	shapes := map[string]func(t *testing.T, b string){
		"stacked": func(t *testing.T, b string) {
			for i := 0; i < 3; i++ {
				tmpfsAt(t, b+"/s", fmt.Sprintf("st%d", i))
				require.NoError(t, os.MkdirAll(b+"/s/in", 0o755))
				tmpfsAt(t, b+"/s/in", fmt.Sprintf("stin%d", i))
			}
		},
		"ancestor": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/a/b/c", "deep")
			tmpfsAt(t, b+"/a", "over-a")
			tmpfsAt(t, b+"/a/b/c", "deep2")
			tmpfsAt(t, b+"/ab", "ab")
		},
		"move": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/m", "m")
			tmpfsAt(t, b+"/m/x", "mx")
			require.NoError(t, os.MkdirAll(b+"/n", 0o755))
			require.NoError(t, unix.Mount(b+"/m", b+"/n", "", unix.MS_MOVE, ""))
			// move the top of a stack away
			tmpfsAt(t, b+"/st", "low")
			tmpfsAt(t, b+"/st", "top")
			require.NoError(t, os.MkdirAll(b+"/away", 0o755))
			require.NoError(t, unix.Mount(b+"/st", b+"/away", "", unix.MS_MOVE, ""))
			// move a mount under itself's child? into a folder of another
			tmpfsAt(t, b+"/q", "q")
			require.NoError(t, os.MkdirAll(b+"/n/x/deep", 0o755))
			require.NoError(t, unix.Mount(b+"/q", b+"/n/x/deep", "", unix.MS_MOVE, ""))
		},
		"moveToCoveredFd": func(t *testing.T, b string) {
			require.NoError(t, os.MkdirAll(b+"/c/x", 0o755))
			fd, err := unix.Open(b+"/c/x", unix.O_PATH, 0)
			require.NoError(t, err)
			defer unix.Close(fd)
			tmpfsAt(t, b+"/c", "cover")
			tmpfsAt(t, b+"/mm", "moved")
			require.NoError(t, unix.MoveMount(unix.AT_FDCWD, b+"/mm", fd, "", unix.MOVE_MOUNT_T_EMPTY_PATH))
		},
		"rbind": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/src/v", "v")
			tmpfsAt(t, b+"/src/v", "v-top")
			tmpfsAt(t, b+"/src/w/z", "wz")
			tmpfsAt(t, b+"/src/w", "w-over")
			bindAt(t, b+"/src", b+"/dst", unix.MS_REC)
			bindAt(t, b+"/src/w", b+"/dst2", unix.MS_REC)
		},
		"shared": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/sh", "sh")
			require.NoError(t, unix.Mount("", b+"/sh", "", unix.MS_SHARED, ""))
			require.NoError(t, os.MkdirAll(b+"/sh/x", 0o755))
			require.NoError(t, os.MkdirAll(b+"/sh/y", 0o755))
			bindAt(t, b+"/sh", b+"/peer", 0)
			bindAt(t, b+"/sh", b+"/sl", 0)
			require.NoError(t, unix.Mount("", b+"/sl", "", unix.MS_SLAVE, ""))
			tmpfsAt(t, b+"/peer/x", "peer-first") // then tucked under?
			tmpfsAt(t, b+"/sl/y", "slave-first")
			tmpfsAt(t, b+"/sh/x", "sh-x")
			tmpfsAt(t, b+"/sh/y", "sh-y")
			tmpfsAt(t, b+"/sh", "over-sh") // stacked on a shared one: propagates to peer's root
		},
		"sharedAncestor": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/p", "p")
			require.NoError(t, unix.Mount("", b+"/p", "", unix.MS_SHARED, ""))
			require.NoError(t, os.MkdirAll(b+"/p/a/b", 0o755))
			bindAt(t, b+"/p/a", b+"/q", 0) // a peer showing p/a
			tmpfsAt(t, b+"/q/b", "in-q")   // propagates to p/a/b
			tmpfsAt(t, b+"/p/a", "over-pa")
			tmpfsAt(t, b+"/p/a/b", "in-over")
		},
		"spaces": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/with space/x y", "sp1")
			tmpfsAt(t, b+"/with space", "sp2")
			tmpfsAt(t, b+"/with", "sp3")
			tmpfsAt(t, b+"/tab\there", "tab")
			tmpfsAt(t, b+"/back\\134slash", "bs")
		},
		"beneath": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/be", "be-top")
			require.NoError(t, os.MkdirAll(b+"/src2", 0o755))
			tmpfsAt(t, b+"/src2", "be-under")
			err := unix.MoveMount(unix.AT_FDCWD, b+"/src2", unix.AT_FDCWD, b+"/be", 0x200)
			if err != nil {
				t.Logf("MOVE_MOUNT_BENEATH: %v", err)
			}
		},
		"fileBind": func(t *testing.T, b string) {
			require.NoError(t, os.WriteFile(b+"/f", nil, 0o644))
			require.NoError(t, os.WriteFile(b+"/g", nil, 0o644))
			require.NoError(t, unix.Mount(b+"/g", b+"/f", "", unix.MS_BIND, ""))
			require.NoError(t, unix.Mount(b+"/g", b+"/f", "", unix.MS_BIND, ""))
		},
		"renamedAncestor": func(t *testing.T, b string) {
			tmpfsAt(t, b+"/r1", "r1")
			tmpfsAt(t, b+"/r1/d1/in", "rin")
			tmpfsAt(t, b+"/r2", "r2cover")
			bindAt(t, b+"/r1", b+"/r1b", 0)
		},
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			base := t.TempDir()
			tmpfsAt(t, base, "base-"+n) // a mount at the base itself
			t.Cleanup(func() {
				for unix.Unmount(base, unix.MNT_DETACH) == nil {
				}
			})
			shapes[n](t, base)
			require.Empty(t, misjudged(base))
		})
	}
	t.Run("renamed", func(t *testing.T) {
		b := t.TempDir()
		tmpfsAt(t, b, "base")
		defer unix.Unmount(b, unix.MNT_DETACH)
		tmpfsAt(t, b+"/r1", "r1")
		require.NoError(t, os.MkdirAll(b+"/r1/hid", 0o755))
		bindAt(t, b+"/r1", b+"/r1b", 0) // the same filesystem, without r1's mounts
		tmpfsAt(t, b+"/r1/d1/in", "rin")
		tmpfsAt(t, b+"/r1/hid", "hid-cover")
		require.NoError(t, os.Rename(b+"/r1b/d1", b+"/r1b/hid/d1")) // rin now beneath a covered folder
		require.Empty(t, misjudged(b))
	})
	t.Run("over the root", func(t *testing.T) { // last: it stays
		b := t.TempDir()
		tmpfsAt(t, b+"/vol", "vol-beneath")
		tmpfsAt(t, b+"/empty", "the-new-root")
		t.Cleanup(func() {
			_ = unix.Unmount(b+"/vol", unix.MNT_DETACH)
			_ = unix.Unmount(b+"/empty", unix.MNT_DETACH)
		})
		require.NoError(t, unix.Mount(b+"/empty", "/", "", unix.MS_BIND, ""))
		_, err := os.Stat(b + "/vol") // still reached through the process's root
		require.NoError(t, err)
		require.Empty(t, misjudged(b))
	})
}

func tmpfsAt(t *testing.T, at, name string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(at, 0o755))
	require.NoError(t, unix.Mount(name, at, "tmpfs", 0, "size=1m"))
}

func bindAt(t *testing.T, from, at string, flags uintptr) {
	t.Helper()
	require.NoError(t, os.MkdirAll(at, 0o755))
	require.NoError(t, unix.Mount(from, at, "", unix.MS_BIND|flags, ""))
}

// misjudged lists the mounts at or beneath base whose Visible answer is
// not the kernel's (statx at the point gives the mount's ID).
func misjudged(base string) []string {
	all := Mounts()
	root, _, _ := MountIDOf("/")
	vis := map[uint64]bool{}
	for _, m := range Visible(all, root) {
		vis[m.ID] = true
	}
	var bad []string
	for _, m := range all {
		if m.Point != base && !strings.HasPrefix(m.Point, base+"/") {
			continue
		}
		id, _, ok := MountIDOf(m.Point)
		if reached := ok && id == m.ID; reached != vis[m.ID] {
			bad = append(bad, fmt.Sprintf("mount %d (parent %d) at %q %s: Visible %v, the kernel %v", m.ID, m.Parent, m.Point, m.From, vis[m.ID], reached))
		}
	}
	sort.Strings(bad)
	return bad
}
