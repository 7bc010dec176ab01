package targets

import "golang.org/x/sys/unix"

// onNetworkFS tells whether dir is on a filesystem that other hosts write
// to: NFS, SMB, Ceph, Lustre, GPFS, and FUSE (sshfs, s3fs, GlusterFS and
// the like are network filesystems as often as not).
func onNetworkFS(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC,
		unix.CEPH_SUPER_MAGIC, unix.FUSE_SUPER_MAGIC, 0x0bd00bd0 /* Lustre */, 0x47504653 /* GPFS */ :
		return true
	}
	return false
}
