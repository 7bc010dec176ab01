package site

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestARecallsHoleAtTheEndSurvivesAPowerCut: a recall whose data ends in
// zeros leaves them a hole, extending the file to the data's size at the
// end. The journal records that size at once, and after a power cut
// before the batch's flush the data written just before (still in
// memory) read as zeros: a file neither the data's first bytes nor its
// user's, which the next recall refused (a reviewer's finding). The
// written bytes are flushed before the extension now. The power cut is
// ext4's shutdown ioctl (EXT4_IOC_SHUTDOWN with LOGFLUSH: the journal is
// committed, the data not yet written is dropped), on an image of its own.
func TestARecallsHoleAtTheEndSurvivesAPowerCut(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	out, err := exec.Command("mkfs.ext4", "-q", "-F", img, "64M").CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, os.Mkdir(mnt, 0o755))
	mount := func() {
		out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	umount := func() { _ = unix.Unmount(mnt, 0) }
	t.Cleanup(umount)

	data := append(bytes.Repeat([]byte("D"), 1<<20), make([]byte, 1<<20)...) // ends in zeros
	mount()
	abs := filepath.Join(mnt, "f")
	require.NoError(t, os.WriteFile(abs, nil, 0o644)) // the stub (stub_size 0)
	d, err := os.Open(mnt)
	require.NoError(t, err)
	require.NoError(t, unix.Syncfs(int(d.Fd())))
	f, err := os.OpenFile(abs, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, exclusiveLease(f))
	require.True(t, leaseHeld(f))
	require.NoError(t, copyWhileLeased(f, bytes.NewReader(data), true))

	flags := uint32(1) // EXT4_GOING_FLAGS_LOGFLUSH
	const ext4IOCShutdown = 0x8004587D
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, d.Fd(), ext4IOCShutdown, uintptr(unsafe.Pointer(&flags)))
	require.Zero(t, errno)
	f.Close()
	d.Close()
	umount()
	mount()
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	prefix, err := isPrefixOf(bytes.NewReader(got), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, prefix, "after the cut: %d bytes, %d of them the data's first", len(got), bytes.Count(got, []byte("D")))
}
