package site

import (
	"errors"

	"golang.org/x/sys/unix"
)

// llistxattr lists the names of a file's extended attributes without
// following a final symlink.
func llistxattr(path string) ([]string, error) {
	buf := make([]byte, 1024)
	for {
		n, err := unix.Llistxattr(path, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, len(buf)*4)
			continue
		}
		if err != nil {
			return nil, normalizeXattrErr(err)
		}
		var names []string
		start := 0
		for i := 0; i < n; i++ {
			if buf[i] == 0 {
				if i > start {
					names = append(names, string(buf[start:i]))
				}
				start = i + 1
			}
		}
		return names, nil
	}
}
