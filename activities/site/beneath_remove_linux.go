package site

import "golang.org/x/sys/unix"

// renameNoReplace renames atomically unless newname exists (EEXIST);
// EINVAL where the filesystem does not support the flag.
func renameNoReplace(olddir int, oldname string, newdir int, newname string) error {
	return unix.Renameat2(olddir, oldname, newdir, newname, unix.RENAME_NOREPLACE)
}

// renameExchange swaps the entries of a and b atomically (both must
// exist): neither name is ever empty, and whatever either held is kept.
func renameExchange(a, b *loc) error {
	return unix.Renameat2(fdOf(a.parent), a.name, fdOf(b.parent), b.name, unix.RENAME_EXCHANGE)
}
