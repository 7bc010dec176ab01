package fsutil

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestOpenFileReadsOthersFiles: the kernel grants O_NOATIME only to a
// file's owner and to root, so a worker reading someone else's file
// without root's file capabilities is refused it (EPERM) and must still
// read the file, as before. Run as root, the open runs on a thread whose
// file-system user is "nobody", which drops root's file capabilities;
// run as anyone else, it reads a file of root's.
func TestOpenFileReadsOthersFiles(t *testing.T) {
	name, asRoot := "/etc/passwd", os.Geteuid() == 0
	if asRoot {
		dir := t.TempDir()
		for _, d := range []string{filepath.Dir(dir), dir} {
			require.NoError(t, os.Chmod(d, 0o755)) // nobody may look inside
		}
		name = filepath.Join(dir, "roots")
		require.NoError(t, os.WriteFile(name, []byte("readable by all"), 0o644))
	}
	want, err := os.ReadFile(name)
	require.NoError(t, err)

	var refused, readErr error
	var got []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Locked and never unlocked: the thread ends with the goroutine,
		// and no other goroutine runs with its identity.
		runtime.LockOSThread()
		if asRoot {
			if _, err := unix.SetfsuidRetUid(65534); err != nil {
				readErr = err
				return
			}
		}
		// The plain open shows the refusal that OpenFile works around.
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOATIME|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		refused = err
		f, err := OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			readErr = err
			return
		}
		defer f.Close()
		got, readErr = io.ReadAll(f)
	}()
	<-done
	require.ErrorIs(t, refused, unix.EPERM, "O_NOATIME on another's file")
	require.NoError(t, readErr)
	require.Equal(t, string(want), string(got))
}

// TestOpenScratchIsInNoFolder: a recall's download is invisible in the
// stub's folder and leaves the folder's time alone (see OpenScratch).
func TestOpenScratchIsInNoFolder(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "stub")
	require.NoError(t, os.WriteFile(dst, []byte("st"), 0o644))
	before, err := os.Stat(dir)
	require.NoError(t, err)
	f, release, err := OpenScratch(t.Context(), dst)
	require.NoError(t, err)
	_, err = f.WriteString("the whole data")
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the stub")
	release()
	after, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, before.ModTime(), after.ModTime())
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}
