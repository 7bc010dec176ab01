package site

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

type change struct {
	Change  Change
	Path    string
	OldPath string
}

func runSnapdiff(t *testing.T, root *Root, managed, manifests string) ([]change, *SnapdiffResult) {
	t.Helper()
	var got []change
	res, err := Snapdiff(context.Background(), root, managed, manifests, func(batch []DiffEntry) error {
		for _, d := range batch {
			got = append(got, change{d.Change, d.Path, d.OldPath})
		}
		return nil
	})
	require.NoError(t, err)
	sort.Slice(got, func(i, j int) bool { return got[i].Path < got[j].Path })
	return got, res
}

func TestSnapdiff(t *testing.T) {
	t.Parallel()
	dir, manifests := t.TempDir(), t.TempDir()
	write := func(rel, content string, mtime time.Time) {
		abs := filepath.Join(dir, "proj", filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(content), 0o644))
		require.NoError(t, os.Chtimes(abs, mtime, mtime))
	}
	t0 := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	write("a.txt", "a", t0)
	write("b.txt", "b", t0)
	write("sub/c.txt", "c", t0)
	write("sub/d.txt", "d", t0)
	write("dirA/x.txt", "x", t0)
	write("keep.txt", "keep", t0)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "outside.txt"), nil, 0o644))
	root := newRoot(t, dir, false)
	p := func(rel string) string { return "/proj/" + rel }

	// First run: everything is created, including the managed folder.
	got, res := runSnapdiff(t, root, "/proj", manifests)
	var want []change
	for _, rel := range []string{"", "a.txt", "b.txt", "dirA", "dirA/x.txt", "keep.txt", "sub", "sub/c.txt", "sub/d.txt"} {
		path := "/proj"
		if rel != "" {
			path = p(rel)
		}
		want = append(want, change{Created, path, ""})
	}
	require.Equal(t, want, got)
	require.Equal(t, 9, res.Created)
	require.Equal(t, 9, res.Entries)

	// Until committed, the next run diffs against the same (empty) base.
	require.NoError(t, res.Discard())
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Len(t, got, 9)
	require.NoError(t, res.Commit())
	require.NoError(t, res.Commit(), "committing twice is harmless")
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Empty(t, got)
	require.NoError(t, res.Commit())

	// Update, move (a file and a directory), delete and create.
	write("b.txt", "bb", t0.Add(time.Hour))
	require.NoError(t, os.Rename(filepath.Join(dir, "proj/sub/c.txt"), filepath.Join(dir, "proj/sub/c2.txt")))
	require.NoError(t, os.Rename(filepath.Join(dir, "proj/dirA"), filepath.Join(dir, "proj/dirB")))
	// f.txt has d.txt's size and mtime and often gets its inode number
	// too: only the birth time tells it is not d.txt moved.
	require.NoError(t, os.Remove(filepath.Join(dir, "proj/sub/d.txt")))
	write("f.txt", "f", t0)
	want = []change{
		{Updated, p("b.txt"), ""},
		{Moved, p("dirB"), p("dirA")},
		{Moved, p("dirB/x.txt"), p("dirA/x.txt")},
		{Created, p("f.txt"), ""},
		{Moved, p("sub/c2.txt"), p("sub/c.txt")},
		{Deleted, p("sub/d.txt"), ""},
	}
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Equal(t, want, got)
	require.Equal(t, SnapdiffResult{Created: 1, Updated: 1, Moved: 3, Deleted: 1, Entries: 9, Pending: res.Pending}, *res)
	require.NoError(t, res.Commit())

	// Migrating a file is no content change: stubs keep size and mtime.
	target := fsTarget(t)
	mres, err := Migrate(context.Background(), root, []string{p("keep.txt")}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, mres, CodeOK, []string{p("keep.txt")})
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.Empty(t, got)
	require.NoError(t, res.Commit())

	// A file replaced by a directory is a deletion and a creation.
	require.NoError(t, os.Remove(filepath.Join(dir, "proj/a.txt")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "proj/a.txt"), 0o755))
	got, res = runSnapdiff(t, root, "/proj", manifests)
	require.ElementsMatch(t, []change{{Created, p("a.txt"), ""}, {Deleted, p("a.txt"), ""}}, got)
	require.NoError(t, res.Commit())

	// Other managed paths have their own manifest; a vanished managed
	// path is refused, not reported deleted (TestSnapdiffRefusesAnUnmountedPath).
	got, res = runSnapdiff(t, root, "/proj/sub", manifests)
	require.Equal(t, []change{{Created, "/proj/sub", ""}, {Created, p("sub/c2.txt"), ""}}, got)
	require.NoError(t, res.Commit())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "proj/sub")))
	_, err = Snapdiff(context.Background(), root, "/proj/sub", manifests, func([]DiffEntry) error { return nil })
	require.ErrorIs(t, err, ErrManagedPathChanged)

	entries, err := os.ReadDir(manifests)
	require.NoError(t, err)
	require.Len(t, entries, 2, "one manifest per managed path, no pending leftovers")
}

