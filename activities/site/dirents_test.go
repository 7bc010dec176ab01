//go:build linux

package site

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// direntTestFiles is enough entries, with names of about 40 bytes, for
// several getdents64 calls into the reader's 32 KiB buffer.
const direntTestFiles = 5000

// direntTestEntries is the entries of direntTestTree: the files, 4
// subfolders, 14 files of odd names, 3 symlinks and a fifo.
const direntTestEntries = direntTestFiles + 4 + 14 + 3 + 1

// direntTestTree fills a folder with files, subfolders, symlinks (to a
// file, to a folder, dangling), a fifo and awkward names (spaces,
// unicode, newlines, the longest names the kernel allows), and returns it.
func direntTestTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i := range direntTestFiles {
		name := fmt.Sprintf("file-%05d-with-a-fairly-long-name.dat", i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
	}
	for _, name := range []string{"sub", "sub two", "sub\nthree", "ünïcödé dir"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
	}
	odd := []string{
		"with space.txt", " leading space", "trailing space ", "new\nline", "\nstarts with newline",
		"ünïcödé ✓ 文件.txt", "tab\there", "#hash", "-dash", "..dots", ".hidden", "...",
		strings.Repeat("x", 255),           // the longest name: 255 bytes
		strings.Repeat("é", 127) + "z",     // 255 bytes of two-byte runes
		strings.Repeat("y", 250) + ".link", // a long symlink name below
	}
	for _, name := range odd[:len(odd)-1] {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644))
	}
	require.NoError(t, os.Symlink("with space.txt", filepath.Join(dir, odd[len(odd)-1])))
	require.NoError(t, os.Symlink("sub", filepath.Join(dir, "link to dir")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	require.NoError(t, mkfifo(filepath.Join(dir, "fifo")))
	return dir
}

// readAllDirents reads the folder dir with a direntReader, failing on a
// name seen twice, and returns each entry's type and the number of fills
// that returned records.
func readAllDirents(t *testing.T, dir string) (map[string]string, int) {
	t.Helper()
	d, err := os.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	r := newDirentReader(d)
	defer r.close()
	got := map[string]string{}
	fills := 0
	for {
		more, err := r.fill()
		require.NoError(t, err)
		if !more {
			break
		}
		fills++
		n, count := 0, r.count()
		for {
			name, dtype, ok := r.next()
			if !ok {
				break
			}
			n++
			typ, err := r.entryType(string(name), dtype)
			require.NoError(t, err, "%q", name)
			_, dup := got[string(name)]
			require.False(t, dup, "%q read twice", name)
			got[string(name)] = typ
		}
		require.LessOrEqual(t, n, count, "count bounds the entries of a fill")
	}
	return got, fills
}

// osReadDirTypes is what the walk used to see: os.ReadDir's names and
// typeOf of their types.
func osReadDirTypes(t *testing.T, dir string) map[string]string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	want := map[string]string{}
	for _, de := range des {
		want[de.Name()] = typeOf(de.Type())
	}
	return want
}

func TestDirentReaderMatchesReadDir(t *testing.T) {
	t.Parallel()
	dir := direntTestTree(t)
	got, fills := readAllDirents(t, dir)
	want := osReadDirTypes(t, dir)
	require.Len(t, want, direntTestEntries)
	require.Equal(t, want, got)
	require.Greater(t, fills, 2, "the folder needs several getdents64 calls")

	// Spot checks, should os.ReadDir and the reader ever agree on a wrong answer.
	require.Equal(t, TypeFile, got[strings.Repeat("x", 255)])
	require.Equal(t, TypeFile, got["new\nline"])
	require.Equal(t, TypeDirectory, got["sub\nthree"])
	require.Equal(t, TypeSymlink, got[strings.Repeat("y", 250)+".link"])
	require.Equal(t, TypeSymlink, got["link to dir"])
	require.Equal(t, TypeSymlink, got["dangling"])
	require.Equal(t, "", got["fifo"])
	require.NotContains(t, got, ".")
	require.NotContains(t, got, "..")

	// An empty folder has no entries; "." and ".." are not ones.
	empty, _ := readAllDirents(t, filepath.Join(dir, "sub"))
	require.Empty(t, empty)
}

// TestWalkFolderOfManyEntries walks the reader's test folder: every
// entry but the fifo and the hub's own folder is reported once, by its exact path, across the
// several fills of the folder.
func TestWalkFolderOfManyEntries(t *testing.T) {
	t.Parallel()
	dir := direntTestTree(t)
	root := newRoot(t, dir, false)
	want := map[string]string{}
	for name, typ := range osReadDirTypes(t, dir) {
		if typ != "" && !skipName("", name) {
			want["/"+name] = typ
		}
	}
	got := map[string]string{}
	err := Walk(context.Background(), root, []string{"/"}, WalkOptions{Workers: 2}, func(batch []Entry) error {
		for _, e := range batch {
			_, dup := got[e.Path]
			require.False(t, dup, "%q reported twice", e.Path)
			got[e.Path] = e.Type
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, want, direntTestEntries-1) // no fifo
	require.Equal(t, want, got)
}

// TestDirentTypeUnknown is what filesystems that report DT_UNKNOWN (XFS
// without ftype) get: the entry's type from an lstat, the same typeOf
// gives os.Lstat's mode.
func TestDirentTypeUnknown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir"), 0o755))
	require.NoError(t, os.Symlink("file", filepath.Join(dir, "link")))
	require.NoError(t, os.Symlink("dir", filepath.Join(dir, "dirlink")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	require.NoError(t, mkfifo(filepath.Join(dir, "fifo")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new\nline ü"), nil, 0o644))
	d, err := os.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	fd := int(d.Fd())

	for name, want := range map[string]string{
		"file": TypeFile, "dir": TypeDirectory, "link": TypeSymlink, "dirlink": TypeSymlink,
		"dangling": TypeSymlink, "fifo": "", "new\nline ü": TypeFile,
	} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, want, typeOf(fi.Mode()), "%q", name)
		for _, dtype := range []uint8{unix.DT_UNKNOWN, unix.DT_WHT, 0xff} {
			got, err := direntType(fd, name, dtype)
			require.NoError(t, err, "%q", name)
			require.Equal(t, want, got, "%q with d_type %d", name, dtype)
		}
	}

	// An entry removed between getdents64 and the lstat is not there.
	_, err = direntType(fd, "gone", unix.DT_UNKNOWN)
	require.ErrorIs(t, err, fs.ErrNotExist)

	// A known d_type is believed without an lstat: "gone" does not exist.
	for dtype, want := range map[uint8]string{
		unix.DT_REG: TypeFile, unix.DT_DIR: TypeDirectory, unix.DT_LNK: TypeSymlink,
		unix.DT_FIFO: "", unix.DT_SOCK: "", unix.DT_CHR: "", unix.DT_BLK: "",
	} {
		got, err := direntType(fd, "gone", dtype)
		require.NoError(t, err)
		require.Equal(t, want, got, "d_type %d", dtype)
	}
}
