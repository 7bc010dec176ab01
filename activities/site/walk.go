package site

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// Entry types.
const (
	TypeFile      = "file"
	TypeDirectory = "directory"
	TypeSymlink   = "symlink"
)

// Entry is one walked filesystem object.
type Entry struct {
	// Path is root-relative with a leading "/" ("/projects/a.txt").
	Path string `json:"path"`
	// Type is TypeFile, TypeDirectory or TypeSymlink.
	Type string `json:"type"`
	// Size is the file's logical size: for a migrated stub, the size of
	// the original data. Directories report 0.
	Size int64 `json:"size"`
	// Mtime is the modification time (restored to the original for stubs).
	Mtime time.Time `json:"mtime"`
	// State is the migration state; always Resident for non-files.
	State State `json:"state"`
}

// WalkOptions filters and batches a Walk.
type WalkOptions struct {
	// Include and Exclude are doublestar globs ("projects/**/*.txt")
	// matched against the root-relative path without its leading "/". An
	// entry is reported when it matches some Include (or Include is
	// empty) and no Exclude. A directory matching an Exclude is not
	// descended into.
	Include, Exclude []string
	// Types keeps only these entry types; empty keeps all.
	Types []string
	// States keeps only entries in these states; empty keeps all.
	States []State
	// BatchSize caps the entries per batch; default 1000.
	BatchSize int
	// BatchBytes closes a batch once its files add up to this many bytes;
	// 0 means no byte limit.
	BatchBytes int64
	// AutoBatch replaces BatchSize with a size chosen from the file sizes
	// observed so far (see autoBatchSize).
	AutoBatch bool
	// Workers is the number of directories read in parallel; default
	// 4×GOMAXPROCS, since the walk waits on I/O more than on CPU.
	Workers int
}

const defaultBatchSize = 1000

// Auto batch sizing aims for batches that take about autoBatchTime to
// process, modelling a file's cost as a fixed per-file overhead (open,
// stat, a remote PUT round trip) plus its bytes at a nominal bandwidth:
//
//	batch = autoBatchTime / (autoPerFile + meanFileSize/autoBandwidth)
//
// clamped to [autoMinBatch, autoMaxBatch]. Small files thus travel in big
// batches (per-task overhead dominates), large files in small ones (a
// failed or retried task redoes little). With these constants 4 KiB files
// give 10,000 entries, 1 MiB files 4,000, 100 MiB files 59 and 1 GiB files 5.
const (
	autoBatchTime = 60 * time.Second
	autoPerFile   = 5 * time.Millisecond
	autoBandwidth = 100 << 20 // bytes per second
	autoMinBatch  = 1
	autoMaxBatch  = 10000
)

func autoBatchSize(files, bytes int64) int {
	if files == 0 {
		return defaultBatchSize
	}
	mean := float64(bytes) / float64(files)
	perFile := autoPerFile.Seconds() + mean/autoBandwidth
	n := int(autoBatchTime.Seconds() / perFile)
	return min(max(n, autoMinBatch), autoMaxBatch)
}

// item is a walked entry with the details Snapdiff and Delete need.
type item struct {
	Entry
	ino, dev uint64
	links    uint64  // names of the file (hard links)
	btime    int64   // birth time (ns), when walkConfig.btime asks for it
	rec      *Record // raw record, even when it no longer matches
	// recUnread: the file's state record could not be read or understood
	// (and the file is reported resident).
	recUnread bool
	mode      fs.FileMode // set by describe for kinds the hub does not handle
	// atime and ctime (Unix ns) of files, for policy scans; where the
	// platform does not report them they equal the mtime.
	atime, ctime int64
}

// walkConfig tunes walkTree.
type walkConfig struct {
	workers int
	filter  *filter
	// missingOK ignores given paths that do not exist instead of failing.
	missingOK bool
	// btime fetches birth times, which tell a moved file from a new file
	// that reuses a deleted file's inode.
	btime bool
	// skipFile, when set, drops a file found in a folder before its state
	// is read: a cheap pre-selection (a policy's conditions).
	skipFile func(rel string, fi fs.FileInfo) bool
	// useMarks skips the state attributes of files in folders without a
	// folder mark: for selections a step checks again (policy scans).
	useMarks bool
	// cleanStamps skips the state attributes of files in folders a walk
	// found without records and that have not changed since, and stamps
	// the folders it finds so (see cleanFoldersDir): for discovery.
	cleanStamps bool
	// audit is for the references audit, which must see every record on
	// the site: a walk of the root also walks the site trash (C+J spaces
	// removed with their data, kept for an operator to restore), and the
	// hub's temporary files are reported too.
	audit bool
}

