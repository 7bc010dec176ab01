package site

import (
	"fmt"
	"syscall"
)

// cjFilesystems names the filesystem magic numbers of statfs(2) that a
// site is likely to sit on.
var cjFilesystems = map[int64]string{
	0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
	0x6969: "nfs", 0x794C7630: "overlay", 0x2FC12FC1: "zfs", 0x47504653: "gpfs",
	0x65735546: "fuse", 0x00C36400: "ceph", 0xFF534D42: "cifs", 0xF2F52010: "f2fs",
	0x5346414F: "afs", 0x0BD00BD0: "lustre",
}

func cjStatfs(dir string) (CJPool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return CJPool{}, err
	}
	fsName, ok := cjFilesystems[int64(st.Type)]
	if !ok {
		fsName = fmt.Sprintf("0x%x", st.Type)
	}
	bs := int64(st.Bsize)
	return CJPool{
		Filesystem: fsName,
		Capacity:   int64(st.Blocks) * bs,
		FreeSpace:  int64(st.Bavail) * bs,
		UsedSpace:  int64(st.Blocks-st.Bfree) * bs,
	}, nil
}