func TestCommitSnapdiffRejectsOtherFiles(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "important.txt")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	require.ErrorContains(t, CommitSnapdiff(f), "not a pending manifest")
	require.ErrorContains(t, DiscardSnapdiff(f), "not a pending manifest")
	_, err := os.Stat(f)
	require.NoError(t, err)

	// The activity commits only within its site's manifests folder (the
	// name comes through the workflow and the job's row).
	elsewhere := filepath.Join(t.TempDir(), "a.manifest.pending-0123456789abcdef")
	require.NoError(t, os.WriteFile(elsewhere, []byte("x"), 0o644))
	a := &Activities{Root: newRoot(t, t.TempDir(), false), Site: "s"}
	require.ErrorContains(t, a.CommitSnapdiff(context.Background(), elsewhere), "not in this site's manifests folder")
	_, err = os.Stat(elsewhere)
	require.NoError(t, err)
}

// TestAnOlderManifestIsNotCommittedOverANewer: a resubmit commits the
// manifest of the run whose failures it retried; when a later run of the
// path committed its own since, the older one is discarded, not made the
// base again (the next diff would replay what that later run sent).
func TestAnOlderManifestIsNotCommittedOverANewer(t *testing.T) {
	t.Parallel()
	dir, manifests := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proj"), 0o755))
	root := newRoot(t, dir, false)
	_, older := runSnapdiff(t, root, "/proj", manifests)
	require.NoError(t, os.Chtimes(older.Pending, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proj", "new.txt"), []byte("x"), 0o644))
	_, newer := runSnapdiff(t, root, "/proj", manifests)
	require.NoError(t, newer.Commit())

	require.NoError(t, older.Commit())
	_, err := os.Stat(older.Pending)
	require.ErrorIs(t, err, fs.ErrNotExist, "the older manifest is discarded")
	got, _ := runSnapdiff(t, root, "/proj", manifests)
	require.Empty(t, got, "the base is still the newer run's")
}

// TestSnapdiffRefusesAnUnmountedPath: a managed path that vanished, or is
// on another filesystem than at the last run (an empty mount point), is
// refused instead of reported deleted whole, which a site_sync would
// replay at its destination; files deleted from the path are reported.
func TestSnapdiffRefusesAnUnmountedPath(t *testing.T) {
	t.Parallel()
	dir, manifests := t.TempDir(), t.TempDir()
	proj := filepath.Join(dir, "proj")
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "sub"), 0o755))
	for _, name := range []string{"a.txt", "sub/b.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(proj, filepath.FromSlash(name)), []byte(name), 0o644))
	}
	root := newRoot(t, dir, false)
	_, res := runSnapdiff(t, root, "/proj", manifests)
	require.NoError(t, res.Commit())
	refused := func() {
		t.Helper()
		_, err := Snapdiff(context.Background(), root, "/proj", manifests, func([]DiffEntry) error {
			t.Fatal("changes reported")
			return nil
		})
		require.ErrorIs(t, err, ErrManagedPathChanged)
	}

	// Gone: nothing is reported, and the base stays for when it is back.
	require.NoError(t, os.Rename(proj, proj+".away"))
	refused()
	require.NoError(t, os.Rename(proj+".away", proj))
	got, _ := runSnapdiff(t, root, "/proj", manifests)
	require.Empty(t, got)

	// On another device than the manifest says (as an empty mount point is).
	name := filepath.Join(manifests, manifestName(root, "proj"))
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		var e manifestEntry
		if json.Unmarshal([]byte(line), &e) == nil && e.Path == "/proj" {
			e.Dev++
			out, err := json.Marshal(e)
			require.NoError(t, err)
			lines[i] = string(out)
		}
	}
	require.NoError(t, os.WriteFile(name, []byte(strings.Join(lines, "\n")), 0o644))
	refused()
	require.NoError(t, os.WriteFile(name, b, 0o644))

	// Emptied by hand, on its own filesystem: the deletions are real.
	require.NoError(t, os.RemoveAll(filepath.Join(proj, "sub")))
	require.NoError(t, os.Remove(filepath.Join(proj, "a.txt")))
	got, _ = runSnapdiff(t, root, "/proj", manifests)
	require.Equal(t, []change{{Deleted, "/proj/a.txt", ""}, {Deleted, "/proj/sub", ""}, {Deleted, "/proj/sub/b.txt", ""}}, got)
}