// Walk reports every entry under the given root-relative paths exactly
// once (a path inside another given path is ignored), in no particular
// order, calling emit with batches of entries. Directories are read by
// parallel workers; emit is never called concurrently. Symlinks are
// reported, not followed; special files (fifos, sockets, devices) and the
// root's .hub folder are skipped, and entries named with the prefix of the
// hub's temporary files are not reported (see skipName).
func Walk(ctx context.Context, root *Root, paths []string, opts WalkOptions, emit func(batch []Entry) error) error {
	f, err := newFilter(opts)
	if err != nil {
		return err
	}
	b := batcher{size: opts.BatchSize, bytes: opts.BatchBytes, auto: opts.AutoBatch}
	if b.size <= 0 {
		b.size = defaultBatchSize
	}
	err = walkTree(ctx, root, paths, walkConfig{workers: opts.Workers, filter: f, cleanStamps: true}, func(items []item) error {
		for i := range items {
			if full := b.add(items[i].Entry); full {
				if err := emit(b.take()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(b.cur) > 0 {
		return emit(b.take())
	}
	return nil
}

type batcher struct {
	size  int
	bytes int64
	auto  bool

	cur      []Entry
	curBytes int64
	// seen files and bytes, for AutoBatch.
	files, fileBytes int64
}

// add appends e and reports whether the batch is now full.
func (b *batcher) add(e Entry) bool {
	b.cur = append(b.cur, e)
	if e.Type == TypeFile {
		b.curBytes += e.Size
		b.files++
		b.fileBytes += e.Size
	}
	limit := b.size
	if b.auto {
		limit = autoBatchSize(b.files, b.fileBytes)
	}
	return len(b.cur) >= limit || (b.bytes > 0 && b.curBytes >= b.bytes)
}

func (b *batcher) take() []Entry {
	out := b.cur
	b.cur, b.curBytes = nil, 0
	return out
}

// filter decides which entries are reported; walks always descend into
// directories that are not excluded.
type filter struct {
	include, exclude []string
	types            map[string]bool
	states           map[State]bool
}

func newFilter(opts WalkOptions) (*filter, error) {
	f := &filter{}
	for _, list := range []struct {
		in  []string
		out *[]string
	}{{opts.Include, &f.include}, {opts.Exclude, &f.exclude}} {
		for _, p := range list.in {
			p = strings.TrimLeft(p, "/")
			if !doublestar.ValidatePattern(p) {
				return nil, fmt.Errorf("walk: invalid pattern %q", p)
			}
			*list.out = append(*list.out, p)
		}
	}
	if len(opts.Types) > 0 {
		f.types = map[string]bool{}
		for _, t := range opts.Types {
			if t != TypeFile && t != TypeDirectory && t != TypeSymlink {
				return nil, fmt.Errorf("walk: unknown type %q", t)
			}
			f.types[t] = true
		}
	}
	if len(opts.States) > 0 {
		f.states = map[State]bool{}
		for _, s := range opts.States {
			if s != Resident && s != Premigrated && s != Migrated {
				return nil, fmt.Errorf("walk: unknown state %q", s)
			}
			f.states[s] = true
		}
	}
	return f, nil
}

func (f *filter) excluded(rel string) bool {
	for _, p := range f.exclude {
		if doublestar.MatchUnvalidated(p, rel) {
			return true
		}
	}
	return false
}

// wants is checked before the (costlier) lstat and state lookup.
func (f *filter) wants(rel, typ string) bool {
	if f.types != nil && !f.types[typ] {
		return false
	}
	if len(f.include) == 0 {
		return true
	}
	for _, p := range f.include {
		if doublestar.MatchUnvalidated(p, rel) {
			return true
		}
	}
	return false
}

func (f *filter) wantsState(s State) bool { return f.states == nil || f.states[s] }

func typeOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return TypeFile
	case m.IsDir():
		return TypeDirectory
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	}
	return ""
}

// skipName tells the entries walks do not report: the root's .hub folder
// and names with the prefix of the hub's temporary files, which the hub
// refuses as paths (cleanRel). Only the .hub folder is not walked into: a
// folder a user gave the prefix is walked like any other, since the hub
// reaches the files in it by their paths and they may be stubs.
func skipName(parentRel, name string) bool {
	return strings.HasPrefix(name, tmpPrefix) || (parentRel == "" && name == hubDir)
}

// topLevel drops paths that lie inside another given path, so each entry
// is walked once.
func topLevel(rels []string) []string {
	rels = slices.Clone(rels)
	sort.Strings(rels)
	var out []string
	for _, r := range rels {
		if n := len(out); n > 0 {
			last := out[n-1]
			if last == "" || r == last || strings.HasPrefix(r, last+"/") {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// walkTree walks paths with parallel workers and calls visit, from a
// single goroutine, with chunks of reported items.
func walkTree(ctx context.Context, root *Root, paths []string, cfg walkConfig, visit func([]item) error) error {
	f, workers := cfg.filter, cfg.workers
	if workers <= 0 {
		workers = 4 * runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	w := &walker{ctx: ctx, prog: progressIn(ctx), root: root, f: f, btime: cfg.btime, skipFile: cfg.skipFile, useMarks: cfg.useMarks,
		cleanStamps: cfg.cleanStamps, audit: cfg.audit, started: time.Now(), out: make(chan []item, 2*workers)}
	w.queue.cond = sync.NewCond(&w.queue.mu)

	var rels []string
	for _, p := range paths {
		rel, err := cleanRel(p)
		if err != nil {
			return err
		}
		rels = append(rels, rel)
	}
	var starts []item
	for _, rel := range topLevel(rels) {
		if rel == "" {
			w.queue.push(dirJob{rel: ""})
			if cfg.audit {
				// The site trash and the snapshots being built hold
				// stubs too. Missing or not a folder, either holds no
				// file: readDir skips it.
				w.queue.push(dirJob{rel: trashFolder})
				w.queue.push(dirJob{rel: snapshotsBuild})
			}
			continue
		}
		it, err := w.describe(rel)
		typ := it.Type
		switch {
		case cfg.missingOK && isNotExist(err):
			continue
		case err != nil:
			return err
		case typ == "" || f.excluded(rel):
			continue
		}
		if f.wants(rel, typ) && f.wantsState(it.State) {
			starts = append(starts, it)
		}
		if typ == TypeDirectory {
			w.queue.push(dirJob{rel: rel})
		}
	}
	if len(starts) > 0 {
		if err := visit(starts); err != nil {
			return err
		}
	}

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				job, ok := w.queue.pop()
				if !ok {
					return
				}
				err := w.readDir(job)
				w.queue.done()
				if err != nil {
					cancel(err)
					w.queue.abort()
					return
				}
			}
		}()
	}
	stop := context.AfterFunc(ctx, w.queue.abort)
	defer stop()
	go func() {
		wg.Wait()
		close(w.out)
	}()

	var visitErr error
	for items := range w.out {
		if visitErr != nil {
			continue // drain so workers can exit
		}
		if visitErr = visit(items); visitErr != nil {
			cancel(visitErr)
		}
	}
	if visitErr != nil {
		return visitErr
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

type dirJob struct{ rel string }

// readingDir, when set (by tests), is called as each folder is read.
var readingDir func(rel string)

// describe lstats one API path beneath the root and builds its item (a
// walk's starting point, or Root.Stat). For a kind of file the hub does
// not handle, the item has no Type and only its Path and Mode are set.
func (w *walker) describe(p string) (item, error) {
	l, err := w.root.locate(p)
	if err != nil {
		return item{}, err
	}
	defer l.close()
	fi, err := os.Lstat(l.path())
	if err != nil {
		return item{}, fmt.Errorf("stat %s: %w", apiPath(l.rel), err)
	}
	typ := typeOf(fi.Mode())
	if typ == "" {
		return item{Entry: Entry{Path: apiPath(l.rel)}, mode: fi.Mode()}, nil
	}
	return w.makeItem(l.rel, l.path(), typ, fi), nil
}

// dirQueue is an unbounded LIFO of directories to read (LIFO keeps the
// walk depth-first, which bounds the queue by depth × fan-out). It knows
// when the walk is over: no directory queued and none being read.
type dirQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	jobs    []dirJob
	active  int
	stopped bool
}

func (q *dirQueue) push(j dirJob) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.active++
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *dirQueue) pop() (dirJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.jobs) == 0 && !q.stopped && q.active > 0 {
		q.cond.Wait()
	}
	if q.stopped || len(q.jobs) == 0 {
		return dirJob{}, false
	}
	j := q.jobs[len(q.jobs)-1]
	q.jobs = q.jobs[:len(q.jobs)-1]
	return j, true
}

// done marks one popped directory as read.
func (q *dirQueue) done() {
	q.mu.Lock()
	q.active--
	last := q.active == 0
	q.mu.Unlock()
	if last {
		q.cond.Broadcast()
	}
}

func (q *dirQueue) abort() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

type walker struct {
	ctx   context.Context
	prog  *walkProgress // ticked per chunk of a folder read
	root  *Root
	f     *filter
	btime bool
	out   chan []item
	queue dirQueue

	skipFile    func(rel string, fi fs.FileInfo) bool
	useMarks    bool
	cleanStamps bool
	audit       bool
	started     time.Time
}

// readDir reads one directory in chunks, queueing subdirectories and
// sending reported items.
func (w *walker) readDir(job dirJob) error {
	if readingDir != nil {
		readingDir(job.rel)
	}
	// Each folder is opened beneath the root, so one renamed or swapped
	// for a symlink while we walk is not followed.
	d, err := openBeneath(w.root.f, job.rel, os.O_RDONLY|oDirectory, 0)
	if err != nil {
		if isNotExist(err) || errors.Is(err, ErrSymlink) {
			return nil // removed or replaced while we walked
		}
		return fmt.Errorf("walk %s: %w", apiPath(job.rel), err)
	}
	defer d.Close()
	dirfd := int(d.Fd()) // valid while d is open
	noIndex := w.root.state.index.noRecordsBelow(job.rel)
	noAttr := w.useMarks && w.root.state.marks.unmarked(d)
	var clean folderClean
	if w.cleanStamps {
		clean = w.root.state.marks.cleanState(d, w.started)
		noAttr = noAttr || clean.clean
	}
	// unsure: some file's record was found, not read, or not understood,
	// so the folder cannot be stamped clean.
	unsure := noAttr
	// Each entry's API path is this prefix and its name: one allocation
	// per entry, its name and root-relative path slices of it (the
	// reader's name bytes are valid only until its next fill).
	prefix := apiPath(job.rel)
	if job.rel != "" {
		prefix += "/"
	}
	r := newDirentReader(d)
	defer r.close()
	for {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		more, err := r.fill()
		if err != nil {
			return fmt.Errorf("walk %s: %w", apiPath(job.rel), err)
		}
		w.prog.tick()
		if !more {
			if w.cleanStamps && !unsure {
				w.root.state.marks.stamp(d, clean)
			}
			return nil
		}
		items := make([]item, 0, r.count())
		var buf statBuf // fi below: not kept past its entry
		for n := 1; ; n++ {
			nameBytes, kind, ok := r.next()
			if !ok {
				break
			}
			if n%64 == 0 {
				w.prog.tick() // each entry may take calls of its own (lstat, xattrs) on a slow server
			}
			p := prefix + string(nameBytes)
			name, rel := p[len(prefix):], p[1:]
			if job.rel == "" && name == hubDir {
				continue // the hub's own folder
			}
			typ, err := r.entryType(name, kind)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since the folder was read
				}
				return fmt.Errorf("walk %s: %w", apiPath(job.rel), err)
			}
			if typ == "" || w.f.excluded(rel) {
				unsure = unsure || typ == TypeFile
				continue
			}
			var abs string // valid while d is open; Linux finds entries by name
			if walkNeedsAbs || w.btime {
				abs = d.Name() + "/" + name
			}
			if typ == TypeDirectory {
				w.queue.push(dirJob{rel: rel})
			}
			if skipName(job.rel, name) && !(w.audit && typ == TypeFile) {
				// Not reported; the audit counts the records of every file
				// (a stub a user renamed so keeps its data).
				continue
			}
			if !w.f.wants(rel, typ) {
				unsure = unsure || typ == TypeFile
				continue
			}
			at := entryAt{dirfd: dirfd, name: name, noIndex: noIndex, noAttr: noAttr}
			fi, lerr := lstatAt(at, abs, &buf)
			if lerr != nil {
				if errors.Is(lerr, fs.ErrNotExist) {
					continue
				}
				return fmt.Errorf("walk %s: %w", p, lerr)
			}
			if typ == TypeFile && w.skipFile != nil && w.skipFile(rel, fi) {
				unsure = true
				continue
			}
			it := w.makeItemAt(at, p, abs, typ, fi)
			unsure = unsure || it.rec != nil || it.recUnread
			if w.f.wantsState(it.State) {
				items = append(items, it)
			}
		}
		if len(items) > 0 {
			select {
			case w.out <- items:
			case <-w.ctx.Done():
				return context.Cause(w.ctx)
			}
		}
	}
}

// makeItem builds the reported item; an unreadable state record counts
// as no record, as the file is then treated as resident everywhere.
func (w *walker) makeItem(rel, abs, typ string, fi fs.FileInfo) item {
	return w.makeItemAt(entryAt{}, apiPath(rel), abs, typ, fi)
}

// makeItemAt is makeItem for an entry a walk found in a folder it holds
// open, known by its API path p.
func (w *walker) makeItemAt(at entryAt, p, abs, typ string, fi fs.FileInfo) item {
	rel := p[1:]
	it := item{
		Entry: Entry{Path: p, Type: typ, Mtime: fi.ModTime(), State: Resident},
		ino:   inode(fi),
		dev:   device(fi),
		links: links(fi),
	}
	if w.btime {
		it.btime = birthTime(abs)
	}
	if typ == TypeDirectory {
		return it
	}
	it.Size = fi.Size()
	if typ == TypeFile {
		it.atime, it.ctime = fileTimes(fi)
		rec, err := w.root.state.getAt(at, abs, rel)
		it.rec, it.recUnread = rec, err != nil
		it.State = rec.effective(fi)
		if it.State == Migrated {
			it.Size = rec.Size
		}
	}
	return it
}
