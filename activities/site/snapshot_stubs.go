package site

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
)

// snapshotStubs copies the migrated files (stubs) of a space into a
// snapshot as stubs of their own: the snapshot's file is a placeholder
// like the space's, with a signed record naming the same remote copy and
// a reference of its own on the target, so that the content outlives the
// space's stub (deleted, or recalled and changed) for as long as the
// snapshot keeps its copy. A recall job on the snapshot's path brings the
// data back.
//
// The copy is built below build (root-relative: the attempt's own tree in
// the build folder) and placed at final; records kept in the index are
// written for the build path and copied to the final one when the tree is
// placed (see place). References are written before the records that name
// them; those of an attempt that does not place its tree are dropped, and
// those of a killed attempt are left for the references audit, which
// walks the build folder too.
type snapshotStubs struct {
	root         *Root
	drivers      *driverSet
	src          string // the space's folder, root-relative
	build, final string
	made         []madeRef
	count        int
	missing      int // stubs whose content the target has lost: copied as the space has them
}

type madeRef struct {
	target string
	rec    Record
}

// copy makes dst (absolute, in the build tree), the snapshot's copy of the
// stub opened as in, at srcRel, whose trusted record is rec.
func (s *snapshotStubs) copy(ctx context.Context, in *os.File, info os.FileInfo, srcRel, dst string, rec Record) (n int64, err error) {
	d, err := s.drivers.get(rec.Target)
	if err != nil {
		return 0, cjPermanent(fmt.Errorf("%s is migrated to target %q, which is not enabled for this site: "+
			"the snapshot cannot keep its content (enable the target, or recall the file)", apiPath(srcRel), rec.Target))
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	// The bytes a stub keeps locally (its first StubSize bytes, the same
	// in every state a stub passes through).
	n, err = io.CopyN(out, in, rec.StubSize)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	mtime := time.Unix(0, rec.Mtime)
	if err == nil {
		err = os.Chmod(dst, info.Mode().Perm())
	}
	if err == nil {
		err = os.Chtimes(dst, mtime, mtime)
	}
	if err != nil {
		return n, err
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		return n, err
	}
	dstRel := s.build + strings.TrimPrefix(srcRel, s.src)
	copyRec := Record{State: Migrated, Size: rec.Size, Mtime: rec.Mtime, Target: rec.Target, Key: rec.Key,
		Checksum: rec.Checksum, StubSize: rec.StubSize, Ino: inode(fi), Btime: birthTime(dst)}
	if rec.contentAddressed() {
		if copyRec.Ref, err = s.root.refID(copyRec.Ino, copyRec.Btime, rec.Checksum); err != nil {
			return n, err
		}
		finalRel := s.final + strings.TrimPrefix(srcRel, s.src)
		if err := s.root.addRef(ctx, d, rec.Checksum, copyRec.Ref, finalRel, copyRec.Ino); err != nil {
			return n, fmt.Errorf("reference the content of %s: %w", apiPath(srcRel), err)
		}
		s.made = append(s.made, madeRef{rec.Target, copyRec})
		// Content the collector moved to the target's trash (its last
		// reference gone meanwhile) is put back.
		ok, err := ensureContent(ctx, d, rec.Checksum, rec.Size)
		if err != nil {
			return n, fmt.Errorf("content of %s: %w", apiPath(srcRel), err)
		}
		if !ok {
			s.missing++
		}
	}
	if err := s.root.state.set(dst, dstRel, copyRec); err != nil {
		return n, err
	}
	s.count++
	return n, nil
}

// place renames the built tree into place as name in parent (rename does
// that, whole, or fails with EEXIST when another attempt placed it first),
// with the index records of its stubs. While the build folder is locked,
// so that no other attempt at the same snapshot is in between: it checks
// that nothing is placed yet, copies the records to the final paths,
// renames, and drops the build's records. A kill in between leaves records
// at both paths, each naming its own inodes: a final one not describing a
// placed file is replaced by the next attempt's or ignored, and the
// build's are dropped with the build's leftovers.
func (s *snapshotStubs) place(build, parent *os.File, name string, rename func() error) error {
	if err := flockWait(build); err != nil && !noLocks(err) {
		return err
	}
	defer unix.Flock(fdOf(build), unix.LOCK_UN)
	if _, err := fstatat(fdOf(parent), name); err == nil {
		return unix.EEXIST
	}
	undo, err := s.root.copyRecords(s.build, s.final)
	if err == nil {
		fsutil.Fault("snapshot.records-copied")
		err = rename()
	}
	if err != nil {
		undo()
		return err
	}
	return s.root.state.forgetTree(s.build)
}

// discard drops what an attempt that did not place its tree wrote beside
// it: its references and its index records.
func (s *snapshotStubs) discard(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for _, m := range s.made {
		if d, err := s.drivers.get(m.target); err == nil {
			_ = dropRef(ctx, d, m.rec)
		}
	}
	s.made = nil
	_ = s.root.state.forgetTree(s.build)
}

// summary tells what a snapshot did with the space's stubs.
func (s *snapshotStubs) summary() string {
	switch {
	case s.count == 0:
		return ""
	case s.missing > 0:
		return fmt.Sprintf("; %d migrated files kept as stubs (%d of them name content their target no longer has, as in the space)", s.count, s.missing)
	}
	return fmt.Sprintf("; %d migrated files kept as stubs", s.count)
}

// buildRel is the root-relative path of an attempt's tree.
func buildRel(own string) string { return path.Join(snapshotsBuild, own, snapshotTree) }

// flockWait takes an exclusive lock on f, waiting for it.
func flockWait(f *os.File) error {
	err := unix.Flock(fdOf(f), unix.LOCK_EX)
	for errors.Is(err, unix.EINTR) {
		err = unix.Flock(fdOf(f), unix.LOCK_EX)
	}
	return err
}
