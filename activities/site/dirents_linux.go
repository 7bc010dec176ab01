package site

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A walk reads folders with getdents64(2) itself rather than with
// os.File.ReadDir, which allocates an os.DirEntry and a name string per
// entry and reads through an 8 KiB buffer: the walk builds each entry's
// path from the name bytes in the buffer, one allocation per entry, and
// a folder of a thousand files takes one or two system calls.

// direntBufSize is the buffer getdents64 fills: about a thousand short
// names a call.
const direntBufSize = 32 << 10

// direntBufs holds the buffers of the folders being read, one per walk
// worker at a time.
var direntBufs = sync.Pool{New: func() any { return new([direntBufSize]byte) }}

// The fields of struct linux_dirent64: d_ino (u64), d_off (s64), d_reclen
// (u16), d_type (u8), then d_name, NUL-terminated and padded to 8 bytes.
const (
	direntReclenOff = 16
	direntTypeOff   = 18
	direntNameOff   = 19
)

// direntReader reads the entries of one open folder: fill reads the next
// records into its buffer, next parses them one at a time.
type direntReader struct {
	fd   int
	buf  *[direntBufSize]byte
	data []byte // records of the last fill not yet parsed
}

// newDirentReader reads the folder d, which must stay open while the
// reader is used; close returns the buffer.
func newDirentReader(d *os.File) direntReader {
	return direntReader{fd: int(d.Fd()), buf: direntBufs.Get().(*[direntBufSize]byte)}
}

func (r *direntReader) close() {
	direntBufs.Put(r.buf)
	r.buf, r.data = nil, nil
}

// fill reads the next records, and reports false once the folder has
// none left.
func (r *direntReader) fill() (bool, error) {
	for {
		n, err := unix.Getdents(r.fd, r.buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, &fs.PathError{Op: "getdents", Path: fdName(r.fd), Err: err}
		}
		r.data = r.buf[:n]
		return n > 0, nil
	}
}

// count is how many records the last fill left to parse ("." and ".."
// included): the most entries next can still return before the next fill.
func (r *direntReader) count() int {
	n := 0
	for data := r.data; len(data) >= direntNameOff; n++ {
		reclen := int(binary.NativeEndian.Uint16(data[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(data) {
			break
		}
		data = data[reclen:]
	}
	return n
}

// next returns the next entry of the last fill: its name, valid until
// the next fill, and its d_type (see entryType), skipping "." and "..".
// ok is false once the records are parsed.
func (r *direntReader) next() (name []byte, dtype uint8, ok bool) {
	for len(r.data) >= direntNameOff {
		reclen := int(binary.NativeEndian.Uint16(r.data[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(r.data) {
			// The kernel writes whole records; like os.File.ReadDir,
			// give up on a buffer that holds anything else.
			break
		}
		rec := r.data[:reclen]
		r.data = r.data[reclen:]
		name = rec[direntNameOff:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." {
			continue
		}
		return name, rec[direntTypeOff], true
	}
	r.data = nil
	return nil, 0, false
}

// entryType is the type of the entry name of d_type dtype in the folder
// being read.
func (r *direntReader) entryType(name string, dtype uint8) (string, error) {
	return direntType(r.fd, name, dtype)
}

// direntType is the type typeOf gives the entry name of the folder dirfd
// from its d_type: TypeFile, TypeDirectory, TypeSymlink, or "" for kinds
// the hub does not handle. Some filesystems (XFS without ftype, some
// network and FUSE filesystems) report DT_UNKNOWN: the entry is then
// lstat'ed to learn its type, as os.File.ReadDir does, and so is a d_type
// this code does not know.
func direntType(dirfd int, name string, dtype uint8) (string, error) {
	switch dtype {
	case unix.DT_REG:
		return TypeFile, nil
	case unix.DT_DIR:
		return TypeDirectory, nil
	case unix.DT_LNK:
		return TypeSymlink, nil
	case unix.DT_FIFO, unix.DT_SOCK, unix.DT_CHR, unix.DT_BLK:
		return "", nil
	}
	var buf statBuf
	fi, err := lstatAt(entryAt{dirfd: dirfd, name: name}, "", &buf)
	if err != nil {
		return "", err
	}
	return typeOf(fi.Mode()), nil
}
