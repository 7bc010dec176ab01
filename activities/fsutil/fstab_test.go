package fsutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnmountedVolume finds the deepest fstab mount point above a folder
// that mountinfo does not list, and nothing where every one is mounted or
// fstab is missing.
func TestUnmountedVolume(t *testing.T) {
	dir := t.TempDir()
	fstab, info := filepath.Join(dir, "fstab"), filepath.Join(dir, "mountinfo")
	require.NoError(t, os.WriteFile(fstab, []byte(`# a comment
UUID=1 / ext4 defaults 0 1
UUID=2 none swap sw 0 0
nas:/data /mnt/data nfs defaults 0 0
nas:/deep /mnt/data/deep nfs defaults 0 0
/dev/sdb1 /mnt/my\040disk ext4 noauto 0 0
proc /proc proc defaults 0 0
`), 0o644))
	require.NoError(t, os.WriteFile(info, []byte(`22 1 8:1 / / rw - ext4 /dev/vda rw
30 22 0:40 / /mnt/data rw - nfs nas:/data rw
31 22 0:5 / /proc rw - proc proc rw
`), 0o644))
	saved := MountTables
	t.Cleanup(func() { MountTables = saved })
	MountTables.Fstab, MountTables.Mountinfo = fstab, info

	require.Equal(t, "/mnt/data/deep", UnmountedVolume("/mnt/data/deep/archive"))
	require.Equal(t, "/mnt/data/deep", UnmountedVolume("/mnt/data/deep"))
	require.Equal(t, "", UnmountedVolume("/mnt/data/other"))
	require.Equal(t, "", UnmountedVolume("/mnt/database"), "a name that only starts like a mount point")
	require.Equal(t, "/mnt/my disk", UnmountedVolume("/mnt/my disk/site"))
	require.Equal(t, "", UnmountedVolume("/srv/site"))

	// A mounted volume beneath an fstab entry that is not mounted.
	require.NoError(t, os.WriteFile(fstab, []byte("/dev/sdb1 /mnt auto nofail 0 2\nnas:/x /mnt/nas nfs defaults 0 0\n"), 0o644))
	require.NoError(t, os.WriteFile(info, []byte("22 1 8:1 / / rw - ext4 /dev/vda rw\n40 22 0:41 / /mnt/nas rw - nfs nas:/x rw\n"), 0o644))
	require.Equal(t, "", UnmountedVolume("/mnt/nas/site"), "the share is mounted")
	require.Equal(t, "/mnt", UnmountedVolume("/mnt/other"))
	// No mount table to go by.
	require.NoError(t, os.WriteFile(info, nil, 0o644))
	require.Equal(t, "", UnmountedVolume("/mnt/other"))

	MountTables.Fstab = filepath.Join(dir, "missing")
	require.Equal(t, "", UnmountedVolume("/mnt/data/deep/archive"), "no fstab, nothing to tell")
}
