package site

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/thehub/hub/activities/fsutil"
)

// Change is how an entry differs from the previous snapdiff run.
type Change string

// Changes reported by Snapdiff.
const (
	Created Change = "created"
	Updated Change = "updated"
	// Moved entries are a deletion and a creation of the same inode with
	// unchanged size, mtime and birth time; OldPath holds the previous path.
	Moved   Change = "moved"
	Deleted Change = "deleted"
)

// DiffEntry is one changed entry. For Deleted entries the Entry fields
// describe the entry as it was and State is empty.
type DiffEntry struct {
	Entry
	Change  Change `json:"change"`
	OldPath string `json:"old_path,omitempty"`
}

// SnapdiffResult summarises a Snapdiff. Pending is the new manifest,
// which only replaces the previous one on Commit; it is a plain path so
// the result can be stored in workflow state and committed later, by
// another activity.
type SnapdiffResult struct {
	Created, Updated, Moved, Deleted int
	// Entries is the number of entries in the new manifest.
	Entries int
	Pending string
}

// Commit makes the new manifest the base of the next Snapdiff.
func (r *SnapdiffResult) Commit() error { return CommitSnapdiff(r.Pending) }

// Discard drops the new manifest; the next Snapdiff diffs against the
// same base again.
func (r *SnapdiffResult) Discard() error { return DiscardSnapdiff(r.Pending) }

// snapdiffBatch is the number of changes passed to each emit call.
const snapdiffBatch = 1000

// manifestVersion is bumped when the manifest line format changes; a
// manifest of another version is treated as absent (full rescan).
const manifestVersion = 2

type manifestHeader struct {
	Version int    `json:"v"`
	Root    string `json:"root"`
	Path    string `json:"path"`
	// UTF8: the manifest holds no name that is not valid UTF-8 (JSON
	// writes U+FFFD for such a byte: see Snapdiff); one written before
	// is read without its names holding U+FFFD (readManifest). A field,
	// not a new version: a node of the earlier version still reads the
	// manifest during a rolling upgrade (a reviewer's finding: with a
	// version 3 it rescanned, and lost the deletions and moves since).
	UTF8 bool `json:"utf8,omitempty"`
}

type manifestEntry struct {
	Path  string `json:"p"`
	Type  string `json:"t"`
	Size  int64  `json:"s"`
	Mtime int64  `json:"m"`
	Ino   uint64 `json:"i"`
	Dev   uint64 `json:"d"`
	Btime int64  `json:"b,omitempty"`
}

