//go:build !linux

package targets

import (
	"errors"
	"os"
)

var errNoXattr = errors.New("extended attributes not supported on this platform")

func fsetxattr(*os.File, string, string) error { return errNoXattr }

func getxattr(string, string) (string, error) { return "", errNoXattr }

// syncfs falls back to fsyncing the folder itself; without syncfs(2) the
// objects' data is only as durable as the platform's rename makes it.
func syncfs(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
