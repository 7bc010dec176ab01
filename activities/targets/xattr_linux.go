package targets

import (
	"os"

	"golang.org/x/sys/unix"
)

func fsetxattr(f *os.File, name, value string) error {
	return unix.Fsetxattr(int(f.Fd()), name, []byte(value), 0)
}

func getxattr(path, name string) (string, error) {
	buf := make([]byte, 256)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
