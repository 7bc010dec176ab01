package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/internal/fault"
)

// Sending a file between sites goes through an external target both sites
// can reach: the source premigrates the file there (or reuses a copy
// already there), and the destination either downloads it (hydrate) or
// creates a stub pointing at it, recallable later like any migrated file.

// SentFile is what the destination needs to recreate one path.
type SentFile struct {
	Path     string `json:"path"`
	Type     string `json:"type"`
	Change   Change `json:"change,omitempty"` // site_sync only
	OldPath  string `json:"old_path,omitempty"`
	Target   string `json:"target,omitempty"`
	Key      string `json:"key,omitempty"`
	Size     int64  `json:"size"`
	Mtime    int64  `json:"mtime"` // Unix ns
	Checksum string `json:"sha256,omitempty"`
	// Meta is the file's user metadata, which travels with it.
	Meta *Meta `json:"meta,omitempty"`
}

// sendChunk is the source half of send and site_sync: put each changed
// file on the shared target and describe it for the destination.
func (a *Activities) sendChunk(in StepInput, drivers *driverSet) chunkFunc {
	shared := ""
	if len(in.Targets) > 0 {
		shared = in.Targets[0].Name // LoadJobPlan puts the shared target first
	}
	return func(ctx context.Context, chunk []batchEntry) ([]Outcome, error) {
		var outs []Outcome
		var upload []string
		for _, e := range chunk {
			switch {
			case (e.Change == Deleted || e.Change == Moved) && sentType(e.Type):
				// A deletion carries the size and mtime of the version the
				// source deleted, which the destination compares with its
				// own file (see deletionKeeps).
				outs = append(outs, Outcome{Path: e.Path, State: OutcomeSuccess,
					Sent: &SentFile{Path: e.Path, Type: e.Type, Change: e.Change, OldPath: e.OldPath, Size: e.Size, Mtime: e.Mtime}})
			case e.Type == TypeDirectory:
				outs = append(outs, Outcome{Path: e.Path, State: OutcomeSuccess, Sent: &SentFile{Path: e.Path, Type: e.Type, Change: e.Change,
					Meta: a.sentMeta(ctx, e.Path)}})
			case e.Type != TypeFile:
				outs = append(outs, Outcome{Path: e.Path, State: OutcomeSkipped, Message: "only files and directories are sent"})
			default:
				upload = append(upload, e.Path)
			}
		}
		if len(upload) == 0 {
			return outs, nil
		}
		if shared == "" {
			return append(outs, failAll(upload, fmt.Errorf("no external target is available on both sites"))...), nil
		}
		d, err := drivers.get(shared)
		if err != nil {
			return append(outs, failAll(upload, err)...), nil
		}
		res, err := Premigrate(ctx, a.Root, upload, d, shared, StepOptions{Progress: stepBeat(ctx)})
		if err != nil {
			return nil, err
		}
		if afterSendsPremigrate != nil {
			afterSendsPremigrate()
		}
		changes := map[string]Change{}
		for _, e := range chunk {
			changes[e.Path] = e.Change
		}
		for _, o := range toOutcomes(res) {
			if o.State == OutcomeSuccess {
				e, rec, err := a.Root.sentRecord(o.Path)
				switch {
				case err != nil:
					o = Outcome{Path: o.Path, State: OutcomeFailure, Message: err.Error()}
				case rec == nil || rec.Target != shared:
					o = Outcome{Path: o.Path, State: OutcomeFailure, Message: "migrated to a target the destination cannot reach; recall it first"}
				case !validSum(rec.Checksum):
					o = Outcome{Path: o.Path, State: OutcomeFailure, Message: "its record has no valid SHA-256 for the destination to check the copy against; recall it first"}
				default:
					o.Sent = &SentFile{Path: e.Path, Type: e.Type, Change: changes[e.Path], Target: rec.Target, Key: rec.Key,
						Size: rec.Size, Mtime: rec.Mtime, Checksum: rec.Checksum, Meta: a.sentMeta(ctx, e.Path)}
				}
			}
			outs = append(outs, o)
		}
		return outs, nil
	}
}

// afterSendsPremigrate, nil outside tests, is called when a send's
// premigrate is done, before the records are read.
var afterSendsPremigrate func()

// sentRecord is the file at p with its record, which the site wrote for
// this very file, or an error (ErrUntrustedRecord): the record's key and
// checksum are what the destination fetches, and a file's user can write
// its attributes. A record forged after the premigrate had the
// destination receive another content than the file's, one its user may
// not read (a reviewer's finding). The record is nil when the file is
// resident (changed since it was premigrated).
func (r *Root) sentRecord(p string) (Entry, *Record, error) {
	l, err := r.locate(p)
	if err != nil {
		return Entry{}, nil, err
	}
	defer l.close()
	fi, err := os.Lstat(l.path())
	if err != nil {
		return Entry{}, nil, fmt.Errorf("stat %s: %w", apiPath(l.rel), err)
	}
	e := Entry{Path: apiPath(l.rel), Type: typeOf(fi.Mode())}
	rec, err := r.state.get(l.path(), l.rel)
	if err != nil || rec == nil {
		return e, nil, err
	}
	stale, err := r.state.trust(rec, inode(fi), func() int64 { return birthTime(l.path()) })
	if err != nil {
		return Entry{}, nil, fmt.Errorf("%s: %w", apiPath(l.rel), err)
	}
	if stale || rec.effective(fi) == Resident {
		return e, nil, nil
	}
	return e, rec, nil
}

