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

// heldFile is a FUSE file whose first read waits for release, after
// saying so on reached: a step can be held while it reads the file.
type heldFile struct {
	fs.Inode
	data             []byte
	reached, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	xattrs           map[string][]byte
}

var (
	_ fs.NodeGetattrer  = (*heldFile)(nil)
	_ fs.NodeOpener     = (*heldFile)(nil)
	_ fs.NodeReader     = (*heldFile)(nil)
	_ fs.NodeGetxattrer = (*heldFile)(nil)
	_ fs.NodeSetxattrer = (*heldFile)(nil)
)

// The file keeps extended attributes, as a volume a site's records go on.
func (h *heldFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.xattrs[attr]
	switch {
	case !ok:
		return 0, syscall.ENODATA
	case len(dest) < len(v):
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (h *heldFile) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.xattrs == nil {
		h.xattrs = map[string][]byte{}
	}
	h.xattrs[attr] = append([]byte(nil), data...)
	return 0
}

func (h *heldFile) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o644
	out.Size = uint64(len(h.data))
	out.Mtime = 1_700_000_000
	return 0
}

func (h *heldFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (h *heldFile) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.once.Do(func() {
		close(h.reached)
		<-h.release
	})
	end := min(off+int64(len(dest)), int64(len(h.data)))
	if off >= end {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.data[off:end]), 0
}

// heldVolume is a FUSE filesystem of one file, f.txt, a heldFile.
type heldVolume struct {
	fs.Inode
	file *heldFile
}

var _ fs.NodeOnAdder = (*heldVolume)(nil)

func (v *heldVolume) OnAdd(ctx context.Context) {
	v.AddChild("f.txt", v.NewPersistentInode(ctx, v.file, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// TestAStepOnAVolumeDetachedUnderItWritesNoMarker is the whole-step case
// of TestAMarkerOfAFileOnADetachedVolumeIsRefused: a premigrate reads a
// file of a volume beneath the root, and the volume is unmounted lazily
// while it reads. The marker the step would write next can name no
// mounted volume; written anyway, it would name the root's filesystem and
// an audit would drop it while the volume is away. The step fails the
// file instead and leaves no marker on the target.
func TestAStepOnAVolumeDetachedUnderItWritesNoMarker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	at := filepath.Join(dir, "vol")
	require.NoError(t, os.Mkdir(at, 0o755))
	file := &heldFile{data: []byte("read while its volume goes away"), reached: make(chan struct{}), release: make(chan struct{})}
	server, err := fs.Mount(at, &heldVolume{file: file}, &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true, FsName: "held", Name: "held"}})
	require.NoError(t, err)
	detached := false
	t.Cleanup(func() {
		file.once.Do(func() {})
		if !detached {
			_ = server.Unmount()
		}
	})

	done := make(chan []Result, 1)
	go func() {
		res, err := Premigrate(context.Background(), s.a.Root, []string{"/vol/f.txt"}, s.target, "archive", StepOptions{})
		if err != nil {
			res = []Result{{Code: "error", Message: err.Error()}}
		}
		done <- res
	}()
	select {
	case <-file.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the step never read the volume's file")
	}
	require.NoError(t, syscall.Unmount(at, syscall.MNT_DETACH))
	detached = true
	close(file.release)
	res := <-done
	require.Len(t, res, 1)
	markers, err := filepath.Glob(filepath.Join(s.tdir, "refs", "*", "*"))
	require.NoError(t, err)
	require.Empty(t, markers, "a marker was written for a file of a detached volume")
	require.NotEqual(t, CodeOK, res[0].Code, "the step premigrated a file of a detached volume")
	require.Contains(t, res[0].Message, "not mounted beneath the site root")
}
