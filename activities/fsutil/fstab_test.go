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

// TestMounts reads mountinfo's lines: the mount ID, the point (escapes
// undone) and what is mounted (type, source, folder of it), also where
// optional fields come before the separator and where the source is
// empty (its super options were taken for it, and changed with them).
func TestMounts(t *testing.T) {
	info := filepath.Join(t.TempDir(), "mountinfo")
	require.NoError(t, os.WriteFile(info, []byte(`22 1 8:1 / / rw shared:1 - ext4 /dev/vda rw
40 22 0:50 /sub /mnt/my\040part rw shared:7 master:2 - xfs /dev/sdb1 rw,attr2
41 22 0:51 / /mnt/empty rw - tmpfs  rw,size=1024k
`), 0o644))
	saved := MountTables
	t.Cleanup(func() { MountTables = saved })
	MountTables.Mountinfo = info
	require.Equal(t, []Mount{
		{ID: 22, Parent: 1, Dev: "8:1", Point: "/", From: "ext4 /dev/vda /", Super: "rw"},
		{ID: 40, Parent: 22, Dev: "0:50", Point: "/mnt/my part", From: "xfs /dev/sdb1 /sub", Super: "rw,attr2"},
		{ID: 41, Parent: 22, Dev: "0:51", Point: "/mnt/empty", From: "tmpfs  /", Super: "rw,size=1024k"},
	}, Mounts())
}

// TestVisible tells from the table alone the mounts a path reaches: one
// with another mounted over it at its point, one beneath a folder
// another mount of its parent covers, and those mounted in a hidden one
// are not.
func TestVisible(t *testing.T) {
	mounts := []Mount{
		{ID: 1, Parent: 0, Point: "/"},
		{ID: 2, Parent: 1, Point: "/v"},         // covered by 4
		{ID: 3, Parent: 2, Point: "/v/sub"},     // in 2: hidden
		{ID: 4, Parent: 2, Point: "/v"},         // over 2
		{ID: 5, Parent: 1, Point: "/a/b"},       // its folder /a covered by 6
		{ID: 6, Parent: 1, Point: "/a"},         // a sibling over /a
		{ID: 7, Parent: 6, Point: "/a/c"},       // in 6: reached
		{ID: 8, Parent: 1, Point: "/ab"},        // not beneath /a
		{ID: 9, Parent: 1, Point: "/mnt/x y/z"}, // as is
	}
	visible := func(mounts []Mount, root uint64) []uint64 {
		var ids []uint64
		for _, m := range Visible(mounts, root) {
			ids = append(ids, m.ID)
		}
		return ids
	}
	require.Equal(t, []uint64{1, 4, 6, 7, 8, 9}, visible(mounts, 1))
	require.Equal(t, []uint64{1, 4, 6, 7, 8, 9}, visible(mounts, 0), "the process's root not known")
	// A filesystem mounted over "/" after the process's root was set: a
	// path starts on the process's root, below it; nothing is hidden.
	over := append(mounts, Mount{ID: 10, Parent: 1, Point: "/"})
	require.Equal(t, []uint64{1, 4, 6, 7, 8, 9}, visible(over, 1))
}