// sentType tells whether entries of type t are sent (files and
// directories; "" from a source of an earlier version).
func sentType(t string) bool { return t == "" || t == TypeFile || t == TypeDirectory }

// ReceiveInput is the destination half of send and site_sync.
type ReceiveInput struct {
	JobID      int64
	Step       string // send | site_sync
	Files      []SentFile
	DestPath   string // prefix under which files land; "" keeps their paths
	Hydrate    bool   // send: full data instead of stubs
	Preference string // site_sync: newest | local | ignore
	Targets    []TargetSpec
}

// Receive creates the sent files at the destination. It is idempotent: a
// file already holding the sent content is left alone.
func (a *Activities) Receive(ctx context.Context, in ReceiveInput) (*StepOutput, error) {
	drivers := a.drivers(in.Targets)
	out := &StepOutput{}
	var toFlush written
	for i, f := range in.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		beat := func(int) { activity.RecordHeartbeat(ctx, i) }
		// With sync_preference local the destination's entries keep their
		// own metadata (a folder's fields and tags too), as they keep their
		// content.
		keepMeta := false
		if in.Step == "site_sync" && in.Preference == "local" {
			_, err := a.Root.lstat(a.destPath(in, f.Path))
			keepMeta = err == nil
		}
		msg, err := a.receiveOne(ctx, in, f, drivers, beat)
		if err == nil && f.Meta != nil && !keepMeta && !strings.HasPrefix(msg, "kept ") && f.Change != Deleted {
			err = a.replaceMeta(ctx, a.destPath(in, f.Path), *f.Meta)
		}
		o := Outcome{Path: f.Path, State: OutcomeSuccess, Message: msg}
		if err != nil {
			o.State, o.Message = OutcomeFailure, err.Error()
		} else if strings.HasPrefix(msg, "kept ") {
			o.State = OutcomeSkipped
		}
		out.Outcomes = append(out.Outcomes, o)
		if o.State == OutcomeSuccess {
			dest := a.destPath(in, f.Path)
			fi, _ := a.Root.lstat(dest) // nil when gone meanwhile: the root is flushed still
			toFlush.add(a.Root, strings.TrimPrefix(dest, "/"), fi)
		}
		activity.RecordHeartbeat(ctx, i) // the SDK throttles these
	}
	a.Root.indexPaths(ctx, a.receivedPaths(in))
	// The batch is reported done only once what it wrote is on disk: a
	// file renamed into place but not flushed can read empty after a power
	// loss, and the source, which sent it, would never send it again. A
	// failed flush fails the batch, whose retry finds the files in place.
	if toFlush.any {
		if err := toFlush.flush(a.Root); err != nil {
			return nil, fmt.Errorf("flush received files: %w", err)
		}
		// So are the received stubs' markers, and content put back from a
		// target's trash: the source's own reference may be gone before a
		// power cut comes (a send, then a delete at the source).
		if err := drivers.flush(ctx); err != nil {
			return nil, fmt.Errorf("flush received files: %w", err)
		}
	}
	return out, a.Root.state.sync()
}

func (a *Activities) destPath(in ReceiveInput, p string) string {
	if in.DestPath == "" || in.DestPath == "/" {
		return p
	}
	return path.Join(in.DestPath, p)
}

