package site

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"
)

// hungVolume is the root of a FUSE filesystem whose attributes, after
// hang, are answered only at answer: a network volume whose server
// stopped answering.
type hungVolume struct {
	fs.Inode
	mu      sync.Mutex
	hanging chan struct{} // open while its answers are held
}

var _ fs.NodeGetattrer = (*hungVolume)(nil)

func (h *hungVolume) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	h.mu.Lock()
	hanging := h.hanging
	h.mu.Unlock()
	if hanging != nil {
		<-hanging
	}
	out.Mode = syscall.S_IFDIR | 0o755
	return 0
}

func (h *hungVolume) hang() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hanging = make(chan struct{})
}

func (h *hungVolume) answer() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hanging != nil {
		close(h.hanging)
		h.hanging = nil
	}
}

// mountHungVolume mounts a hungVolume at the new folder at (root only).
func mountHungVolume(t *testing.T, at string) *hungVolume {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	require.NoError(t, os.Mkdir(at, 0o755))
	root := &hungVolume{}
	server, err := fs.Mount(at, root, &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true, FsName: "hung", Name: "hung"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		root.answer()
		_ = server.Unmount()
	})
	return root
}

// TestAHungVolumeHoldsUpNoOtherFile: a network volume beneath the root
// whose server stopped answering. The mount table's points were looked at
// (statx) on every read of the table, which hung there, and with it every
// step on any file of the site (a reviewer's finding). Which mounts a
// path reaches is told from the table alone.
func TestAHungVolumeHoldsUpNoOtherFile(t *testing.T) {
	dir := t.TempDir()
	vol := mountHungVolume(t, filepath.Join(dir, "netvol"))
	s := newAuditSite(t, dir, t.TempDir(), false)
	vol.hang()
	done := make(chan error, 1)
	go func() {
		abs := filepath.Join(dir, "d", "f.txt")
		_ = os.MkdirAll(filepath.Dir(abs), 0o755)
		_ = os.WriteFile(abs, []byte("on the root's own filesystem"), 0o644)
		res, err := Premigrate(context.Background(), s.a.Root, []string{"/d/f.txt"}, s.target, "archive", StepOptions{})
		if err == nil && res[0].Code != CodeOK {
			err = errors.New(res[0].Message)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		vol.answer()
		<-done
		t.Fatal("the premigrate of a file of the root's own filesystem waited for the hung volume")
	}
}
