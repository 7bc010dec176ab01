package site

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCJCopyFileCopiesOthersFiles: a snapshot copies files it may read
// but not keep the access time of (see fsutil.NoAtime): as root, the copy
// runs on a thread whose file-system user is "nobody".
func TestCJCopyFileCopiesOthersFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user") // CI runs as root
	}
	a := newCJActivities(t)
	src := filepath.Join(a.Root.Dir(), "spaces", "s1", "f.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(src), 0o755))
	require.NoError(t, os.WriteFile(src, []byte("root's file"), 0o644))
	out := t.TempDir()
	for p := filepath.Dir(src); ; p = filepath.Dir(p) { // nobody may walk to both
		require.NoError(t, os.Chmod(p, 0o755))
		if p == filepath.Dir(filepath.Dir(a.Root.Dir())) {
			break
		}
	}
	require.NoError(t, os.Chmod(out, 0o777))
	require.NoError(t, os.Chmod(filepath.Dir(out), 0o755))
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, err = unix.SetfsuidRetUid(65534); err == nil {
			_, err = cjCopyFile(context.Background(), a.Root, "spaces/s1/f.txt", filepath.Join(out, "copy"), nil)
		}
	}()
	<-done
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(out, "copy"))
	require.NoError(t, err)
	require.Equal(t, "root's file", string(got))
}
