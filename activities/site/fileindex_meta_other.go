//go:build !linux

package site

func llistxattr(string) ([]string, error) { return nil, errXattrUnsupported }