// Snapdiff walks managedPath and compares it with the manifest kept in
// manifestDir from the last committed run for the same root and path,
// calling emit with batches of changes. Updated entries are emitted
// during the walk; created, moved and deleted ones once it is complete
// (a move is only known when both its halves are). The first run reports
// everything as created. The new manifest is written next to the old one
// and must be committed (see SnapdiffResult) once the changes have been
// handled; until then every Snapdiff reports against the old base.
//
// Directories are reported as created, moved and deleted but never as
// updated: their mtime changes with every child added or removed.
// The previous manifest is held in memory (roughly 150 bytes per entry).
func Snapdiff(ctx context.Context, root *Root, managedPath, manifestDir string, emit func([]DiffEntry) error) (*SnapdiffResult, error) {
	rel, err := cleanRel(managedPath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(manifestDir, 0o755); err != nil {
		return nil, fmt.Errorf("snapdiff: %w", err)
	}
	final := filepath.Join(manifestDir, manifestName(root, rel))
	hdr := manifestHeader{Version: manifestVersion, Root: root.dir, Path: apiPath(rel), UTF8: true}
	old, err := readManifest(final, hdr, progressIn(ctx))
	if err != nil {
		return nil, err
	}
	if err := sameFilesystem(root, rel, old, final); err != nil {
		return nil, err
	}

	pending, err := newPendingManifest(final, hdr)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			pending.abort()
		}
	}()

	res := &SnapdiffResult{Pending: pending.name}
	out := &diffEmitter{emit: emit}
	mounts := mountPoints(old)
	var created []item
	all, _ := newFilter(WalkOptions{})
	cfg := walkConfig{filter: all, missingOK: true, btime: true}
	err = walkTree(ctx, root, []string{apiPath(rel)}, cfg, func(items []item) error {
		for _, it := range items {
			if !utf8.ValidString(it.Path) {
				// Not in the manifest (JSON would change its name into
				// another's: a reviewer's finding, a sync deleted the
				// destination's file of that other name): reported by
				// discovery, as not taken, each time.
				if err := out.add(DiffEntry{Entry: it.Entry, Change: Created}); err != nil {
					return err
				}
				continue
			}
			me := manifestEntry{Path: it.Path, Type: it.Type, Size: it.Size, Mtime: it.Mtime.UnixNano(), Ino: it.ino, Dev: it.dev, Btime: it.btime}
			if err := pending.add(me); err != nil {
				return err
			}
			res.Entries++
			prev, seen := old[it.Path]
			if !seen {
				created = append(created, it)
				continue
			}
			delete(old, it.Path)
			if mounts[it.Path] && me.Type == TypeDirectory && me.Dev != prev.Dev && sameDevice(root, path.Dir(it.Path), me.Dev) {
				return mountChanged(it.Path, "is no longer a filesystem of its own", final)
			}
			if prev.Type != me.Type {
				// A file replaced by a directory (or vice versa) is a new entry.
				old["\x00"+it.Path] = prev
				created = append(created, it)
				continue
			}
			if me.Type != TypeDirectory && (prev.Size != me.Size || prev.Mtime != me.Mtime || prev.Ino != me.Ino) {
				res.Updated++
				if err := out.add(DiffEntry{Entry: it.Entry, Change: Updated}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	// What is left of the old manifest was deleted, unless a created
	// entry is the same inode unchanged: then it moved. The birth time
	// (where the filesystem has one) rules out a new file that was given
	// a deleted file's inode number, size and mtime (cp -p, tar, rsync).
	type fileID struct {
		dev, ino          uint64
		size, mtim, btime int64
		typ               string
	}
	gone := make(map[fileID]string, len(old))
	for key, prev := range old {
		gone[fileID{prev.Dev, prev.Ino, prev.Size, prev.Mtime, prev.Btime, prev.Type}] = key
	}
	for _, it := range created {
		id := fileID{it.dev, it.ino, it.Size, it.Mtime.UnixNano(), it.btime, it.Type}
		d := DiffEntry{Entry: it.Entry, Change: Created}
		if key, found := gone[id]; found && it.ino != 0 {
			delete(gone, id)
			d.Change, d.OldPath = Moved, old[key].Path
			delete(old, key)
			res.Moved++
		} else {
			res.Created++
		}
		if err := out.add(d); err != nil {
			return nil, err
		}
	}
	for p := range mounts {
		if _, gone := old[p]; gone {
			return nil, mountChanged(p, "is missing", final)
		}
	}
	for _, prev := range old {
		res.Deleted++
		d := DiffEntry{Entry: Entry{Path: prev.Path, Type: prev.Type, Size: prev.Size, Mtime: time.Unix(0, prev.Mtime)}, Change: Deleted}
		if err := out.add(d); err != nil {
			return nil, err
		}
	}
	if err := out.flush(); err != nil {
		return nil, err
	}
	if err := pending.close(); err != nil {
		return nil, err
	}
	ok = true
	return res, nil
}

// ErrManagedPathChanged: the managed path is missing, or on another
// filesystem than at the last run; see sameFilesystem.
var ErrManagedPathChanged = errors.New("the managed path is not the one of the last run")

// sameFilesystem refuses a run whose managed path vanished or now lies on
// another filesystem than at the last run: most likely a filesystem that
// is not mounted (its mount point empty, or gone), not data deleted, and
// reporting every entry deleted would have a site_sync delete the whole
// replica at its destination. Data deleted on purpose still shows as
// deletions: the path stays, on its filesystem, without them.
func sameFilesystem(root *Root, rel string, old map[string]manifestEntry, manifest string) error {
	prev, ok := old[apiPath(rel)]
	if !ok {
		return nil // a first run: nothing would be reported deleted
	}
	how := "is missing"
	fi, err := os.Lstat(filepath.Join(root.dir, rel))
	switch {
	case err == nil && device(fi) == prev.Dev:
		return nil
	case err == nil:
		how = "is on another filesystem than at the last run"
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("snapdiff: %w", err)
	}
	return mountChanged(apiPath(rel), how, manifest)
}

// mountChanged refuses a run in which the folder p (the managed path, or a
// folder beneath it that was a filesystem of its own) is missing or on
// another filesystem than at the last run.
func mountChanged(p, how, manifest string) error {
	return fmt.Errorf("%s %s (not mounted?): the entries of the last run beneath it are not reported deleted; "+
		"if this is meant (a volume or dataset removed on purpose), run hub site forget-mount for a folder beneath "+
		"the managed path, or remove the manifest %s (in the site's .hub/manifests) to start afresh: %w",
		p, how, filepath.Base(manifest), ErrManagedPathChanged)
}

// ForgetMount tells the snapdiff of managedPath that folder, beneath it,
// which was a filesystem of its own at the last run and is now missing or
// empty, was removed on purpose (a btrfs subvolume, a ZFS dataset, a disk
// taken out): the last run's manifest is rewritten with folder and what
// lay beneath it on the folder's filesystem above, so the next run reports
// what is gone as deleted, with the run's other changes, instead of
// refusing. It returns how many entries it rewrote. Run it while no sync
// of managedPath runs (one running commits its own manifest after).
func ForgetMount(root *Root, managedPath, folder string) (int, error) {
	rel, err := cleanRel(managedPath)
	if err != nil {
		return 0, err
	}
	manifestDir := filepath.Join(root.Dir(), hubDir, "manifests")
	final := filepath.Join(manifestDir, manifestName(root, rel))
	hdr := manifestHeader{Version: manifestVersion, Root: root.dir, Path: apiPath(rel), UTF8: true}
	old, err := readManifest(final, hdr, nil)
	if err != nil {
		return 0, err
	}
	folder = path.Clean("/" + folder)
	if !mountPoints(old)[folder] {
		return 0, fmt.Errorf("%s is not a filesystem of its own in the last run of %s's snapdiff: nothing to forget", folder, apiPath(rel))
	}
	above := old[path.Dir(folder)].Dev
	pending, err := newPendingManifest(final, hdr)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range old {
		if e.Path == folder || strings.HasPrefix(e.Path, folder+"/") {
			e.Dev = above
			n++
		}
		if err := pending.add(e); err != nil {
			pending.abort()
			return 0, err
		}
	}
	if err := pending.close(); err != nil {
		return 0, err
	}
	// The rewritten manifest keeps the old one's mtime, so that a sync
	// whose walk ran before (its manifest pending) still commits its own
	// over it: CommitSnapdiff refuses one older than the manifest in
	// place, and that sync's changes would be lost (a file it reported
	// deleted, back unchanged, never reported again). Its manifest knows
	// nothing of this one, and the next run refuses again: forget-mount
	// is run again.
	if fi, err := os.Stat(final); err == nil {
		if err := os.Chtimes(pending.name, fi.ModTime(), fi.ModTime()); err != nil {
			pending.abort()
			return 0, fmt.Errorf("snapdiff: %w", err)
		}
	}
	return n, CommitSnapdiff(pending.name)
}

// sameDevice tells whether the folder p (an API path) is on device dev.
func sameDevice(root *Root, p string, dev uint64) bool {
	fi, err := os.Lstat(filepath.Join(root.dir, filepath.FromSlash(p)))
	return err == nil && device(fi) == dev
}

// mountPoints are the folders of a manifest on another filesystem than
// their parent folder: the mount points beneath the managed path. One
// missing at the next run is most likely a volume not mounted, its empty
// mount point removed, not data deleted; one now on the filesystem above
// it is a volume not mounted, its mount point empty. (Mounted again with
// another device number, as an NFS share may be, it is no such thing.)
func mountPoints(m map[string]manifestEntry) map[string]bool {
	out := map[string]bool{}
	for p, e := range m {
		if e.Type != TypeDirectory {
			continue
		}
		if parent, ok := m[path.Dir(p)]; ok && e.Dev != 0 && parent.Dev != 0 && parent.Dev != e.Dev {
			out[p] = true
		}
	}
	return out
}

type diffEmitter struct {
	emit func([]DiffEntry) error
	cur  []DiffEntry
}

func (e *diffEmitter) add(d DiffEntry) error {
	e.cur = append(e.cur, d)
	if len(e.cur) >= snapdiffBatch {
		return e.flush()
	}
	return nil
}

func (e *diffEmitter) flush() error {
	if len(e.cur) == 0 {
		return nil
	}
	batch := e.cur
	e.cur = nil
	return e.emit(batch)
}

// manifestName keys the manifest by root and managed path, so several
// sites and managed paths can share one manifest folder.
func manifestName(root *Root, rel string) string {
	h := sha256.Sum256([]byte(root.dir + "\x00" + apiPath(rel)))
	return hex.EncodeToString(h[:16]) + ".manifest"
}

// readManifest loads the previous manifest keyed by path; a missing
// manifest, or one written for something else, is an empty base. It ticks
// prog as it reads (a manifest of millions of entries takes a while).
func readManifest(name string, want manifestHeader, prog *walkProgress) (map[string]manifestEntry, error) {
	old := map[string]manifestEntry{}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return old, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapdiff: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() {
		return old, sc.Err()
	}
	var hdr manifestHeader
	if err := json.Unmarshal(sc.Bytes(), &hdr); err != nil || hdr.Version != want.Version || hdr.Root != want.Root || hdr.Path != want.Path {
		return old, nil
	}
	for sc.Scan() {
		var e manifestEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("snapdiff: manifest %s: %w", name, err)
		}
		if !hdr.UTF8 && strings.ContainsRune(e.Path, utf8.RuneError) {
			// An earlier manifest wrote a name that is not UTF-8 with U+FFFD (JSON):
			// such an entry may stand for a file whose name is another,
			// and would be diffed as that name's deletion or move. Left
			// out, a file truly so named is found created again.
			continue
		}
		old[e.Path] = e
		if len(old)%4096 == 0 {
			prog.tick()
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("snapdiff: manifest %s: %w", name, err)
	}
	return old, nil
}

type pendingManifest struct {
	name string
	f    *os.File
	w    *bufio.Writer
	enc  *json.Encoder
}

// pendingSuffix separates a pending manifest's random part from the final
// name it commits to.
const pendingSuffix = ".pending-"

var pendingRE = regexp.MustCompile(`^(.+\.manifest)\.pending-[0-9a-f]{16}$`)

func newPendingManifest(final string, hdr manifestHeader) (*pendingManifest, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := final + pendingSuffix + hex.EncodeToString(rnd[:])
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("snapdiff: %w", err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	p := &pendingManifest{name: name, f: f, w: w, enc: json.NewEncoder(w)}
	if err := p.enc.Encode(hdr); err != nil {
		p.abort()
		return nil, fmt.Errorf("snapdiff: %w", err)
	}
	return p, nil
}

func (p *pendingManifest) add(e manifestEntry) error {
	if err := p.enc.Encode(e); err != nil {
		return fmt.Errorf("snapdiff: %w", err)
	}
	return nil
}

func (p *pendingManifest) close() error {
	err := p.w.Flush()
	if err == nil {
		err = p.f.Sync()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p.name)
		return fmt.Errorf("snapdiff: %w", err)
	}
	return nil
}

func (p *pendingManifest) abort() {
	_ = p.f.Close()
	_ = os.Remove(p.name)
}

// CommitSnapdiff atomically replaces the manifest with the pending one
// returned by Snapdiff. Committing an already committed manifest again
// is not an error, so a retried commit activity is harmless.
func CommitSnapdiff(pending string) error {
	m := pendingRE.FindStringSubmatch(filepath.Base(pending))
	if m == nil {
		return fmt.Errorf("snapdiff: %q is not a pending manifest", pending)
	}
	final := filepath.Join(filepath.Dir(pending), m[1])
	if p, err := os.Stat(pending); err == nil {
		if f, err := os.Stat(final); err == nil && f.ModTime().After(p.ModTime()) {
			// A later walk's manifest was committed since (a resubmit
			// commits its first run's): this one would take the base back.
			return DiscardSnapdiff(pending)
		}
	}
	if err := os.Rename(pending, final); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(final); serr == nil {
				return nil
			}
		}
		return fmt.Errorf("snapdiff: commit: %w", err)
	}
	if err := fsutil.SyncDir(filepath.Dir(final)); err != nil {
		return fmt.Errorf("snapdiff: commit: %w", err)
	}
	return nil
}

// DiscardSnapdiff removes a pending manifest; removing it twice is fine.
func DiscardSnapdiff(pending string) error {
	if pendingRE.FindStringSubmatch(filepath.Base(pending)) == nil {
		return fmt.Errorf("snapdiff: %q is not a pending manifest", pending)
	}
	if err := os.Remove(pending); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("snapdiff: discard: %w", err)
	}
	return nil
}
