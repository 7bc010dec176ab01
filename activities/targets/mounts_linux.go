package targets

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountsBeneath lists the mount points strictly below dir, from
// /proc/self/mountinfo (its fifth field, with spaces and the like as
// octal escapes), which names them by their real paths.
func mountsBeneath(dir string) []string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if rel, err := filepath.Rel(dir, p); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			out = append(out, p)
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

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