func (a *Activities) receiveOne(ctx context.Context, in ReceiveInput, f SentFile, drivers *driverSet, beat func(int)) (msg string, err error) {
	// The list comes from another site: a path that is not clean would
	// leave the destination path (path.Join drops a "..").
	for _, p := range []string{f.Path, f.OldPath} {
		if p != "" && (p[0] != '/' || path.Clean(p) != p || p == "/") {
			return "", fmt.Errorf("refused the sent path %q: not a clean absolute path of a file", p)
		}
	}
	if f.Path == "" {
		return "", errors.New("refused a sent file without a path")
	}
	if (f.Change == Deleted || f.Change == Moved) && !sentType(f.Type) {
		// Never sent, so whatever the destination has there is its own.
		return "kept the destination's entry: only files and directories are synced", nil
	}
	if f.Change == Moved && (f.OldPath == "" || within(f.OldPath, f.Path) || within(f.Path, f.OldPath)) {
		return "", fmt.Errorf("refused a move from %q to %q: not from another path", f.OldPath, f.Path)
	}
	dst := a.destPath(in, f.Path)
	// The destination's folder is pinned and the final name never
	// followed: a link at the destination is replaced or removed itself,
	// never the file it points to.
	locate := a.Root.locateCreating
	if f.Change == Deleted {
		locate = a.Root.locate
	}
	l, err := locate(dst)
	if f.Change == Deleted && isNotExist(err) {
		return "already deleted", nil
	}
	if err != nil {
		return "", err
	}
	defer l.close()
	if f.Change == Deleted || f.Change == Moved {
		// Under the site's moves lock, as a replacement's exchange: a
		// replayed move that found nothing at its old path dropped the
		// records there, those of a stub another sync's deletion had set
		// aside for an instant, which it then put back (a reviewer's
		// finding).
		if moveLocking != nil {
			moveLocking(l.rel)
		}
		unlock, err := a.Root.lockMoves(ctx)
		if err != nil {
			return "", err
		}
		defer unlock()
	}
	abs := l.path()
	if f.Type != TypeDirectory {
		// What a killed sync left at this name is settled first: a file
		// an exchange parked, and (a deletion does so itself) a file a
		// deletion set aside, back at its name before this change is
		// judged, or kept beside it.
		var also, kept string
		if kept, err = a.Root.restoreExchanged(l); err != nil {
			return "", err
		}
		if kept != "" {
			also = "; the file an interrupted sync set aside is kept as " + kept
		}
		if f.Change != Deleted {
			if _, kept, err = a.Root.settleAside(l, false); err != nil {
				return "", err
			}
			if kept != "" {
				also += "; the file an interrupted deletion set aside is kept as " + kept
			}
		}
		if also != "" {
			defer func() {
				if err == nil {
					msg += also
				}
			}()
		}
	}
	existing, statErr := os.Lstat(abs)
	exists := statErr == nil
	switch f.Change {
	case Deleted:
		return a.replayDeletion(in, f, l)
	case Moved:
		return a.replayMove(ctx, in, f, l, exists)
	}
	if f.Type == TypeDirectory {
		return "directory", a.Root.mkdirAll(l.rel)
	}
	if !validSum(f.Checksum) {
		return "", fmt.Errorf("the source sent %s without a valid SHA-256 (%q); nothing at the destination was changed", f.Path, f.Checksum)
	}
	// A retry finds its own earlier write here: up to date, so flushed
	// and given its metadata again, whatever the sync's preference.
	if exists && existing.Mode().IsRegular() && existing.Size() == f.Size && existing.ModTime().UnixNano() == f.Mtime {
		if sum, err := fileSHA256(abs); err == nil && sum == f.Checksum {
			return "already up to date", nil
		}
	}
	if exists && in.Step == "site_sync" {
		switch in.Preference {
		case "local":
			return "kept the destination's copy (sync_preference local)", nil
		case "newest", "":
			if existing.ModTime().UnixNano() > f.Mtime {
				return "kept the destination's newer copy", nil
			}
		}
	}
	if exists {
		if linked, err := a.linkedStub(l, existing); err != nil || linked {
			return keptLinkedStub, err
		}
	}
	d, err := drivers.get(f.Target)
	if err != nil {
		return "", err
	}
	if !in.Hydrate && in.Step == "send" {
		return "stub", a.makeStub(ctx, l, f, d)
	}
	r, err := getContent(ctx, d, f.Key, f.Checksum)
	if err != nil {
		return "", fmt.Errorf("fetch %s from %s: %w", f.Key, f.Target, err)
	}
	defer r.Close()
	h := sha256.New()
	// The checksum is checked before the new data replaces anything, so a
	// changed or corrupt remote copy never costs the destination its file.
	// A sync that chose to replace the destination's file (older, or none)
	// replaces only that one: a file saved there during the download is
	// the destination's newer copy.
	var put func(*os.File) error
	if in.Step == "site_sync" && in.Preference != "ignore" {
		put = func(tmp *os.File) error {
			unlock, err := a.Root.lockMoves(ctx)
			if err != nil {
				return err
			}
			defer unlock()
			return a.Root.replaceIfUnchanged(l, tmp, existing)
		}
	}
	err = copyIn(ctx, a.Root, l, io.TeeReader(r, h), f.Size, time.Unix(0, f.Mtime), beat, func() error {
		if got := hex.EncodeToString(h.Sum(nil)); got != f.Checksum {
			return fmt.Errorf("checksum mismatch for %s: got %s, want %s", f.Key, got, f.Checksum)
		}
		return nil
	}, put)
	if kept := (*keptError)(nil); errors.As(err, &kept) {
		return "kept the destination's copy: " + kept.why, nil
	}
	if err != nil {
		return "", err
	}
	return "copied", nil
}

// linkedStub tells whether the destination's file fi at l is a stub with
// other names (hard links) whose record is kept by path (the state
// index): the other names have none, so replacing or deleting this one
// would leave its data reachable from no path. The Delete step refuses
// the same.
func (a *Activities) linkedStub(l *loc, fi os.FileInfo) (bool, error) {
	if !fi.Mode().IsRegular() || links(fi) < 2 {
		return false, nil
	}
	rec, err := a.Root.state.get(l.path(), l.rel)
	if err != nil {
		return false, err
	}
	return rec != nil && !rec.fromXattr && rec.effective(fi) == Migrated, nil
}

// keptLinkedStub is why a sync or a send keeps such a stub.
const keptLinkedStub = "kept the destination's copy: a stub with other names (hard links), whose data this site's state index leads to by this path only; recall it first"

// keptError: a sync's download did not replace the destination's file,
// which stays, for the reason why.
type keptError struct{ why string }

func (e *keptError) Error() string { return "kept the destination's file: " + e.why }

