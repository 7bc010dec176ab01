package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
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
			case e.Change == Deleted || e.Change == Moved:
				outs = append(outs, Outcome{Path: e.Path, State: OutcomeSuccess,
					Sent: &SentFile{Path: e.Path, Type: e.Type, Change: e.Change, OldPath: e.OldPath}})
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
		changes := map[string]Change{}
		for _, e := range chunk {
			changes[e.Path] = e.Change
		}
		for _, o := range toOutcomes(res) {
			if o.State == OutcomeSuccess {
				e, rec, err := a.Root.Stat(o.Path)
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
	drivers := newDriverSet(in.Targets, a.Cipher)
	out := &StepOutput{}
	for i, f := range in.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		beat := func(int) { activity.RecordHeartbeat(ctx, i) }
		msg, err := a.receiveOne(ctx, in, f, drivers, beat)
		if err == nil && f.Meta != nil && !strings.HasPrefix(msg, "kept ") && f.Change != Deleted {
			err = a.replaceMeta(ctx, a.destPath(in, f.Path), *f.Meta)
		}
		o := Outcome{Path: f.Path, State: OutcomeSuccess, Message: msg}
		if err != nil {
			o.State, o.Message = OutcomeFailure, err.Error()
		} else if strings.HasPrefix(msg, "kept ") {
			o.State = OutcomeSkipped
		}
		out.Outcomes = append(out.Outcomes, o)
		activity.RecordHeartbeat(ctx, i) // the SDK throttles these
	}
	a.Root.indexPaths(ctx, a.receivedPaths(in))
	return out, a.Root.state.sync()
}

func (a *Activities) destPath(in ReceiveInput, p string) string {
	if in.DestPath == "" || in.DestPath == "/" {
		return p
	}
	return path.Join(in.DestPath, p)
}

func (a *Activities) receiveOne(ctx context.Context, in ReceiveInput, f SentFile, drivers *driverSet, beat func(int)) (string, error) {
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
	abs := l.path()
	existing, statErr := os.Lstat(abs)
	exists := statErr == nil
	switch f.Change {
	case Deleted:
		switch {
		case !exists:
			return "already deleted", nil
		case in.Preference == "local":
			return "kept the destination's copy (sync_preference local)", nil
		case existing.IsDir():
			// Only an empty directory goes: files that exist only at the
			// destination are never destroyed by a sync.
			if err := os.Remove(abs); err != nil {
				return "kept the destination's directory: it holds files", nil
			}
			return "deleted", nil
		}
		return "deleted", RemovePath(a.Root, dst)
	case Moved:
		old, err := a.Root.locate(a.destPath(in, f.OldPath))
		if err != nil && !isNotExist(err) {
			return "", err
		}
		if err == nil {
			defer old.close()
			_, err = os.Lstat(old.path())
		}
		if err != nil {
			if exists {
				return "already moved", nil
			}
			return "", fmt.Errorf("moved from %s, which the destination does not have", f.OldPath)
		}
		if exists && in.Preference != "ignore" {
			return "kept the destination's copy at the new path; the old path is left as it was", nil
		}
		return "moved", os.Rename(old.path(), abs)
	}
	if f.Type == TypeDirectory {
		return "directory", a.Root.mkdirAll(l.rel)
	}
	if !validSum(f.Checksum) {
		return "", fmt.Errorf("the source sent %s without a valid SHA-256 (%q); nothing at the destination was changed", f.Path, f.Checksum)
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
	if exists && existing.Mode().IsRegular() && existing.Size() == f.Size && existing.ModTime().UnixNano() == f.Mtime {
		if sum, err := fileSHA256(abs); err == nil && sum == f.Checksum {
			return "already up to date", nil
		}
	}
	d, err := drivers.get(f.Target)
	if err != nil {
		return "", err
	}
	if !in.Hydrate && in.Step == "send" {
		return "stub", a.makeStub(ctx, dst, f, d)
	}
	r, err := getContent(ctx, d, f.Key, f.Checksum)
	if err != nil {
		return "", fmt.Errorf("fetch %s from %s: %w", f.Key, f.Target, err)
	}
	defer r.Close()
	h := sha256.New()
	// The checksum is checked before the new data replaces anything, so a
	// changed or corrupt remote copy never costs the destination its file.
	err = copyIn(ctx, a.Root, dst, io.TeeReader(r, h), f.Size, time.Unix(0, f.Mtime), beat, func() error {
		if got := hex.EncodeToString(h.Sum(nil)); got != f.Checksum {
			return fmt.Errorf("checksum mismatch for %s: got %s, want %s", f.Key, got, f.Checksum)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return "copied", nil
}

// makeStub creates a migrated stub at dst whose data is the sent object:
// an empty file with the original mtime and a signed record, whose
// reference on the target is written before the content is checked, so
// the stub's data cannot be collected under it. A recall at the
// destination brings the data back.
func (a *Activities) makeStub(ctx context.Context, dst string, f SentFile, d targets.Driver) error {
	// Checked before anything at dst is replaced, and again below once the
	// reference is written.
	if !remoteHas(ctx, d, f.Key, f.Size, f.Checksum) {
		rc, err := getContent(ctx, d, f.Key, f.Checksum)
		if err != nil {
			return fmt.Errorf("remote copy %s: %w", f.Key, err)
		}
		rc.Close()
	}
	if err := CopyIn(ctx, a.Root, dst, strings.NewReader(""), 0, time.Unix(0, f.Mtime)); err != nil {
		return err
	}
	l, err := a.Root.locate(dst)
	if err != nil {
		return err
	}
	defer l.close()
	rel, abs := l.rel, l.path()
	fi, err := os.Lstat(abs)
	if err != nil {
		return err
	}
	rec := Record{State: Migrated, Size: f.Size, Mtime: f.Mtime, Target: f.Target,
		Key: f.Key, Checksum: f.Checksum, Ino: inode(fi), Btime: birthTime(abs)}
	if f.Key == contentKey(f.Checksum) {
		if rec.Ref, err = a.Root.refID(rec.Ino, rec.Btime, f.Checksum); err != nil {
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
	}
	if err != nil {
		if rec.Ref != "" {
			_ = dropRef(context.WithoutCancel(ctx), d, rec)
		}
		_ = RemovePath(a.Root, dst)
		return err
	}
	return a.Root.state.set(abs, rel, rec)
}

func fileSHA256(name string) (string, error) {
	fh, err := fsutil.OpenFile(name, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