// TestSnapdiffRefusesAFolderBeneathNotMounted: a folder beneath the
// managed path that is a filesystem of its own, not mounted at the next
// run (its mount point empty, or removed), is not reported deleted with
// everything on it (a site_sync would delete the replica's copies): the
// run is refused, naming the folder. Mounted again, the run goes on.
func TestSnapdiffRefusesAFolderBeneathNotMounted(t *testing.T) {
	dir, manifests := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proj"), 0o755))
	mnt := mountTmpfs(t, filepath.Join(dir, "proj")) // /proj/mnt
	for _, n := range []string{"a.txt", "b.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(mnt, n), []byte(n), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proj", "top.txt"), []byte("t"), 0o644))
	root := newRoot(t, dir, false)
	_, res := runSnapdiff(t, root, "/proj", manifests)
	require.NoError(t, res.Commit())

	require.NoError(t, unix.Unmount(mnt, 0))
	diff := func() error {
		_, err := Snapdiff(context.Background(), root, "/proj", manifests, func([]DiffEntry) error { return nil })
		return err
	}
	err := diff()
	require.ErrorIs(t, err, ErrManagedPathChanged)
	require.ErrorContains(t, err, "/proj/mnt is no longer a filesystem of its own")
	require.NoError(t, os.Remove(mnt))
	err = diff()
	require.ErrorIs(t, err, ErrManagedPathChanged)
	require.ErrorContains(t, err, "/proj/mnt is missing")

	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"))
	for _, n := range []string{"a.txt", "b.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(mnt, n), []byte(n), 0o644))
	}
	// Mounted again (a tmpfs, like an NFS share, may get another device
	// number), the run goes on.
	got, _ := runSnapdiff(t, root, "/proj", manifests)
	for _, c := range got {
		require.NotEqual(t, Deleted, c.Change, c.Path)
	}
}

