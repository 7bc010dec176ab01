package site

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// A snapshot's copies stay the worker's, read-only, and are readable by
// those who could read their sources, no one else: the source's owner and
// group become entries of the copy's POSIX ACL (the owner a named user
// with the source's owner bits, the group the copy's own group), beside
// the source's named entries, every write bit removed. Owned by their
// users, copies could be made writable again by them (chmod u+w) and the
// snapshot changed. Where the filesystem keeps no ACLs, a copy is its
// source owner's (who may then chmod it): the one way left for them to
// read it.

// POSIX ACL xattr layout (linux/posix_acl_xattr.h).
const (
	aclVersion   = 2
	aclUserObj   = 0x01
	aclUser      = 0x02
	aclGroupObj  = 0x04
	aclGroup     = 0x08
	aclMask      = 0x10
	aclOther     = 0x20
	aclNoID      = ^uint32(0)
	aclEntrySize = 8
	aclAccess    = "system.posix_acl_access"
	aclDefault   = "system.posix_acl_default"
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// keepAccess gives the copy dst (made by the worker) its source's access:
// src is the source, open, info its stat.
func keepAccess(src *os.File, info fs.FileInfo, dst string) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return os.Chmod(dst, info.Mode().Perm()&^0o222)
	}
	if err := chownCopy(dst, -1, int(st.Gid)); err != nil {
		return err
	}
	named, err := fgetxattr(src, aclAccess)
	if errors.Is(err, errNoAttr) || errors.Is(err, errXattrUnsupported) {
		named = nil
	} else if err != nil {
		return fmt.Errorf("ACL of %s: %w", dst, err)
	}
	acl := snapshotACL(uint32(info.Mode().Perm()), info.IsDir(), st.Uid, parseACL(named))
	switch err := lsetxattr(dst, aclAccess, acl); {
	case errors.Is(err, errXattrUnsupported):
		// No ACLs here: the source's owner owns the copy, or could not
		// read it.
		if err := chownCopy(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		return os.Chmod(dst, info.Mode().Perm()&^0o222)
	case err != nil:
		return fmt.Errorf("ACL of %s: %w", dst, err)
	}
	return nil
}

// snapshotACL is the access ACL of a copy of a file (or a folder) whose
// mode is perm, owner uid, and access ACL entries named: the worker (its
// owner) may read it (and search the folder), the source's owner has its
// owner bits as a named user, the others keep theirs; no entry may write.
func snapshotACL(perm uint32, dir bool, uid uint32, named []aclEntry) []byte {
	ro := func(p uint32) uint16 { return uint16(p & 0o5) }
	worker := ro(perm>>6) | 0o4
	if dir {
		worker |= 0o1
	}
	entries := []aclEntry{{aclUserObj, worker, aclNoID}, {aclUser, ro(perm >> 6), uid},
		{aclGroupObj, ro(perm >> 3), aclNoID}, {aclOther, ro(perm), aclNoID}}
	for _, e := range named {
		switch {
		case e.tag == aclUser && e.id != uid, e.tag == aclGroup:
			entries = append(entries, aclEntry{e.tag, e.perm &^ 0o2, e.id})
		case e.tag == aclGroupObj:
			entries[2].perm = e.perm &^ 0o2 // with a mask, the group's own bits are here
		}
	}
	var mask uint16
	for _, e := range entries {
		if e.tag == aclUser || e.tag == aclGroupObj || e.tag == aclGroup {
			mask |= e.perm
		}
	}
	entries = append(entries, aclEntry{aclMask, mask, aclNoID})
	slices.SortFunc(entries, func(a, b aclEntry) int {
		if a.tag != b.tag {
			return int(a.tag) - int(b.tag)
		}
		return int(int64(a.id) - int64(b.id))
	})
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// parseACL reads an access ACL xattr's entries (none from anything else).
func parseACL(b []byte) []aclEntry {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != aclVersion || (len(b)-4)%aclEntrySize != 0 {
		return nil
	}
	var out []aclEntry
	for b = b[4:]; len(b) >= aclEntrySize; b = b[aclEntrySize:] {
		out = append(out, aclEntry{binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])})
	}
	return out
}

// chownCopy makes a copy uid's (-1: unchanged) and gid's; a worker without
// the right to (not root, or an id the filesystem cannot map) leaves it
// as it is.
func chownCopy(dst string, uid, gid int) error {
	err := os.Lchown(dst, uid, gid)
	if err != nil && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