// changedMeanwhile is why a sync keeps a destination file saved (or
// created, or removed) between its check and its replacement.
const changedMeanwhile = "it changed during the download"

// replaceIfUnchanged puts a sync's download tmp, a temporary file in l's
// folder, at l's name only while the entry there is still before (nil:
// none), the version the sync chose to replace; otherwise it fails with a
// keptError and the destination keeps its file. An empty name is filled
// with RENAME_NOREPLACE. A file is not replaced by name after a last
// check: the download, marked as exchanged and parked under a private
// name (exchangeOf), and the file are exchanged (RENAME_EXCHANGE, so the
// name is never empty); the file, now under the private name, is leased
// and compared (leaseUnchanged) and unlinked, or exchanged back when it
// changed (a save in place, by rename over the name, or a program holding
// it open). No writer's temporary file ever takes the private name, so the
// file parked there is never reused as one. A worker killed meanwhile
// leaves one of the two there: the rerun tells which (restoreExchanged).
func (r *Root) replaceIfUnchanged(l *loc, tmp *os.File, before os.FileInfo) error {
	if changedSince(l.path(), before) {
		return &keptError{changedMeanwhile}
	}
	if receiveRace != nil {
		receiveRace(l.rel)
	}
	from := sibling(l, filepath.Base(tmp.Name()))
	if before == nil {
		err := renameBeneath(from, l, false)
		if errors.Is(err, fs.ErrExist) {
			return &keptError{changedMeanwhile}
		}
		return err
	}
	download, err := tmp.Stat()
	if err != nil {
		return err
	}
	if _, supported := fsutil.Marked(tmp); !supported {
		// No marker to tell a killed exchange's download from a user's
		// file: replaced by name after the last check.
		return renameBeneath(from, l, true)
	}
	if before.Mode().IsRegular() { // only files carry user attributes; never open a FIFO or a device
		if err := unmarkFormer(l); err != nil {
			return err
		}
	}
	if err := fsutil.MarkExchange(tmp); err != nil {
		return err
	}
	x := exchangeOf(l)
	if err := renameBeneath(from, x, false); err != nil {
		return err // a file left there is settled by the rerun
	}
	fault.Point("sync.replace.parked")
	err = renameExchange(x, l)
	switch {
	case errors.Is(err, syscall.ENOENT):
		_ = unlinkBeneath(x, false)
		return &keptError{changedMeanwhile} // removed meanwhile
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOSYS):
		// No exchange on this filesystem: replaced by name after the
		// last check, as before exchanges were used.
		return renameBeneath(x, l, true)
	case err != nil:
		_ = unlinkBeneath(x, false)
		return err
	}
	fault.Point("sync.replace.exchanged")
	if exchangeRace != nil {
		exchangeRace(l.rel)
	}
	// x now holds the destination's former file, l the download.
	why, done := leaseUnchanged(x, before, changedMeanwhile)
	defer done()
	if why == "" {
		return unlinkBeneath(x, false)
	}
	if err := renameExchange(x, l); err != nil {
		// The download is gone from l (removed meanwhile): the file goes
		// back without replacing anything.
		kept, err := r.putBack(x, l, why)
		if err != nil {
			return err
		}
		return &keptError{kept}
	}
	// x holds what was at l: the download, unless a user saved over it or
	// into it meanwhile; such a save stays, beside the file.
	if fi, err := os.Lstat(x.path()); err == nil && changed(fi, download) {
		name, ok := r.keepBeside(x, l)
		if !ok {
			return fmt.Errorf("%s: %s; a save made meanwhile could not be kept beside it (it is %s)", apiPath(l.rel), why, x.name)
		}
		why += "; a save made meanwhile is kept as " + name
	} else if err == nil {
		_ = unlinkBeneath(x, false)
	}
	return &keptError{why}
}

// exchangeOf is where replaceIfUnchanged parks a download before its
// exchange, and where the destination's former file then is.
func exchangeOf(l *loc) *loc { return sibling(l, filepath.Base(fsutil.PrivateName("xchg", l.name))) }

// unmarkFormer drops a marker of the hub's temporary files from the file
// at l about to be exchanged (one left by a commit killed between its
// rename and the marker's removal): a file parked under exchangeOf is then
// a download when marked, the destination's own file when not.
func unmarkFormer(l *loc) error {
	stale := fileSays(l, func(f *os.File) bool {
		if marked, _ := fsutil.Marked(f); !marked {
			return false
		}
		fsutil.ClearMark(f)
		marked, _ := fsutil.Marked(f)
		return marked
	})
	if stale {
		return fmt.Errorf("%s carries the marker of the hub's temporary files, which could not be removed; nothing was replaced", apiPath(l.rel))
	}
	return nil
}

