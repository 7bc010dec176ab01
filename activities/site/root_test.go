package site

import (
	"os"
	"path/filepath"
	"testing"

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

	tests := []struct {
		path    string
		want    string // relative to the root; ignored on error
		wantErr error
	}{
		{"/in/a.txt", "in/a.txt", nil},
		{"in/a.txt", "in/a.txt", nil},
		{"/", "", nil},
		{"", "", nil},
		{"in/../in/./a.txt", "in/a.txt", nil},
		{"/in/new/deeper.txt", "in/new/deeper.txt", nil},
		{"/abs-in/a.txt", "in/a.txt", nil},
		{"/rel-in/a.txt", "in/a.txt", nil},
		{"/dangling-in", "in/new.txt", nil},
		{"..", "", ErrOutsideRoot},
		{"../x", "", ErrOutsideRoot},
		{"/../x", "", ErrOutsideRoot},
		{"in/../../x", "", ErrOutsideRoot},
		{"/abs-out", "", ErrOutsideRoot},
		{"/abs-out/secret", "", ErrOutsideRoot},
		{"/rel-out/secret", "", ErrOutsideRoot},
		{"/chain1", "", ErrOutsideRoot},
		{"/chain1/secret", "", ErrOutsideRoot},
		{"/dangling-out", "", ErrOutsideRoot},
		{"/abs-out/new-file", "", ErrOutsideRoot},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			got, err := root.Resolve(tt.path)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorContains(t, err, tt.path, "the error names the path")
				return
			}
			require.NoError(t, err)
			require.Equal(t, filepath.Join(realDir, filepath.FromSlash(tt.want)), got)
		})
	}

	_, err = root.Resolve("/loop1")
	require.ErrorContains(t, err, "too many levels of symbolic links")

	// Operations on a link itself do not follow it, so even a link that
	// points outside can be reported and removed.
	rel, abs, err := root.resolve("/abs-out")
	require.NoError(t, err)
	require.Equal(t, "abs-out", rel)
	require.Equal(t, filepath.Join(realDir, "abs-out"), abs)
	_, _, err = root.resolve("/.hub/state.jsonl")
	require.ErrorIs(t, err, ErrReserved)
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
