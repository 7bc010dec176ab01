package site

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/thehub/hub/internal/fault"
)

// snapshotCopy is what a snapshot's copy needs beyond the files: room
// keeps it from filling the pool, and it copies the migrated files
// (stubs) of a space as stubs of their own: the snapshot's file is a placeholder
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
type snapshotCopy struct {
	root         *Root
	drivers      *driverSet
	src          string // the space's folder, root-relative
	build, final string
	made         []madeRef
	count        int
	missing      int // stubs whose content the target has lost: copied as the space has them
	room         *poolRoom
}

type madeRef struct {
	target string
	rec    Record
}

// copyStub makes dst (absolute, in the build tree), the snapshot's copy of the
// stub opened as in, at srcRel, whose trusted record is rec.
func (s *snapshotCopy) copyStub(ctx context.Context, in *os.File, info os.FileInfo, srcRel, dst string, rec Record) (n int64, err error) {
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
		err = keepAccess(in, info, dst)
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
		if copyRec.Ref, err = s.root.refID(fi, copyRec.Btime, rec.Checksum); err != nil {
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
func (s *snapshotCopy) place(ctx context.Context, build, parent *os.File, name string, rename func() error) error {
	if err := flockWait(build); err != nil && !noLocks(err) {
		return err
	}
	defer unix.Flock(fdOf(build), unix.LOCK_UN)
	if _, err := fstatat(fdOf(parent), name); err == nil {
		return unix.EEXIST
	}
	return s.root.moveWithRecords(ctx, s.build, s.final, nil, func() error {
		fault.Point("snapshot.records-copied")
		return rename()
	})
}

// discard drops what an attempt that did not place its tree wrote beside
// it: its references and its index records.
func (s *snapshotCopy) discard(ctx context.Context) {
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
func (s *snapshotCopy) summary() string {
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

// defaultSnapshotLimit is how full (percent) a snapshot may make the pool
// when the site sets no lock_threshold.
const defaultSnapshotLimit = 95

// poolRemeasure is how many bytes a snapshot copies between two
// measurements of the pool (others write to it meanwhile).
const poolRemeasure = 64 << 20

// errPoolFull: a snapshot stopped before it filled the pool.
var errPoolFull = errors.New("snapshot stopped before the pool filled")

// poolRoom keeps a snapshot's copy from filling the pool past limit
// percent: a full pool fails every user's writes. It measures the pool
// before the copy and again every poolRemeasure bytes, counting what the
// copy wrote in between.
type poolRoom struct {
	measure     func() (used, total int64, err error)
	limit       int64
	used, total int64
	since       int64 // bytes copied since the last measurement
	measured    bool
}

// reserve is called before n more bytes are copied; it fails, for good,
// when they would take the pool past the limit.
func (r *poolRoom) reserve(n int64) error {
	if r == nil {
		return nil
	}
	if !r.measured || r.since+n > poolRemeasure {
		used, total, err := r.measure()
		if err != nil {
			return err
		}
		r.used, r.total, r.since, r.measured = used, total, 0, true
	}
	if r.total > 0 && (r.used+r.since+n)*100 > r.limit*r.total {
		return cjPermanent(fmt.Errorf("%w: the pool is %d%% full and the copy would take it past %d%% (the site's lock_threshold, %d%% when unset): "+
			"the snapshot was not taken; free space, or raise lock_threshold", errPoolFull, (r.used+r.since)*100/r.total, r.limit, defaultSnapshotLimit))
	}
	r.since += n
	return nil
}

// dropTrashedRefs drops the references of the stubs in the site-trash
// entry entry (a removed snapshot, about to be deleted), whose files were
// at oldRel (see trashedRecords). A reference whose target drivers cannot
// open is left for the references audit. Dropping one twice (a rerun) is
// harmless.
func (r *Root) dropTrashedRefs(ctx context.Context, drivers *driverSet, entry, oldRel string) error {
	recs, _, err := r.trashedRecords(entry, oldRel)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if d, err := drivers.get(rec.Target); err == nil {
			if err := dropRef(ctx, d, rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// trashedRecords returns the content-addressed records of the files in
// the site-trash entry entry, which users do not reach: a record read
// from the file's attributes, or from the index at indexRel (the path its
// records are kept under), counts only when the site signed it for that
// very file. Those of files with other names (hard links) are returned
// apart, in linked: their data is still needed.
func (r *Root) trashedRecords(entry, indexRel string) (recs, linked []Record, err error) {
	dir := filepath.Join(r.Dir(), filepath.FromSlash(entry))
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if absent(err) {
				return nil
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		sub, _ := filepath.Rel(dir, p)
		rec, err := r.state.get(p, path.Join(indexRel, filepath.ToSlash(sub)))
		if err != nil || rec == nil || !rec.contentAddressed() {
			return nil
		}
		if stale, err := r.state.trust(rec, inode(fi), func() int64 { return birthTime(p) }); err != nil || stale {
			return nil
		}
		if links(fi) > 1 {
			linked = append(linked, *rec)
		} else {
			recs = append(recs, *rec)
		}
		return nil
	})
	return recs, linked, err
}