// restoreExchanged finishes a replaceIfUnchanged killed after it parked
// its download (exchangeOf), whatever the change received now. Marked as
// exchanged and untouched (the size and mtime its mark recorded), the file there is a download never put in place, or
// put back: it is removed. Anything else there is the destination's former
// file (never compared, so it may hold a save made in that instant, which
// nothing can tell from the version the sync meant to replace) or a save
// into the download: it is kept beside l (keepBeside), the mark of the
// download at l cleared, and the rerun decides about the file at l as
// about any other. It returns the name a file was kept under, "" when
// there was nothing to keep. An exchange by a version before exchangeOf is
// finished the same way.
func (r *Root) restoreExchanged(l *loc) (string, error) {
	parked := exchangeOf(l)
	fi, err := os.Lstat(parked.path())
	switch {
	case err == nil && fi.Mode().IsRegular() && fileSays(parked, fsutil.ExchangedUntouched):
		return "", unlinkBeneath(parked, false)
	case err != nil:
		// An exchange of a version before exchangeOf left the former file
		// under the download's temporary name, and the download, marked
		// as exchanged in that version's way, at l. The former file may
		// carry a stale temporary marker (what exchangeOf mends), so only
		// a file a live write holds there is another write's.
		parked = sibling(l, filepath.Base(fsutil.TempName(l.name)))
		if _, err := os.Lstat(parked.path()); err != nil || !fileSays(l, fsutil.LegacyExchanged) || fileSays(parked, fsutil.InUse) {
			return "", nil // usually nothing is there: two lstats
		}
	}
	name, ok := r.keepBeside(parked, l)
	if !ok {
		return "", fmt.Errorf("%s: could not keep the file an interrupted sync set aside (%s) beside it", apiPath(l.rel), parked.name)
	}
	fileSays(l, func(at *os.File) bool { // the download at l is a file like any other now
		if fsutil.Exchanged(at) {
			fsutil.ClearMark(at)
		}
		return true
	})
	return name, nil
}

// fileSays opens the file at l (read only, never through a symlink, never
// waiting on a FIFO) and answers what ask says of it; false when it cannot
// be opened.
func fileSays(l *loc, ask func(*os.File) bool) bool {
	f, err := fsutil.OpenFile(l.path(), os.O_RDONLY|openNoFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return ask(f)
}

// sibling is the entry name in l's folder.
func sibling(l *loc, name string) *loc {
	return &loc{rel: path.Join(path.Dir(l.rel), name), parent: l.parent, name: name}
}

// changedSince tells whether the entry at abs is no longer the one a check
// saw as before (nil: there was none): another file, or the same one
// written since.
func changedSince(abs string, before os.FileInfo) bool {
	now, err := os.Lstat(abs)
	if before == nil {
		return !isNotExist(err)
	}
	return err != nil || changed(now, before)
}

// receiveRace, nil outside tests, is called at the instant between a
// replayed deletion's or move's check of the destination and its change,
// with the destination's root-relative path: tests play a user's action
// there.
var receiveRace func(rel string)

// exchangeRace, nil outside tests, is called right after a sync's
// download and the destination's file were exchanged (replaceIfUnchanged).
var exchangeRace func(rel string)

// deletionAside, nil outside tests, is called while a replayed deletion
// has the file set aside (removeIfUnchanged).
var deletionAside func(rel string)

// replayDeletion removes what the source deleted, never recursively: a
// file with unlink (a folder swapped in for it stays), a directory only
// when empty. A file goes only while it is the version the source deleted
// or an older one (see deletionKeeps).
func (a *Activities) replayDeletion(in ReceiveInput, f SentFile, l *loc) (msg string, err error) {
	// A deletion killed with the file set aside puts it back, and decides
	// again; or keeps it beside a file written at its name since.
	existing, kept, err := a.Root.settleAside(l, true)
	if err != nil {
		return "", err
	}
	if kept != "" {
		defer func() { msg += "; the file an interrupted deletion set aside is kept as " + kept }()
	}
	switch {
	case existing == nil:
		return "already deleted", nil
	case in.Preference == "local":
		return "kept the destination's copy (sync_preference local)", nil
	case existing.IsDir():
		// Only an empty directory goes: files that exist only at the
		// destination are never destroyed by a sync.
		if receiveRace != nil {
			receiveRace(l.rel)
		}
		err := unlinkBeneath(l, true)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "already deleted", nil
		case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			return "kept the destination's directory: it holds files", nil
		case err != nil:
			return "", err
		}
	default:
		if why := deletionKeeps(in, f, existing); why != "" {
			return "kept the destination's copy: " + why, nil
		}
		if linked, err := a.linkedStub(l, existing); err != nil || linked {
			return keptLinkedStub, err
		}
		if receiveRace != nil {
			receiveRace(l.rel)
		}
		kept, err := a.Root.removeIfUnchanged(l, existing)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "already deleted", nil
		case err != nil:
			return "", err
		case kept != "":
			return "kept the destination's copy: " + kept, nil
		}
	}
	return "deleted", a.Root.state.forgetTree(l.rel)
}

// removeIfUnchanged unlinks the file l names only while it still is the
// version before, which a replayed deletion chose to remove. The file is
// first renamed aside (asideOf), so a user's save by rename lands at the
// name afresh and is not touched; then it is looked at again (see
// leaseUnchanged) and unlinked, or put back. kept says why the file was
// kept ("" when removed).
func (r *Root) removeIfUnchanged(l *loc, before os.FileInfo) (kept string, err error) {
	aside := asideOf(l)
	if err := renameBeneath(l, aside, false); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return "", fs.ErrNotExist
		}
		return "", err
	}
	fault.Point("sync.delete.aside")
	if deletionAside != nil {
		deletionAside(l.rel)
	}
	why, done := leaseUnchanged(aside, before, "it changed during the deletion")
	defer done()
	if why == "" {
		return "", unlinkBeneath(aside, false)
	}
	return r.putBack(aside, l, why)
}

