package site

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// withinSeconds runs f on its own goroutine and fails the test when it
// has not returned after secs seconds (then, after calling stop, writers
// open the FIFOs that may be at the names given, which lets a blocked
// read-only open of one go through, until f returns).
func withinSeconds(t *testing.T, secs int, stop func(), f func(), names ...string) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Duration(secs) * time.Second):
		stop()
		for {
			for _, name := range names {
				if w, err := os.OpenFile(name, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
			}
			select {
			case <-done:
				t.Fatalf("blocked for %d s in an open of a FIFO", secs)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// TestAFIFOSwappedInNeverHangsAStep checks that a step does not hang
// when a user keeps swapping a FIFO in for the file it works on (between
// its lstat and its open): a read-only open of a FIFO waited for a
// writer, past the activity's cancellation, for ever. Each premigrate
// returns; a path that met the FIFO fails, as not a regular file. A
// reviewer's finding.
func TestAFIFOSwappedInNeverHangsAStep(t *testing.T) {
	dir := t.TempDir()
	abs, other := filepath.Join(dir, "f"), filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(abs, bytes.Repeat([]byte("x"), 64<<10), 0o644))
	require.NoError(t, unix.Mkfifo(other, 0o644))
	root := newRoot(t, dir, false)
	target := fsTarget(t)
	stop := keepSwapping(func() {
		_ = unix.Renameat2(unix.AT_FDCWD, abs, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE)
	})
	stopOnce := sync.OnceFunc(stop)
	defer stopOnce()
	notRegular := 0
	withinSeconds(t, 20, stopOnce, func() {
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			res, err := Premigrate(ctx, root, []string{"/f"}, target, "t", StepOptions{})
			cancel()
			if err == nil && len(res) == 1 && res[0].Code == CodeFailed && bytes.Contains([]byte(res[0].Message), []byte(errNotRegular.Error())) {
				notRegular++
			}
			// a premigrated file is premigrated again only once changed
			_ = root.state.clear(abs, "f")
			_ = root.state.clear(other, "other")
		}
	}, abs, other)
	t.Logf("premigrates that met the FIFO at their open: %d", notRegular)
}

// TestAUserFileOpensRefuseAFIFO checks each open of a user's file for
// reading (a premigrate's upload and hash, a touched stub's check, a
// recall's hash on disk, a receive's checksum of the file in place) on a
// FIFO that took the file's name after its lstat: it returns at once,
// with errNotRegular, where it waited for a writer for ever. A
// reviewer's finding.
func TestAUserFileOpensRefuseAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	// j.fi as the step saw the file before the swap
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("stub"), 0o644))
	fi, err := os.Lstat(file)
	require.NoError(t, err)
	root := newRoot(t, dir, false)
	target := fsTarget(t)
	s := &stepRun{ctx: context.Background(), root: root}
	j := &job{rel: "fifo", abs: fifo, fi: fi, prev: &Record{State: Migrated, StubSize: fi.Size(), Target: "t"}}
	for name, open := range map[string]func() error{
		"upload":      func() error { _, err := s.upload(j, target, "t"); return err },
		"contentIs":   func() error { _, _, err := s.contentIs(j, "sum"); return err },
		"touchedStub": func() error { _, err := s.touchedStub(j, target, "t"); return err },
		"hashOnDisk":  func() error { _, err := s.hashOnDisk(fifo); return err },
		"fileSHA256":  func() error { _, err := fileSHA256(fifo); return err },
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			withinSeconds(t, 5, func() {}, func() { err = open() }, fifo)
			require.ErrorIs(t, err, errNotRegular)
		})
	}
}

// TestAUserFileOpenWaitsOutAnotherProgramsLease checks that the
// non-blocking open of a user's file (see TestAUserFileOpensRefuseAFIFO)
// still waits, as a plain open does, for another program's lease on it
// (Samba's, the NFS server's) to be given up, rather than failing at once
// with EWOULDBLOCK.
func TestAUserFileOpenWaitsOutAnotherProgramsLease(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(abs, []byte("data"), 0o644))
	holder, err := os.Open(abs)
	require.NoError(t, err)
	defer holder.Close()
	if _, err := unix.FcntlInt(holder.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		t.Skipf("no lease here: %v", err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = unix.FcntlInt(holder.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
	}()
	start := time.Now()
	f, _, err := openUserFile(abs)
	require.NoError(t, err)
	f.Close()
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "opened under the lease")
}
