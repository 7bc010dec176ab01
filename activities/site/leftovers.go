package site

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/thehub/hub/activities/fsutil"
)

// What a worker killed mid-write leaves in the site's folders, under the
// hub's reserved prefix (fsutil.TmpPrefix), hidden from walks and the
// API. A rerun of the same write settles it; a path never written again
// keeps it. Leftovers lists them, and with Settle removes the hub's own
// temporary files and brings users' files back into view.
const (
	// LeftoverTemporary is a write's temporary file, or a download parked
	// before its exchange: the hub's own data (a copy of data held
	// elsewhere), removed by Settle.
	LeftoverTemporary = "temporary"
	// LeftoverParked is a destination's file that a sync killed after its
	// exchange left under the exchange's private name.
	LeftoverParked = "parked by an interrupted sync"
	// LeftoverSetAside is a file a replayed deletion killed after setting
	// it aside left under its private name.
	LeftoverSetAside = "set aside by an interrupted deletion"
	// LeftoverUnknown is a file under the reserved prefix that the hub did
	// not mark as its own: a user's, one parked by an earlier version, a
	// delete step's entry moved beside itself. Settle leaves it alone.
	LeftoverUnknown = "not marked as the hub's"
)

// DefaultLeftoverMinAge: younger leftovers may belong to a write in
// flight, and are only listed.
const DefaultLeftoverMinAge = 24 * time.Hour

// LeftoverOptions tunes Leftovers.
type LeftoverOptions struct {
	MinAge time.Duration
	// Settle brings users' files (parked, set aside) back into view.
	Settle bool
	// RemoveTemporaries removes the hub's temporary files (by their
	// marker) that no write holds.
	RemoveTemporaries bool
}

