//go:build !linux

package targets

import (
	"errors"
	"os"
)

var errNoXattr = errors.New("extended attributes not supported on this platform")

func fsetxattr(*os.File, string, []byte) error { return errNoXattr }

func getxattr(string, string) ([]byte, error) { return nil, errNoXattr }
