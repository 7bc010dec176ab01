package targets

import (
	"os"

	"golang.org/x/sys/unix"
)

func fsetxattr(f *os.File, name string, value []byte) error {
	return unix.Fsetxattr(int(f.Fd()), name, value, 0)
}

func getxattr(path, name string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