// leaseUnchanged looks at a file set aside (no longer at the name users
// save to) before it is removed: it is opened and leased (see
// exclusiveLease: no other program has it open, and none opens it until
// done is called, which comes after the removal) and compared with
// before. why is "" when the file may go, otherwise why it stays
// (changed, for a file that is no longer before).
func leaseUnchanged(aside *loc, before os.FileInfo, changedWhy string) (why string, done func()) {
	done = func() {}
	if changedSince(aside.path(), before) {
		return changedWhy, done
	}
	if !before.Mode().IsRegular() {
		return "", done
	}
	// Without blocking: a FIFO swapped in would wait for a reader (ENXIO
	// instead), and another program's lease for its break (see
	// openUserFile).
	f, err := fsutil.OpenFile(aside.path(), os.O_WRONLY|openNoFollow|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ETXTBSY):
		return "it is being run", done
	case errors.Is(err, syscall.EWOULDBLOCK):
		return "it is open in another program", done
	case errors.Is(err, syscall.ENXIO):
		return changedWhy, done // not a regular file: another than before
	case err != nil:
		// Any other refusal to open it (a read-only file of another user):
		// compared by name only, as where the kernel grants no lease.
		return "", done
	}
	done = func() { _ = f.Close() }
	if exclusiveLease(f) != nil {
		return "it is open in another program", done
	}
	if fi, err := f.Stat(); err != nil || changed(fi, before) {
		return changedWhy, done
	}
	return "", done
}

// putBack returns a file set aside to its name l, after leaseUnchanged
// kept it; if a new file took the name meanwhile, it stays beside it
// under a name of its own, which kept tells.
func (r *Root) putBack(aside, l *loc, why string) (kept string, err error) {
	if err := renameBeneath(aside, l, false); err != nil {
		if conflict, ok := r.keepBeside(aside, l); ok {
			return why + "; a new file took its name meanwhile, so it is kept as " + conflict, nil
		}
		return "", fmt.Errorf("%s: %s, and could not be put back (it is %s): %w", apiPath(l.rel), why, aside.name, err)
	}
	return why, nil
}

// keepBeside renames the entry of from, a user's file whose name l is
// taken, to a name of its own beside l (<name>.sync-kept-<ns>). A record
// the state index keeps at l for that file (by its inode: the file was at
// l, and may be a stub, which only its record leads to its data) goes with
// it: written at the new name before the rename, removed from l after, if
// still the same. A kill in between leaves it at both names, and the one
// at l names another file's inode, which it does not match.
func (r *Root) keepBeside(from, l *loc) (string, bool) {
	name := keptName(l.name, time.Now().UnixNano())
	to := sibling(l, name)
	var rec *Record
	if fi, err := os.Lstat(from.path()); err == nil && fi.Mode().IsRegular() {
		if got, err := r.state.index.get(l.rel); err == nil && got != nil && got.Ino == inode(fi) {
			if r.state.index.set(to.rel, *got) != nil || r.state.sync() != nil {
				return name, false
			}
			rec = got
		}
	}
	if renameBeneath(from, to, false) != nil {
		if rec != nil {
			_ = r.state.index.remove(to.rel)
		}
		return name, false
	}
	if cur, err := r.state.index.get(l.rel); rec != nil && err == nil && cur != nil && *cur == *rec {
		_ = r.state.index.remove(l.rel)
	}
	return name, true
}

// keptName is <name>.sync-kept-<ns>, name cut (at a character's start)
// so that the whole fits in NAME_MAX.
func keptName(name string, ns int64) string {
	suffix := fmt.Sprintf(".sync-kept-%d", ns)
	if n := 255 - len(suffix); len(name) > n {
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		name = name[:n]
	}
	return name + suffix
}

// asideOf is where removeIfUnchanged sets the file of l aside: a private
// name of the hub's in the same folder (fsutil.PrivateName, which no
// writer's temporary file takes), fixed, so that a rerun after a kill
// finds it (settleAside).
func asideOf(l *loc) *loc { return sibling(l, filepath.Base(fsutil.PrivateName("del", l.name))) }

// legacyAsideOf is where versions before PrivateName set the file aside:
// a name that the temporary file of a write of "del-<name>" shares.
func legacyAsideOf(l *loc) *loc {
	name := fsutil.TmpPrefix + "del-" + l.name
	if len(name) > 255 {
		sum := sha256.Sum256([]byte(l.name))
		name = fsutil.TmpPrefix + "del-" + hex.EncodeToString(sum[:])
	}
	return sibling(l, name)
}

