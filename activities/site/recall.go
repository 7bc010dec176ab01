package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
)

// Recall brings migrated files back: the data is fetched from the target
// recorded with each file, written over the stub and verified against
// the recorded checksum, the original mtime is restored and the file
// becomes resident. With DeleteOnRecall the remote object is deleted
// too. Premigrated files already have their data; they are skipped unless
// DeleteOnRecall asks for their remote copy to go.
func Recall(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions) ([]Result, error) {
	return recall(ctx, root, paths, targetsFn, opts, opts.DeleteOnRecall, false)
}

// ReverseStub makes premigrated and migrated files resident again and
// forgets their remote copy: migrated data is recalled first. Remote
// objects are deleted only with DeleteRemote.
func ReverseStub(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions) ([]Result, error) {
	return recall(ctx, root, paths, targetsFn, opts, opts.DeleteRemote, true)
}

// recall implements Recall and ReverseStub; forget makes premigrated
// files resident instead of skipping them.
func recall(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions, deleteRemote, forget bool) ([]Result, error) {
	s := newRun(ctx, root, paths, opts)
	drivers := &driverCache{fn: targetsFn}
	var wrote atomic.Bool
	s.each(func(j *job) {
		defer s.prog.add(1)
		if !s.open(j) {
			return
		}
		rec := j.rec
		switch {
		case rec == nil:
			j.finish(CodeSkipped, "resident")
			return
		case rec.State == Premigrated:
			if !forget && !deleteRemote {
				j.finish(CodeSkipped, "data already local (premigrated)")
				return
			}
			j.next, j.note = *rec, "data was local"
			return
		}
		j.next = *rec
		// A crash may have left the whole file in place (before the
		// release truncated it, or after a recall wrote it back).
		if rec.Pending != "" && j.fi.Size() == rec.Size {
			if sum, err := s.hashFile(j.abs); err == nil && sum == rec.Checksum {
				j.note = "data was local"
				return
			}
		}
		driver, err := drivers.get(rec.Target)
		if err != nil {
			j.fail(err)
			return
		}
		if rec.Pending != pendingRecall {
			marked := *rec
			marked.Pending = pendingRecall
			if err := s.root.state.set(j.abs, j.rel, marked); err != nil {
				j.fail(err)
				return
			}
		}
		if err := s.download(j, driver, *rec); err != nil {
			j.fail(err)
			return
		}
		wrote.Store(true)
		j.note = "recalled"
	})
	if s.ctx.Err() != nil {
		return s.cancelRest()
	}
	// One flush for the batch before any record or remote copy goes.
	if wrote.Load() {
		if err := fsutil.SyncFS(s.root.dir); err != nil {
			s.failRest(fmt.Errorf("flush recalled data: %w", err))
		}
	}
	s.finishEach(func(j *job) {
		rec := j.next
		if rec.State == Migrated {
			if err := setMtime(j.abs, timeFromNs(rec.Mtime)); err != nil {
				j.fail(err)
				return
			}
		}
		// Remote first: if that fails the record stays, and a rerun finds
		// the data local and retries the delete.
		if deleteRemote {
			driver, err := drivers.get(rec.Target)
			if err == nil {
				err = deleteObject(s.ctx, driver, rec)
			}
			if err != nil {
				j.fail(err)
				return
			}
			j.note += "; remote copy deleted"
		}
		if err := s.root.state.clear(j.abs, j.rel); err != nil {
			j.fail(err)
		}
	})
	return s.results()
}

