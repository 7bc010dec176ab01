package site

import "golang.org/x/sys/unix"

// renameNoReplace renames atomically unless newname exists (EEXIST);
// EINVAL where the filesystem does not support the flag.
func renameNoReplace(olddir int, oldname string, newdir int, newname string) error {
	return unix.Renameat2(olddir, oldname, newdir, newname, unix.RENAME_NOREPLACE)
}