// settleAside finishes a replayed deletion killed after setting the file
// of l aside: the file goes back to its name, or, when a file was written
// there since, is kept beside it under a name of its own (kept). With
// legacy, the name earlier versions set files aside under is looked at
// too, which is also the temporary name of a write of "del-<name>": only
// a non-empty file there that the hub did not mark as its temporary file
// and that no write holds is taken for a set-aside one (an empty or
// partial one may be a killed write's, marked only after it is made). A
// deletion's rerun looks there; another change of the path does not. It
// returns what is at l now (nil: nothing).
func (r *Root) settleAside(l *loc, legacy bool) (now os.FileInfo, kept string, err error) {
	asides := []*loc{asideOf(l)}
	if legacy {
		asides = append(asides, legacyAsideOf(l))
	}
	for i, aside := range asides {
		fi, err := os.Lstat(aside.path())
		if err != nil || (i == 1 && fi.Mode().IsRegular() && (fi.Size() == 0 || !unmarkedFile(aside) || fileSays(aside, fsutil.InUse))) {
			continue
		}
		err = renameBeneath(aside, l, false)
		if errors.Is(err, fs.ErrExist) {
			name, ok := r.keepBeside(aside, l)
			if !ok {
				return nil, "", fmt.Errorf("%s: could not keep the file an interrupted deletion set aside (%s) beside the file written since", apiPath(l.rel), aside.name)
			}
			kept = name
		} else if err != nil {
			return nil, "", err
		}
		break
	}
	now, err = os.Lstat(l.path())
	if isNotExist(err) {
		return nil, kept, nil
	}
	return now, kept, err
}

// unmarkedFile tells whether the regular file at l carries no marker of
// the hub's temporary files, on a filesystem that keeps such markers.
func unmarkedFile(l *loc) bool {
	return fileSays(l, func(f *os.File) bool {
		marked, supported := fsutil.Marked(f)
		return supported && !marked
	})
}

// changed tells whether fi is no longer the file before describes (the
// one a check saw): another file, or the same one written since.
func changed(fi, before os.FileInfo) bool {
	return device(fi) != device(before) || inode(fi) != inode(before) ||
		fi.Size() != before.Size() || !fi.ModTime().Equal(before.ModTime())
}

// deletionKeeps says why a replayed deletion leaves the destination's file
// (not a directory) in place, or "" when it may go. With sync_preference
// newest the newest change wins: the file goes when it is the version the
// source deleted (same type, size and mtime: the one a sync delivered) or
// older; a file saved at the destination since is newer than the deletion.
func deletionKeeps(in ReceiveInput, f SentFile, fi os.FileInfo) string {
	if in.Preference == "ignore" {
		return "" // the source wins
	}
	mtime := fi.ModTime().UnixNano()
	switch {
	case f.Mtime == 0:
		return "the source did not say which version it deleted (sync_preference newest)"
	case f.Type != "" && typeOf(fi.Mode()) != f.Type:
		return "it is not the kind of entry the source deleted"
	case mtime > f.Mtime:
		return "it is newer than the file the source deleted (sync_preference newest)"
	case mtime == f.Mtime && fi.Size() != f.Size:
		return "it differs from the file the source deleted (sync_preference newest)"
	}
	return ""
}

// keptAtNewPath is the message of a move onto a path the destination has.
const keptAtNewPath = "kept the destination's copy at the new path; the old path is left as it was"

// replayMove renames the destination's copy from the old path to the new
// one. The new path is replaced only with sync_preference ignore; otherwise
// an entry there (even one created after the check) is kept.
//
// Records kept by path (the state index) follow the file: they are copied
// to the new path first, then the file is renamed, then the old path's
// records are dropped. A worker killed in between leaves records at both
// paths, which the rerun finishes (it renames again, or finds the file
// moved and drops the old path's records); never a moved stub without its
// record.
func (a *Activities) replayMove(ctx context.Context, in ReceiveInput, f SentFile, l *loc, exists bool) (string, error) {
	oldDst := a.destPath(in, f.OldPath)
	old, err := a.Root.locate(oldDst)
	if err != nil && !isNotExist(err) {
		return "", err
	}
	also := ""
	if err == nil {
		defer old.close()
		// What a killed sync left at the old path is settled first, as
		// at the new one: its records would move away from it.
		if kept, err := a.Root.restoreExchanged(old); err != nil {
			return "", err
		} else if kept != "" {
			also = "; the file an interrupted sync set aside at the old path is kept as " + kept
		}
		if _, kept, err := a.Root.settleAside(old, true); err != nil {
			return "", err
		} else if kept != "" {
			also += "; the file an interrupted deletion set aside at the old path is kept as " + kept
		}
		_, err = os.Lstat(old.path())
	}
	if err != nil {
		if !exists {
			return "", fmt.Errorf("moved from %s, which the destination does not have", f.OldPath)
		}
		// Nothing is at the old path: records left there (by a worker
		// killed after its rename) describe no file.
		if rel, err := cleanRel(oldDst); err == nil && rel != "" {
			return "already moved" + also, a.Root.state.forgetTree(rel)
		}
		return "already moved" + also, nil
	}
	replace := in.Preference == "ignore"
	if exists && !replace {
		return keptAtNewPath + also, nil
	}
	if fi, err := os.Lstat(l.path()); exists && err == nil {
		if linked, err := a.linkedStub(l, fi); err != nil || linked {
			return keptLinkedStub, err
		}
	}
	err = a.Root.moveWithRecordsLocked(old.rel, l.rel, []*loc{old, l}, func() error {
		if marks := a.Root.state.marks; marks != nil {
			// The folder a stub moves into is marked as holding records
			// (folder_marks.go), or policy scans would read it as resident.
			if err := marks.mark(l.path()); err != nil {
				return err
			}
		}
		fault.Point("move.records-copied")
		if receiveRace != nil {
			receiveRace(l.rel)
		}
		if err := renameBeneath(old, l, replace); err != nil {
			return err
		}
		fault.Point("move.renamed")
		return nil
	})
	if errors.Is(err, fs.ErrExist) {
		return keptAtNewPath + also, nil
	} else if err != nil {
		return "", err
	}
	return "moved" + also, nil
}