// download writes the object over the stub and checks it. The stub's
// bytes are the object's first bytes, so writing from offset 0 keeps
// the file a valid prefix of the data at every moment. On failure the
// file is cut back to a stub.
func (s *stepRun) download(j *job, driver targets.Driver, rec Record) (err error) {
	rc, err := driver.Get(s.ctx, rec.Key)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(j.abs, os.O_WRONLY|openNoFollow, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !j.unchanged(fi) {
		return errors.New("file changed during recall")
	}
	defer func() {
		if err != nil {
			_ = f.Truncate(rec.StubSize)
			_ = setMtime(j.abs, timeFromNs(rec.Mtime))
			_ = s.root.state.set(j.abs, j.rel, rec)
		}
	}()
	h := sha256.New()
	n, err := copyBuffer(f, io.TeeReader(&countingReader{ctx: s.ctx, r: rc, prog: s.prog}, h))
	if err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != rec.Size || sum != rec.Checksum {
		return fmt.Errorf("recalled data (%d bytes, sha256 %s) does not match the original (%d bytes, sha256 %s)", n, sum, rec.Size, rec.Checksum)
	}
	return f.Close()
}

func (s *stepRun) hashFile(name string) (string, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return s.hash(f)
}

// deleteObject deletes the record's remote object unless the key now
// holds different content (another file premigrated to the same key).
func deleteObject(ctx context.Context, driver targets.Driver, rec Record) error {
	obj, err := driver.Stat(ctx, rec.Key)
	if errors.Is(err, targets.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete remote copy: %w", err)
	}
	if obj.Checksum != "" && obj.Checksum != rec.Checksum {
		return nil
	}
	if err := driver.Delete(ctx, rec.Key); err != nil {
		return fmt.Errorf("delete remote copy: %w", err)
	}
	return nil
}

// driverCache asks TargetFunc once per target name and batch.
type driverCache struct {
	fn TargetFunc
	mu sync.Mutex
	m  map[string]targets.Driver
}

func (c *driverCache) get(name string) (targets.Driver, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.m[name]; ok {
		return d, nil
	}
	if c.fn == nil {
		return nil, fmt.Errorf("target %q: no targets configured", name)
	}
	d, err := c.fn(name)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", name, err)
	}
	if c.m == nil {
		c.m = map[string]targets.Driver{}
	}
	c.m[name] = d
	return d, nil
}

// Delete removes files, symlinks and directory trees. With DeleteRemote
// the remote copies of premigrated and migrated files go first, so a
// failure leaves nothing pointing at deleted data. Absent paths are
// skipped.
func Delete(ctx context.Context, root *Root, paths []string, targetsFn TargetFunc, opts StepOptions) ([]Result, error) {
	s := newRun(ctx, root, paths, opts)
	drivers := &driverCache{fn: targetsFn}
	files, _ := newFilter(WalkOptions{Types: []string{TypeFile}})
	s.each(func(j *job) {
		defer s.prog.add(1)
		rel, abs, err := s.root.resolve(j.in)
		if err != nil {
			j.fail(err)
			return
		}
		if rel == "" {
			j.finish(CodeFailed, "refusing to delete the site root")
			return
		}
		fi, err := os.Lstat(abs)
		if err != nil {
			if isNotExist(err) {
				_ = s.root.state.forgetTree(rel)
				j.finish(CodeSkipped, "not found")
				return
			}
			j.fail(err)
			return
		}
		remote := 0
		if s.opts.DeleteRemote {
			var recs []Record
			switch {
			case fi.IsDir():
				err = walkTree(s.ctx, s.root, []string{rel}, walkConfig{filter: files, missingOK: true}, func(items []item) error {
					for _, it := range items {
						if it.rec != nil {
							recs = append(recs, *it.rec)
						}
					}
					return nil
				})
			case fi.Mode().IsRegular():
				var rec *Record
				if rec, err = s.root.state.get(abs, rel); rec != nil {
					recs = append(recs, *rec)
				}
			}
			if err != nil {
				j.fail(err)
				return
			}
			for _, rec := range recs {
				driver, err := drivers.get(rec.Target)
				if err == nil {
					err = deleteObject(s.ctx, driver, rec)
				}
				if err != nil {
					j.fail(err)
					return
				}
				remote++
			}
		}
		if err := os.RemoveAll(abs); err != nil {
			j.fail(err)
			return
		}
		if err := s.root.state.forgetTree(rel); err != nil {
			j.fail(err)
			return
		}
		j.note = "removed"
		if s.opts.DeleteRemote {
			j.note = fmt.Sprintf("removed with %d remote copies", remote)
		}
	})
	return s.results()
}

