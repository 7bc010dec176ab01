package site

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// Moving a file or folder on a site that keeps records in the state index
// (by path) moves its records too: copyRecords copies them to the new
// path, the caller renames, and finishMove copies those written at the old
// path meanwhile and drops the old path's. A kill in between leaves
// records at both paths, each naming its own inode; the caller's rerun
// finishes. Records kept in the files' attributes move with the files.

// recordCopy is what copyRecords wrote: the records below the new path,
// and the ones they replaced (for undo).
type recordCopy struct {
	ix     *index
	prior  []priorRecord
	copied map[string]Record // new path → the record copied there
}

type priorRecord struct {
	rel string
	rec *Record
}

// undo puts back the records the copy replaced and removes the others.
func (c *recordCopy) undo() {
	for _, p := range c.prior {
		if p.rec != nil {
			_ = c.ix.set(p.rel, *p.rec)
		} else {
			_ = c.ix.remove(p.rel)
		}
	}
}

// recordsCopied, nil outside tests, is called when copyRecords has copied
// the records of oldRel: the instant a step that located its file before
// the move may still write a record at the old path.
var recordsCopied func(oldRel string)

// copyRecords writes the index records at or below oldRel again at the
// same places below newRel, as they are (signed, naming the same inodes,
// which a rename keeps). The result undoes it, and finishMove completes
// the move once the rename is done.
func (r *Root) copyRecords(oldRel, newRel string) (*recordCopy, error) {
	c := &recordCopy{ix: r.state.index, copied: map[string]Record{}}
	err := r.eachRecord(oldRel, func(p string, rec Record) error {
		rel := newRel + strings.TrimPrefix(p, oldRel)
		prev, _ := c.ix.get(rel)
		if err := c.ix.set(rel, rec); err != nil {
			return err
		}
		c.prior = append(c.prior, priorRecord{rel, prev})
		c.copied[rel] = rec
		return nil
	})
	if err == nil && recordsCopied != nil {
		recordsCopied(oldRel)
	}
	return c, err
}

// moveWithRecords runs rename, which moves the file or folder at oldRel
// to newRel, with the index records at or below oldRel: copied first and
// made durable, then the rename, then finishMove. A failed rename undoes
// the copies and returns its error.
func (r *Root) moveWithRecords(oldRel, newRel string, rename func() error) error {
	moved, err := r.copyRecords(oldRel, newRel)
	if err == nil {
		err = r.state.sync()
	}
	if err == nil {
		err = rename()
	}
	if err != nil {
		moved.undo()
		return err
	}
	return r.finishMove(moved, oldRel, newRel)
}

// finishMove ends a move copyRecords prepared, after the rename: the
// records written at oldRel since the copy (by a step that located its
// file before the rename, and wrote its record at the old path) are copied
// too, unless the record at the new path changed since the copy (written
// for the moved file there, which is newer); then oldRel's records go.
func (r *Root) finishMove(c *recordCopy, oldRel, newRel string) error {
	err := r.eachRecord(oldRel, func(p string, rec Record) error {
		rel := newRel + strings.TrimPrefix(p, oldRel)
		was, copied := c.copied[rel]
		if copied && was == rec {
			return nil
		}
		now, err := c.ix.get(rel)
		if err != nil {
			return err
		}
		if (copied && (now == nil || *now != was)) || (!copied && now != nil) {
			return nil // written at the new path since the copy
		}
		return c.ix.set(rel, rec)
	})
	if err != nil {
		return err
	}
	return r.state.forgetTree(oldRel)
}

// eachRecord calls fn with each index record at or below rel and its path.
// Records another path's file holds, and ones that cannot be trusted, are
// passed over: no step would use them.
func (r *Root) eachRecord(rel string, fn func(p string, rec Record) error) error {
	ix := r.state.index
	if err := ix.ensureImported(); err != nil {
		return err
	}
	name, folder, err := ix.paths(rel)
	if err != nil {
		return nil // no record can be there
	}
	one := func(file string) error {
		l, err := readRecordFile(file)
		switch {
		case absent(err), errors.Is(err, ErrUntrustedRecord):
			return nil
		case err != nil:
			return fmt.Errorf("state index: %w", err)
		case l.Record == nil || (l.Path != rel && !strings.HasPrefix(l.Path, rel+"/")):
			return nil
		}
		return fn(l.Path, *l.Record)
	}
	if err := one(name); err != nil {
		return err
	}
	return filepath.WalkDir(folder, func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil && absent(err):
			return nil
		case err != nil:
			return fmt.Errorf("state index: %w", err)
		case e.IsDir() || strings.HasPrefix(e.Name(), "."):
			return nil // a folder, or a writer's temporary file
		}
		return one(p)
	})
}