// Leftover is one file under the reserved prefix.
type Leftover struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	Size int64  `json:"size"`
	// Action is what Settle did: "removed", "restored to <name>", "kept
	// as <name>"; "" when it did nothing (listed only, too young, in use).
	Action string `json:"action,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Leftovers walks the site (its .hub folder aside) for files under the
// hub's reserved prefix. Those older than MinAge (by their change time: a
// rename sets it) are settled as asked: with Settle, a file set aside by a
// deletion goes back to its name, if free, or is kept beside it
// (<name>.sync-kept-<ns>), as is a destination's file parked by a sync;
// with RemoveTemporaries, the hub's temporary files that no write holds
// are removed (the hub's by their marker, an attribute that whoever can
// write the file can set too). Unknown files are left alone.
func Leftovers(ctx context.Context, r *Root, opts LeftoverOptions) ([]Leftover, error) {
	var out []Leftover
	err := filepath.WalkDir(r.dir, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(r.dir, abs)
		if d.IsDir() && filepath.ToSlash(rel) == hubDir {
			return filepath.SkipDir
		}
		if !strings.HasPrefix(d.Name(), fsutil.TmpPrefix) || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		lo := Leftover{Path: apiPath(filepath.ToSlash(rel)), Kind: leftoverKind(abs, d.Name(), fi), Size: fi.Size()}
		act := opts.Settle && (lo.Kind == LeftoverParked || lo.Kind == LeftoverSetAside) ||
			opts.RemoveTemporaries && lo.Kind == LeftoverTemporary
		if act && changedBefore(fi, time.Now().Add(-opts.MinAge)) {
			if lo.Action, err = r.settleLeftover(lo, abs); err != nil {
				lo.Error = err.Error()
			}
		}
		out = append(out, lo)
		return nil
	})
	return out, err
}

// leftoverKind tells what the file at abs, named name, is.
func leftoverKind(abs, name string, fi fs.FileInfo) string {
	switch {
	case strings.HasPrefix(name, delPrefix):
		return LeftoverSetAside
	case !fi.Mode().IsRegular():
		if strings.HasPrefix(name, xchgPrefix) {
			return LeftoverParked
		}
		return LeftoverUnknown
	}
	f, err := fsutil.OpenFile(abs, os.O_RDONLY|openNoFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		return LeftoverUnknown
	}
	defer f.Close()
	marked, _ := fsutil.Marked(f)
	switch {
	case strings.HasPrefix(name, xchgPrefix) && !fsutil.ExchangedUntouched(f):
		return LeftoverParked // the destination's file, or a save into the download
	case legacyParked(abs, f):
		return LeftoverParked
	case marked:
		return LeftoverTemporary // a download parked before its exchange too
	}
	return LeftoverUnknown
}

// legacyParked tells whether f, at abs, is the destination's former file
// an exchange of a version before exchangeOf left under the download's
// temporary name (TmpPrefix+<name>), the download at <name> carrying that
// version's mark: the sync's rerun keeps it beside <name> (restoreExchanged),
// whatever marker it carries, a stale temporary one included, unless a
// write holds it. Removed as a temporary file, it was lost (a reviewer's
// finding).
func legacyParked(abs string, f *os.File) bool {
	dir, name := filepath.Split(abs)
	if strings.HasPrefix(name, fsutil.TmpPrefix+fsutil.TmpPrefix) || fsutil.InUse(f) {
		return false
	}
	download, err := fsutil.OpenFile(filepath.Join(dir, strings.TrimPrefix(name, fsutil.TmpPrefix)), os.O_RDONLY|openNoFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer download.Close()
	return fsutil.LegacyExchanged(download)
}

// The private names of parked and set-aside files (see exchangeOf, asideOf).
var (
	xchgPrefix = fsutil.PrivatePrefix("xchg")
	delPrefix  = fsutil.PrivatePrefix("del")
)

// settleLeftover settles one leftover; see Leftovers.
func (r *Root) settleLeftover(lo Leftover, abs string) (string, error) {
	at, err := r.locateReserved(lo.Path)
	if err != nil {
		return "", err
	}
	defer at.close()
	switch lo.Kind {
	case LeftoverTemporary:
		if fileSays(at, fsutil.InUse) {
			return "", nil // a write in flight
		}
		return "removed", unlinkBeneath(at, false)
	case LeftoverSetAside:
		l := sibling(at, r.ownerName(at, "del"))
		if err := renameBeneath(at, l, false); err == nil {
			return "restored to " + l.name, nil
		}
		return r.keepLeftover(at, l)
	case LeftoverParked:
		if !strings.HasPrefix(at.name, xchgPrefix) { // an earlier version's exchange (legacyParked)
			l := sibling(at, strings.TrimPrefix(at.name, fsutil.TmpPrefix))
			kept, err := r.keepLeftover(at, l)
			if err == nil {
				fileSays(l, func(f *os.File) bool { fsutil.ClearMark(f); return true }) // a file like any other now
			}
			return kept, err
		}
		return r.keepLeftover(at, sibling(at, r.ownerName(at, "xchg")))
	}
	return "", nil
}

// ownerName is the name whose private name of kind (fsutil.PrivateName)
// the leftover at has: its own name without the prefix, but for a name
// too long to take one, which is hashed. That name is then looked for in
// the folder (a download at it) and among the state index's records of
// the folder's files (a stub set aside has its record at its name). Put
// back under the hash, a stub kept by path lost its record, and an audit
// then its data (a reviewer's finding). Found nowhere (records in the
// files' attributes, which follow them), the file comes back under the
// hash.
func (r *Root) ownerName(at *loc, kind string) string {
	prefix := fsutil.PrivatePrefix(kind)
	name := strings.TrimPrefix(at.name, prefix)
	if len(name) != 32 || strings.Trim(name, "0123456789abcdef") != "" {
		return name
	}
	owns := func(n string) bool { return n != name && filepath.Base(fsutil.PrivateName(kind, n)) == at.name }
	dir := path.Dir(at.rel)
	if dir == "." {
		dir = ""
	}
	names, _ := namesIn(r.f, dir)
	names = append(names, r.state.index.namesIn(dir)...)
	for _, n := range names {
		if owns(n) {
			return n
		}
	}
	return name
}

func (r *Root) keepLeftover(at, l *loc) (string, error) {
	kept, ok := r.keepBeside(at, l)
	if !ok {
		return "", fmt.Errorf("could not keep it beside %s as %s", l.name, kept)
	}
	return "kept as " + kept, nil
}

// locateReserved is locate for an API path whose name is under the hub's
// reserved prefix, which locate refuses.
func (r *Root) locateReserved(p string) (*loc, error) {
	dir, name := path.Split(p)
	rel, err := cleanRel(dir)
	if err != nil {
		return nil, err
	}
	if rel == "" {
		return &loc{rel: name, parent: r.f, name: name}, nil
	}
	d, err := openBeneath(r.f, rel, oDirPath, 0)
	if err != nil {
		return nil, refusal(rel, err)
	}
	return &loc{rel: path.Join(rel, name), parent: d, owned: true, name: name}, nil
}

// changedBefore tells whether fi's change time (its mtime where the
// system gives none) is before t.
func changedBefore(fi fs.FileInfo, t time.Time) bool {
	changed := fi.ModTime()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if _, c := accessChangeTimes(st); !c.IsZero() {
			changed = c
		}
	}
	return changed.Before(t)
}