// CopyIn writes size bytes from r to the root-relative path p (size < 0:
// until EOF), creating parent directories, and sets its mtime unless
// mtime is zero. The data goes to a temporary file renamed over p, so p
// is never seen half-written and an existing file (or stub) at p is
// replaced as a whole, becoming resident. It does not fsync.
func CopyIn(ctx context.Context, root *Root, p string, r io.Reader, size int64, mtime time.Time) error {
	return copyIn(ctx, root, p, r, size, mtime, nil, nil)
}

// copyIn is CopyIn with a progress callback (heartbeats during long
// copies) and a check run after the data is written but before it
// replaces p: a failed check leaves p exactly as it was.
func copyIn(ctx context.Context, root *Root, p string, r io.Reader, size int64, mtime time.Time, beat func(int), check func() error) (err error) {
	rel, abs, err := root.resolve(p)
	if err != nil {
		return err
	}
	if rel == "" {
		return fmt.Errorf("copy in %q: is the site root", p)
	}
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		return fmt.Errorf("copy in %s: is a directory", apiPath(rel))
	}
	dir := parentDir(abs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("copy in %s: %w", apiPath(rel), err)
	}
	tmp, err := fsutil.OpenTemp(ctx, abs)
	if err != nil {
		return fmt.Errorf("copy in %s: %w", apiPath(rel), err)
	}
	committed := false
	defer func() {
		if err != nil && !committed {
			fsutil.Discard(tmp)
		}
	}()
	n, err := copyBuffer(tmp, &countingReader{ctx: ctx, r: r, prog: &progress{fn: beat}})
	if err != nil {
		return fmt.Errorf("copy in %s: %w", apiPath(rel), err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("copy in %s: got %d bytes, expected %d", apiPath(rel), n, size)
	}
	err = tmp.Chmod(0o644)
	if err == nil && !mtime.IsZero() {
		err = os.Chtimes(tmp.Name(), mtime, mtime)
	}
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		committed = true // Commit renames or discards it
		err = fsutil.Commit(tmp, abs)
	}
	if err != nil {
		return fmt.Errorf("copy in %s: %w", apiPath(rel), err)
	}
	return root.state.forgetTree(rel)
}

// RemovePath removes a file, symlink or directory tree (not following a
// final symlink) and forgets its state. Removing an absent path is not an
// error; remote copies are left alone (see Delete).
func RemovePath(root *Root, p string) error {
	rel, abs, err := root.resolve(p)
	if err != nil {
		return err
	}
	if rel == "" {
		return fmt.Errorf("remove %q: is the site root", p)
	}
	if err := os.RemoveAll(abs); err != nil {
		return fmt.Errorf("remove %s: %w", apiPath(rel), err)
	}
	return root.state.forgetTree(rel)
}

// Stat describes one path like Walk does, with its migration record when
// the file is premigrated or migrated (nil otherwise).
func (r *Root) Stat(p string) (Entry, *Record, error) {
	rel, abs, err := r.resolve(p)
	if err != nil {
		return Entry{}, nil, err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return Entry{}, nil, fmt.Errorf("stat %s: %w", apiPath(rel), err)
	}
	typ := typeOf(fi.Mode())
	if typ == "" {
		return Entry{}, nil, fmt.Errorf("stat %s: unsupported file type %s", apiPath(rel), fi.Mode().Type())
	}
	w := &walker{root: r}
	it := w.makeItem(rel, abs, typ, fi)
	if it.State == Resident {
		return it.Entry, nil, nil
	}
	return it.Entry, it.rec, nil
}

func timeFromNs(ns int64) time.Time { return time.Unix(0, ns) }
