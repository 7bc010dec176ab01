package site

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
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
// the copies and returns its error. pinned are the locations rename goes
// through, located before: a move of a folder above one of them since
// (another move completing in between) fails the move for a retry, which
// would otherwise take the file from, or put it at, a path other than the
// one whose records it moves.
//
// Moves of one site run one at a time, under the flock of .hub/moves.lock
// (waiting, heartbeating, as long as ctx lasts: a move of a folder of
// thousands of index records holds it for minutes): two attempts
// of one move (a retried Receive whose first attempt still runs, two
// restores of one trash entry) copied the same records to the same path,
// and the one whose rename lost undid its copies, removing the records of
// the files the other had moved there.
func (r *Root) moveWithRecords(ctx context.Context, oldRel, newRel string, pinned []*loc, rename func() error) error {
	if moveLocking != nil {
		moveLocking(oldRel)
	}
	unlock, err := r.lockMoves(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return r.moveWithRecordsLocked(oldRel, newRel, pinned, rename)
}

// moveWithRecordsLocked is moveWithRecords for a caller holding the moves
// lock.
func (r *Root) moveWithRecordsLocked(oldRel, newRel string, pinned []*loc, rename func() error) error {
	// Records copied onto themselves, or into the tree they come from,
	// would all be dropped with the old path's (a reviewer's finding).
	if within(oldRel, newRel) || within(newRel, oldRel) {
		return fmt.Errorf("%s: cannot be moved to %s, at or below itself", apiPath(oldRel), apiPath(newRel))
	}
	if err := r.stillAt(pinned); err != nil {
		return err
	}
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

// moveLocking, nil outside tests, is called when a move is about to take
// the site's moves lock; moveLockWaiting when it finds another move
// holding it.
var moveLocking func(oldRel string)
var moveLockWaiting func()

func (r *Root) lockMoves(ctx context.Context) (unlock func(), err error) {
	hub := r.state.index.hub
	if err := os.MkdirAll(hub, 0o750); err != nil {
		return nil, err
	}
	err = beatWhile(ctx, func() any { return "waiting for another move of files on this site" }, func() error {
		unlock, err = flockWithin(filepath.Join(hub, movesLockFile), 0, moveLockWaiting, ctx.Done())
		return err
	})
	if errors.Is(err, errLockBusy) {
		return nil, fmt.Errorf("waiting for another move of files on this site: %w", ctx.Err())
	}
	return unlock, err
}

// stillAt fails when the folder of one of ls is no longer the folder at
// its path (moved since it was located).
func (r *Root) stillAt(ls []*loc) error {
	for _, l := range ls {
		if l.parent == r.f {
			continue
		}
		var was, is unix.Stat_t
		if err := unix.Fstat(fdOf(l.parent), &was); err != nil {
			return err
		}
		now, err := openBeneath(r.f, path.Dir(l.rel), oDirPath, 0)
		if err == nil {
			err = unix.Fstat(fdOf(now), &is)
			now.Close()
			if err == nil && (is.Dev != was.Dev || is.Ino != was.Ino) {
				err = errors.New("another folder is there now")
			}
		}
		if err != nil {
			return fmt.Errorf("%s: a folder above it moved while it was located; try again: %w", apiPath(l.rel), err)
		}
	}
	return nil
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
