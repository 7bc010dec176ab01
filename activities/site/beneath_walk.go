//go:build unix

package site

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// openBeneathFallback walks rel (clean, relative, "." for dir itself) one
// component at a time, each opened relative to its parent's descriptor
// with O_NOFOLLOW, which is what openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS) does in one call: no name is ever resolved from
// "/", and a folder swapped for a symlink between two components is
// refused when it is reached. It is how kernels without openat2 (and
// systems other than Linux) open every path; tests run the race tests
// through it too (see beneath_fallback_test.go).
func openBeneathFallback(dir *os.File, rel string, flags int, perm uint32) (*os.File, error) {
	parts := strings.Split(rel, "/")
	cur := int(dir.Fd())
	owned := -1
	defer func() {
		if owned >= 0 {
			unix.Close(owned)
		}
	}()
	flags = sysFlags(flags)
	for i, name := range parts {
		if name == ".." {
			return nil, beneathError(rel, unix.EXDEV)
		}
		last := i == len(parts)-1
		f := oSearch | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		fd, err := unix.Openat(cur, name, f, perm)
		if err != nil {
			// O_NOFOLLOW on a symlink says ELOOP, ENOTDIR (with O_DIRECTORY)
			// or EMLINK (FreeBSD): name it a symlink, as openat2 does.
			if !errors.Is(err, unix.ENOENT) {
				if st, serr := fstatat(cur, name); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					err = unix.ELOOP
				}
			}
			return nil, beneathError(rel, err)
		}
		if owned >= 0 {
			unix.Close(owned)
		}
		owned, cur = fd, fd
	}
	owned = -1
	return newFileBeneath(cur, dir, rel), nil
}

func fstatat(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// beneathError turns the kernel's refusals into the package's errors.
func beneathError(rel string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return &symlinkError{path: apiPath(rel)}
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%q: %w", apiPath(rel), ErrOutsideRoot)
	}
	return &os.PathError{Op: "open", Path: apiPath(rel), Err: err}
}

// mkdirBeneath creates the folder rel and its missing parents beneath
// dir, never through a symlink: each folder is made with mkdirat in its
// parent, opened beneath dir.
func mkdirBeneath(dir *os.File, rel string, perm uint32) error {
	if rel == "" {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		d, err := openBeneath(dir, sub, oDirPath, 0)
		if err == nil {
			d.Close()
			continue
		}
		if !isNotExist(err) {
			return err
		}
		parent, err := openBeneath(dir, strings.Join(parts[:i], "/"), oDirPath, 0)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(parent.Fd()), parts[i], perm)
		parent.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return &os.PathError{Op: "mkdir", Path: apiPath(sub), Err: err}
		}
	}
	return nil
}

// fdOf is the descriptor of an open folder for the *at calls.
func fdOf(f *os.File) int { return int(f.Fd()) }
