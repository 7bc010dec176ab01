package site

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestAFileWithCapabilitiesIsNotReleased: the kernel drops a file's
// capabilities (security.capability, which a user may set on their own
// file through a user namespace) whenever the file is truncated or
// written, root's writes included: a migrate's release lost them, and the
// recall could not bring them back (a reviewer's finding). Such a file is
// kept whole and premigrated, saying why.
func TestAFileWithCapabilitiesIsNotReleased(t *testing.T) {
	t.Parallel()
	for _, index := range []bool{false, true} {
		dir := t.TempDir()
		abs := filepath.Join(dir, "tool")
		data := bytes.Repeat([]byte("binary"), 4096)
		require.NoError(t, os.WriteFile(abs, data, 0o755))
		// VFS_CAP_REVISION_2, cap_net_raw permitted and effective.
		caps := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}
		require.NoError(t, unix.Setxattr(abs, "security.capability", caps, 0))
		root := newRoot(t, dir, index)
		res, err := Migrate(context.Background(), root, []string{"/tool"}, fsTarget(t), "t", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeFailed, []string{"/tool"})
		require.Contains(t, res[0].Message, "capabilities")
		got, err := os.ReadFile(abs)
		require.NoError(t, err)
		require.Equal(t, data, got)
		buf := make([]byte, 64)
		n, err := unix.Getxattr(abs, "security.capability", buf)
		require.NoError(t, err, "index %v", index)
		require.Equal(t, caps, buf[:n])
		e, _, err := root.Stat("/tool")
		require.NoError(t, err)
		require.Equal(t, Premigrated, e.State)
	}
}
