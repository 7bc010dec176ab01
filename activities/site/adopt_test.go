package site

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// legacyTree writes n files as the path-keyed layout left them: the copy
// under the file's path on the target, an empty stub, an unsigned record.
func legacyTree(t *testing.T, dir, tdir string, n int) map[string][]byte {
	files := map[string][]byte{}
	mtime := time.Unix(1600000000, 0)
	for i := range n {
		name := fmt.Sprintf("f%02d.txt", i)
		data := []byte(fmt.Sprintf("legacy data %d", i))
		require.NoError(t, os.WriteFile(filepath.Join(tdir, name), data, 0o644))
		abs := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(abs, nil, 0o644))
		require.NoError(t, os.Chtimes(abs, mtime, mtime))
		setRecord(t, abs, Record{State: Migrated, Size: int64(len(data)), Mtime: mtime.UnixNano(), Target: "t", Key: name, Checksum: sha(data)})
		files["/"+name] = data
	}
	return files
}

// TestAdoptChild is the adopt-records process TestAdoptKilled kills; on
// its own it does nothing.
func TestAdoptChild(t *testing.T) {
	dir := os.Getenv("HUB_ADOPT_CHILD_ROOT")
	if dir == "" {
		return
	}
	_, err := AdoptRecords(context.Background(), newRoot(t, dir, false), false)
	require.NoError(t, err)
}

// TestAdoptKilled kills adopt-records after each record it signs, runs it
// again, and recalls every file: an interrupted adoption loses nothing
// and finishes on the next run.
func TestAdoptKilled(t *testing.T) {
	t.Parallel()
	const n = 5
	for k := 1; k <= n; k++ {
		dir, tdir := t.TempDir(), t.TempDir()
		if newRoot(t, dir, false).StateBackend() != "xattr" {
			t.Fatalf("this test needs user extended attributes in %s", dir)
		}
		files := legacyTree(t, dir, tdir, n)
		cmd := exec.Command(os.Args[0], "-test.run=^TestAdoptChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "HUB_ADOPT_CHILD_ROOT="+dir, fmt.Sprintf("HUB_FAULT_POINT=site.adopted@%d", k))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
		ws, _ := exit.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed after record %d: %s", k, out)

		ctx := context.Background()
		root := newRoot(t, dir, false)
		res, err := AdoptRecords(ctx, root, false)
		require.NoError(t, err)
		require.Equal(t, AdoptResult{Adopted: n - k}, res, "the records signed before the kill stay signed")
		target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
		require.NoError(t, err)
		var paths []string
		for p := range files {
			paths = append(paths, p)
		}
		out2, err := Recall(ctx, root, paths, only("t", target), StepOptions{})
		require.NoError(t, err)
		requireAll(t, out2, CodeOK, paths)
		for p, want := range files {
			got, err := os.ReadFile(filepath.Join(dir, p))
			require.NoError(t, err)
			require.Equal(t, want, got, p)
		}
	}
}