// TestForgetMountReportsTheVolumesFilesDeleted: a filesystem beneath the
// managed path removed on purpose (a dataset destroyed; here a tmpfs
// unmounted and its mount point removed, or left empty) made every run
// fail until the manifest was removed, which lost the run's other
// deletions. hub site forget-mount rewrites the manifest: the next run
// reports the volume's files deleted, with the other changes, and a
// folder that was never a mount point is refused.
func TestForgetMountReportsTheVolumesFilesDeleted(t *testing.T) {
	for _, removed := range []bool{true, false} {
		t.Run(map[bool]string{true: "mount point removed", false: "mount point left empty"}[removed], func(t *testing.T) {
			dir := t.TempDir()
			manifests := filepath.Join(dir, hubDir, "manifests")
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "proj"), 0o755))
			mnt := mountTmpfs(t, filepath.Join(dir, "proj")) // /proj/mnt
			require.NoError(t, os.WriteFile(filepath.Join(mnt, "a.txt"), []byte("a"), 0o644))
			for _, n := range []string{"top.txt", "gone.txt"} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "proj", n), []byte(n), 0o644))
			}
			root := newRoot(t, dir, false)
			_, res := runSnapdiff(t, root, "/proj", manifests)
			require.NoError(t, res.Commit())

			require.NoError(t, unix.Unmount(mnt, 0))
			if removed {
				require.NoError(t, os.Remove(mnt))
			}
			require.NoError(t, os.Remove(filepath.Join(dir, "proj", "gone.txt")))
			_, err := Snapdiff(context.Background(), root, "/proj", manifests, func([]DiffEntry) error { return nil })
			require.ErrorIs(t, err, ErrManagedPathChanged)
			require.ErrorContains(t, err, "hub site forget-mount")

			_, err = ForgetMount(root, "/proj", "/proj/top.txt")
			require.ErrorContains(t, err, "not a filesystem of its own")
			n, err := ForgetMount(root, "/proj", "/proj/mnt")
			require.NoError(t, err)
			require.Equal(t, 2, n)
			got, _ := runSnapdiff(t, root, "/proj", manifests)
			deleted := map[string]bool{}
			for _, c := range got {
				if c.Change == Deleted {
					deleted[c.Path] = true
				}
			}
			want := map[string]bool{"/proj/mnt/a.txt": true, "/proj/gone.txt": true}
			if removed {
				want["/proj/mnt"] = true
			}
			require.Equal(t, want, deleted)
		})
	}
}

// TestForgetMountBesideAPendingRun: a sync's walk ran (its manifest
// pending, the job still replaying its changes) when the operator removed
// the volume and ran forget-mount. The rewritten manifest, newer, made the
// job's commit discard its own (a reviewer's finding): a file the job had
// replayed as deleted, back at the source unchanged, was never reported
// again. Now the job's manifest is committed over it; the next run
// refuses again, and forget-mount run again lets it go on, reporting the
// file.
func TestForgetMountBesideAPendingRun(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, hubDir, "manifests")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proj"), 0o755))
	mnt := mountTmpfs(t, filepath.Join(dir, "proj"))
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "a.txt"), []byte("a"), 0o644))
	x := filepath.Join(dir, "proj", "x.txt")
	require.NoError(t, os.WriteFile(x, []byte("x data"), 0o644))
	root := newRoot(t, dir, false)
	_, res := runSnapdiff(t, root, "/proj", manifests)
	require.NoError(t, res.Commit())

	require.NoError(t, os.Rename(x, filepath.Join(dir, "x.out"))) // reported deleted by run N
	got, runN := runSnapdiff(t, root, "/proj", manifests)
	require.Contains(t, got, change{Deleted, "/proj/x.txt", ""})
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, unix.Unmount(mnt, 0))
	require.NoError(t, os.Remove(mnt))
	_, err := ForgetMount(root, "/proj", "/proj/mnt")
	require.NoError(t, err)
	require.NoError(t, runN.Commit())
	require.NoFileExists(t, runN.Pending, "committed, not discarded")

	require.NoError(t, os.Rename(filepath.Join(dir, "x.out"), x))
	_, err = Snapdiff(context.Background(), root, "/proj", manifests, func([]DiffEntry) error { return nil })
	require.ErrorIs(t, err, ErrManagedPathChanged, "run N's manifest knows the volume")
	_, err = ForgetMount(root, "/proj", "/proj/mnt")
	require.NoError(t, err)
	got, _ = runSnapdiff(t, root, "/proj", manifests)
	require.Contains(t, got, change{Created, "/proj/x.txt", ""})
	require.Contains(t, got, change{Deleted, "/proj/mnt/a.txt", ""})
}
