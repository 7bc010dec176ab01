package site

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "in"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in", "a.txt"), []byte("a"), 0o644))
	links := map[string]string{
		"abs-out":      outside,
		"rel-out":      "../" + filepath.Base(outside),
		"chain1":       "chain2",
		"chain2":       "in/../rel-out",
		"abs-in":       filepath.Join(dir, "in"),
		"rel-in":       "in",
		"dangling-out": "/nonexistent-hub-test/x",
		"dangling-in":  "in/new.txt",
		"loop1":        "loop2",
		"loop2":        "loop1",
	}
	for name, target := range links {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	// The root is reached through a symlink: containment must compare
	// real paths.
	rootLink := filepath.Join(t.TempDir(), "root")
	require.NoError(t, os.Symlink(dir, rootLink))
	root, err := NewRoot(rootLink)
	require.NoError(t, err)
	realDir, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)

	// locate pins the parent folder and refuses any symlink on the way; a
	// final symlink is the link itself.
	locates := []struct {
		path    string
		want    string // root-relative; ignored on error
		wantErr error
	}{
		{"/in/a.txt", "in/a.txt", nil},
		{"in/a.txt", "in/a.txt", nil},
		{"/", "", nil},
		{"", "", nil},
		{"in/../in/./a.txt", "in/a.txt", nil},
		{"/abs-out", "abs-out", nil},
		{"/dangling-in", "dangling-in", nil},
		{"/in/new/deeper.txt", "", os.ErrNotExist},
		{"/abs-in/a.txt", "", ErrSymlink},
		{"/rel-in/a.txt", "", ErrSymlink},
		{"/abs-out/secret", "", ErrOutsideRoot},
		{"/rel-out/secret", "", ErrSymlink},
		{"/chain1/secret", "", ErrSymlink},
		{"/loop1/x", "", ErrSymlink},
		{"/abs-out/new-file", "", ErrOutsideRoot},
		{"..", "", ErrOutsideRoot},
		{"../x", "", ErrOutsideRoot},
		{"/../x", "", ErrOutsideRoot},
		{"in/../../x", "", ErrOutsideRoot},
		{"/.hub/state.jsonl", "", ErrReserved},
	}
	for _, tt := range locates {
		t.Run("locate "+tt.path, func(t *testing.T) {
			t.Parallel()
			l, err := root.locate(tt.path)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			defer l.close()
			require.Equal(t, tt.want, l.rel)
			fi, err := os.Lstat(l.path())
			require.NoError(t, err)
			want, err := os.Lstat(filepath.Join(realDir, filepath.FromSlash(tt.want)))
			require.NoError(t, err)
			require.True(t, os.SameFile(want, fi), "the same file through the pinned folder")
		})
	}

	// Resolve allows missing components but no symlink at all.
	for p, want := range map[string]string{"/in/new/deeper.txt": "in/new/deeper.txt", "/in/a.txt": "in/a.txt", "/": ""} {
		got, err := root.Resolve(p)
		require.NoError(t, err, p)
		require.Equal(t, filepath.Join(realDir, filepath.FromSlash(want)), got, p)
	}
	for _, p := range []string{"/abs-in/a.txt", "/abs-out", "/abs-out/secret", "/dangling-out/x", "/chain1/secret", "/dangling-in"} {
		_, err := root.Resolve(p)
		require.ErrorIs(t, err, ErrOutsideRoot, p)
		require.ErrorContains(t, err, p, "the error names the path")
	}
}

// TestSymlinkSwapRace swaps a folder for a symlink to a folder outside
// the root, over and over, while steps write into it: a check of the path
// followed by a use by name (as before openat2) lets some writes land
// outside. Nothing outside may ever change.
func TestSymlinkSwapRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	outside, dir := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "f.txt")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o644))
	sw := filepath.Join(dir, "sw")
	require.NoError(t, os.Mkdir(sw, 0o755))
	root := newRoot(t, dir, false)
	target := fsTarget(t)

	stop := keepSwapping(func() {
		_ = os.Rename(sw, sw+".real")
		_ = os.Symlink(outside, sw)
		runtime.Gosched()
		_ = os.Remove(sw)
		_ = os.Rename(sw+".real", sw)
	})
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		_ = CopyIn(ctx, root, "/sw/f.txt", strings.NewReader("written by the hub"), -1, time.Time{})
		_, _ = Migrate(ctx, root, []string{"/sw/f.txt"}, target, "t", StepOptions{})
		_, _ = Delete(ctx, root, []string{"/sw/f.txt"}, only("t", target), StepOptions{})
	}
	stop()
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.Equal(t, "keep", string(got))
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing created outside the root")
}

func TestNewRoot(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	tests := []struct {
		name    string
		dir     string
		wantErr string
	}{
		{"missing", filepath.Join(t.TempDir(), "nope"), "no such file"},
		{"not a directory", file, "not a directory"},
		{"ok", t.TempDir(), ""},
	}
	for _, tt := range tests {
		_, err := NewRoot(tt.dir)
		if tt.wantErr == "" {
			require.NoError(t, err, tt.name)
		} else {
			require.ErrorContains(t, err, tt.wantErr, tt.name)
		}
	}
}

// TestOpenBeneathFallback: where the kernel lacks openat2, opening one
// component at a time refuses and accepts exactly what openat2 does.
func TestOpenBeneathFallback(t *testing.T) {
	t.Parallel()
	outside, dir := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "in", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in", "a.txt"), []byte("a"), 0o644))
	require.NoError(t, os.Symlink("in", filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(dir, "in", "alink")))
	root := newRoot(t, dir, false)
	tests := []struct {
		rel     string
		flags   int
		wantErr error
	}{
		{"in/a.txt", os.O_RDONLY, nil},
		{"in", oDirPath, nil},
		{"in/sub", os.O_RDONLY | oDirectory, nil},
		{"", oDirPath, nil},
		{"link/a.txt", os.O_RDONLY, ErrSymlink},
		{"link", oDirPath, ErrSymlink},
		{"out", os.O_RDONLY | oDirectory, ErrSymlink},
		{"out/x", os.O_RDONLY, ErrSymlink},
		{"in/alink", os.O_RDONLY, ErrSymlink},
		{"in/missing/x", os.O_RDONLY, os.ErrNotExist},
		{"in/a.txt/x", os.O_RDONLY, nil}, // ENOTDIR, checked below
	}
	for _, tt := range tests {
		for name, open := range map[string]func() (*os.File, error){
			"openat2":  func() (*os.File, error) { return openBeneath(root.f, tt.rel, tt.flags, 0) },
			"fallback": func() (*os.File, error) { return openBeneathFallback(root.f, orDot(tt.rel), tt.flags, 0) },
		} {
			f, err := open()
			switch {
			case tt.rel == "in/a.txt/x":
				require.True(t, isNotExist(err), "%s %s: %v", name, tt.rel, err)
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr, "%s %s", name, tt.rel)
			default:
				require.NoError(t, err, "%s %s", name, tt.rel)
				f.Close()
			}
		}
	}
}

func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
