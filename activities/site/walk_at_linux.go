package site

import (
	"cmp"
	"io/fs"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// walkNeedsAbs: entries are found by name in their open folder.
const walkNeedsAbs = false

// The walk reads each entry relative to its open folder: resolving a full
// path for every file costs several times the system call itself on deep
// trees, and is what made a walk slower than find(1).

// statInfo is an fs.FileInfo from fstatat(2), like os.Lstat's.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

// unix.Stat_t and syscall.Stat_t are the same kernel structure; the
// arrays fail to compile should their sizes ever differ.
var (
	_ [unsafe.Sizeof(unix.Stat_t{}) - unsafe.Sizeof(syscall.Stat_t{})]byte
	_ [unsafe.Sizeof(syscall.Stat_t{}) - unsafe.Sizeof(unix.Stat_t{})]byte
)

// statBuf is where lstatAt puts what it reads: a walk reuses one per
// folder rather than allocating one per file.
type statBuf = statInfo

// lstatAt stats the entry in its open folder without following a
// symlink into buf, valid until buf is reused; abs names it in errors.
func lstatAt(at entryAt, abs string, buf *statBuf) (fs.FileInfo, error) {
	if at.name == "" {
		return os.Lstat(abs)
	}
	fi := buf
	fi.name = at.name
	for {
		err := unix.Fstatat(at.dirfd, at.name, (*unix.Stat_t)(unsafe.Pointer(&fi.st)), unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "lstat", Path: cmp.Or(abs, at.name), Err: err}
		}
		return fi, nil
	}
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Sec, s.st.Mtim.Nsec) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }

// Mode converts the st_mode bits as os.Lstat does.
func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// xattrArgs is struct xattr_args of getxattrat(2).
type xattrArgs struct {
	value uint64
	size  uint32
	flags uint32
}

// lgetxattrAt reads attribute attr of the entry in its open folder with
// getxattrat(2) (Linux 6.13), or by the full path abs where the kernel has
// no such call or the walk holds no folder.
func lgetxattrAt(at entryAt, abs, attr string) ([]byte, error) {
	if at.name == "" {
		return lgetxattr(abs, attr)
	}
	pname, err := unix.BytePtrFromString(at.name)
	if err != nil {
		return nil, err
	}
	pattr, err := unix.BytePtrFromString(attr)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 512)
	for {
		args := xattrArgs{value: uint64(uintptr(unsafe.Pointer(&buf[0]))), size: uint32(len(buf))}
		n, _, errno := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(at.dirfd), uintptr(unsafe.Pointer(pname)),
			unix.AT_SYMLINK_NOFOLLOW, uintptr(unsafe.Pointer(pattr)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
		switch {
		case errno == 0:
			runtime.KeepAlive(buf)
			return buf[:n], nil
		case errno == unix.ERANGE:
			buf = make([]byte, len(buf)*4)
		case errno == unix.EINTR:
		case errno == unix.ENOSYS:
			return lgetxattr(abs, attr)
		default:
			return nil, normalizeXattrErr(errno)
		}
		runtime.KeepAlive(buf)
	}
}