// makeStub creates a migrated stub at l whose data is the sent object: an
// empty file with the original mtime and a signed record. The stub is made
// under a temporary name, and everything it relies on is secured before
// it replaces anything at l: its reference on the target (so its data
// cannot be collected under it), the content itself, and its record. Only
// then is it renamed into place, so a failure leaves the destination's
// previous file exactly as it was. A recall at the destination brings the
// data back.
func (a *Activities) makeStub(ctx context.Context, l *loc, f SentFile, d targets.Driver) (err error) {
	// Checked before anything is written, and again below once the
	// reference is written.
	if !remoteHas(ctx, d, f.Key, f.Size, f.Checksum) {
		rc, err := getContent(ctx, d, f.Key, f.Checksum)
		if err != nil {
			return fmt.Errorf("remote copy %s: %w", f.Key, err)
		}
		rc.Close()
	}
	rel, abs := l.rel, l.path()
	if rel == "" {
		return fmt.Errorf("stub %q: is the site root", apiPath(rel))
	}
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		return fmt.Errorf("stub %s: is a directory", apiPath(rel))
	}
	tmp, err := fsutil.OpenTemp(ctx, abs)
	if err != nil {
		return fmt.Errorf("stub %s: %w", apiPath(rel), err)
	}
	var rec Record
	committed := false
	defer func() {
		if err != nil && !committed {
			if rec.Ref != "" {
				_ = dropRef(context.WithoutCancel(ctx), d, rec)
			}
			fsutil.Discard(tmp)
		}
	}()
	mtime := time.Unix(0, f.Mtime)
	if err = tmp.Chmod(0o644); err == nil {
		err = setAtimeMtimeOf(tmp, mtime)
	}
	if err != nil {
		return fmt.Errorf("stub %s: %w", apiPath(rel), err)
	}
	fi, err := tmp.Stat()
	if err != nil {
		return err
	}
	// The stub keeps its inode (and birth time) when renamed into place,
	// so its reference and record can name it now.
	rec = Record{State: Migrated, Size: f.Size, Mtime: f.Mtime, Target: f.Target,
		Key: f.Key, Checksum: f.Checksum, Ino: inode(fi), Btime: birthTimeOf(tmp)}
	if f.Key == contentKey(f.Checksum) {
		if rec.Ref, err = a.Root.refID(fi, rec.Btime, f.Checksum); err != nil {
			return err
		}
		if err := a.Root.addRef(ctx, d, f.Checksum, rec.Ref, rel, rec.Ino); err != nil {
			return err
		}
	}
	ok, err := ensureContent(ctx, d, f.Checksum, f.Size)
	if err == nil && !ok && rec.Ref == "" {
		ok = remoteHas(ctx, d, f.Key, f.Size, f.Checksum)
	}
	if err == nil && !ok {
		err = fmt.Errorf("remote copy %s: %w", f.Key, targets.ErrNotFound)
		if o, serr := d.Stat(ctx, f.Key); serr == nil && o.NotDurable {
			err = fmt.Errorf("remote copy %s: not yet flushed by the host that wrote it (the target is on a network filesystem, and only that host's flush makes it safe to rely on); retry once it is", f.Key)
		}
	}
	if err != nil {
		return err
	}
	// In the stub's attributes (where they can be written), the record is
	// written before the rename, which takes it along; the index's record
	// of the file it replaces goes after the rename. The index keeps
	// records by path, and the file at rel (maybe a stub of the
	// destination's own, whose only record that is) keeps its record until
	// the rename replaces it: the stub's is written after. A kill in
	// between leaves the new stub without a record (its content is still
	// the source's); the retry replaces it.
	inAttr, err := a.Root.state.storeAttr(tmp.Name(), rel, rec)
	if err != nil {
		return err
	}
	committed = true // Commit renames or discards it
	if err := fsutil.Commit(tmp, abs); err != nil {
		if !errors.Is(err, fsutil.ErrClosedInPlace) { // else the stub in place names it
			_ = dropRef(context.WithoutCancel(ctx), d, rec)
		}
		return fmt.Errorf("stub %s: %w", apiPath(rel), err)
	}
	if !inAttr {
		return a.Root.state.set(abs, rel, rec)
	}
	return a.Root.state.index.remove(rel) // the replaced file's, now gone
}

func fileSHA256(name string) (string, error) {
	fh, _, err := openUserFile(name)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	return sha256Of(fh)
}
