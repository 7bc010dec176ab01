package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/thehub/hub/internal/fault"
)

// cjSpace creates a space's directory with its templates' folders and
// records its quota, or removes both.
func (a *Activities) cjSpace(ctx context.Context, s *CJSpace, del bool) (string, error) {
	rel := path.Join(cjSpacesDir, s.Name)
	quota := a.cjConfigFile(cjQuotasDir, s.Name, ".quota")
	if _, err := a.Root.Resolve(rel); err != nil {
		return "", err
	}
	if del {
		// Never destroy data: an empty directory goes, one holding files is
		// moved to the site's trash for an operator to purge or restore
		// (or, for a deletion made through the hub API, left in place).
		// Both act on the folder in its parent held open beneath the root
		// (rmdir, rename), never on its name.
		moved := ""
		err := a.Root.removeDir(rel)
		switch {
		case err == nil, isNotExist(err) && !errors.Is(err, syscall.ENOTDIR):
			// Gone: index records left below it by a removal killed after
			// its move to the trash go to their files there.
			kept, err := a.Root.settleTrashedRecords(ctx, rel, s.Name)
			if err != nil {
				return "", fmt.Errorf("remove %s: %w", rel, err)
			}
			if kept > 0 {
				moved = fmt.Sprintf(" (the state index keeps the records of %d stubs below it that are not there: a volume not mounted?)", kept)
			}
		case (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)) && s.KeepNonEmpty:
			moved = " (kept in place: not empty, its data stays where it is)"
		case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			trash, err := a.Root.trashWithRecords(ctx, rel, fmt.Sprintf("%s-%d", s.Name, time.Now().UnixNano()))
			if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EBUSY) {
				// Not retried for ever: a rename cannot take it there.
				return "", cjPermanent(fmt.Errorf("move %s to the trash: it is a mount point, or on another filesystem than the site trash (%s), where no rename takes it: empty it, or move it by hand: %w", rel, trashFolder, err))
			}
			if err != nil {
				return "", fmt.Errorf("move %s to the trash: %w", rel, err)
			}
			moved = " (its content kept in " + trash + ")"
		case errors.Is(err, syscall.ENOTDIR):
			return "", cjPermanent(fmt.Errorf("cannot remove %s: it is not a directory", rel))
		default:
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		// A crash here leaves the quota of a folder that is gone; the
		// retried change finds the folder gone and removes the quota.
		fault.Point("cj.space.removed")
		if err := a.cjRemoveFile(quota); err != nil {
			return "", fmt.Errorf("remove quota of %s: %w", rel, err)
		}
		// Reported removed once that is on disk: a crash rolling the move
		// back would bring the folder back under a name freed for
		// another space.
		if err := flushSite(a.Root.flushDir); err != nil {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		return "removed " + rel + " and its quota" + moved, nil
	}

	// A file where the directory should be is an operator's to sort out;
	// say so plainly rather than with mkdir's errno.
	if fi, err := a.Root.lstat(rel); err == nil && !fi.IsDir() {
		return "", cjPermanent(fmt.Errorf("cannot create %s: a %s is in the way", rel, cjKindOf(fi.Mode())))
	}
	if err := a.Root.mkdirAll(rel); err != nil {
		return "", fmt.Errorf("create %s: %w", rel, err)
	}
	if mode, err := strconv.ParseUint(strings.TrimSpace(s.Mode), 8, 32); err == nil && mode <= 0o7777 {
		// Set through the folder's descriptor, never by a name a user
		// could swap for a link.
		d, err := openBeneath(a.Root.f, rel, os.O_RDONLY|oDirectory, 0)
		if err == nil {
			err = d.Chmod(fileMode(mode))
			d.Close()
		}
		if err != nil {
			return "", fmt.Errorf("set mode %s on %s: %w", s.Mode, rel, err)
		}
	}
	for _, d := range s.Directories {
		if _, err := a.cjSub(rel, d); err != nil {
			return "", fmt.Errorf("template directory %q: %w", d, err)
		}
		sub, _ := cleanRel(d) // checked by cjSub
		if err := a.Root.mkdirAll(path.Join(rel, sub)); err != nil {
			return "", fmt.Errorf("template directory %q: %w", d, err)
		}
	}
	msg := fmt.Sprintf("%s ready with %d template directories", rel, len(s.Directories))
	if s.Quota == nil {
		if err := a.cjRemoveFile(quota); err != nil {
			return "", fmt.Errorf("clear quota of %s: %w", rel, err)
		}
		return msg + ", no quota", nil
	}
	if err := a.cjWriteFile(quota, []byte(strconv.FormatInt(*s.Quota, 10)+"\n")); err != nil {
		return "", fmt.Errorf("record quota of %s: %w", rel, err)
	}
	return fmt.Sprintf("%s, quota %d bytes", msg, *s.Quota), nil
}

// trashWithRecords moves the folder rel to the site trash as name (see
// moveToTrash) with the records the state index keeps of its files, by
// path: as replayMove does, they are copied to the trash path first, the
// folder is renamed, then the records at rel are dropped. A kill in
// between leaves records at both paths, never a stub without its record:
// copies under the name of a folder that never reached the trash describe
// no file, and the retried removal, finding the folder gone, drops those
// left at rel. Records kept in the files' attributes move with them. The
// references audit walks the trash, so the trashed stubs keep their data.
func (r *Root) trashWithRecords(ctx context.Context, rel, name string) (string, error) {
	var trash string
	err := r.moveWithRecords(ctx, rel, path.Join(trashFolder, name), nil, func() (err error) {
		fault.Point("cj.space.records-copied")
		trash, err = r.moveToTrash(rel, name)
		return err
	})
	return trash, err
}

// settleTrashedRecords finishes, for the state index, a removal of the
// space folder rel killed after its move to the trash (an entry named
// <space>-<ns>) and before its records were settled: a record left at rel
// goes to the same file in such an entry (by its inode), as finishMove
// would have taken it, and the rest, which describe no file, are dropped.
// Records copied before the move are there already; a record written at
// rel during the move by a step that still saw the file there (a migrate
// that made it a stub) was not, and dropping it lost the stub's data.
// A stub's record that goes to no entry stays at rel, and kept counts
// them: the folder removed may have been the empty mount point of a
// volume not mounted then, whose stubs, mounted again, need their records
// (a reviewer's finding: they were dropped, and the stubs read as empty
// resident files). The index keeps a record of a deleted stub likewise.
func (r *Root) settleTrashedRecords(ctx context.Context, rel, space string) (kept int, err error) {
	if r.state.xattr {
		return 0, r.state.forgetTree(rel)
	}
	unlock, err := r.lockMoves(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	entries, err := os.ReadDir(filepath.Join(r.Dir(), filepath.FromSlash(trashFolder)))
	if err != nil && !absent(err) {
		return 0, err
	}
	var settled []string
	err = r.eachRecord(rel, func(p string, rec Record) error {
		// The newest entry first: the removal's own. An older one may
		// be on another filesystem, where inode numbers repeat.
		for i := len(entries) - 1; i >= 0; i-- {
			e := entries[i]
			if ns, ok := strings.CutPrefix(e.Name(), space+"-"); !ok || !isDigits(ns) {
				continue // another space's (lab-2-<ns>), or not a space's
			}
			to := path.Join(trashFolder, e.Name()) + strings.TrimPrefix(p, rel)
			abs := filepath.Join(r.Dir(), filepath.FromSlash(to))
			fi, err := os.Lstat(abs)
			if err != nil || rec.Ino == 0 || inode(fi) != rec.Ino {
				continue
			}
			if stale, err := r.state.trust(&rec, inode(fi), func() int64 { return birthTime(abs) }); err == nil && !stale {
				settled = append(settled, p)
				return r.state.index.set(to, rec)
			}
		}
		if rec.State == Migrated {
			kept++
		} else {
			settled = append(settled, p) // no stub: its file's data was its own
		}
		return nil
	})
	if err == nil {
		err = r.state.sync()
	}
	if err != nil || kept == 0 {
		return kept, errors.Join(err, r.state.forgetTree(rel))
	}
	for _, p := range settled {
		if err := r.state.index.remove(p); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

// RestoreFromTrash moves the site trash's entry name (a removed C+J space,
// <root>/.hub/trash/<name>) back to p, which must not exist, with its
// index records, as trashWithRecords moved it there. On a site keeping
// records in the state index, a folder moved back by hand (mv) leaves its
// records at the trash path: its stubs read as empty resident files, and
// the references audit would drop their references. A kill leaves records
// at both paths; run again, it finishes.
func (r *Root) RestoreFromTrash(ctx context.Context, name, p string) error {
	if err := checkTrashEntry(name); err != nil {
		return err
	}
	from := path.Join(trashFolder, name)
	switch {
	case strings.HasPrefix(name, purgingPrefix):
		return fmt.Errorf("%s: being purged (purge it again to finish), not restored", from)
	case trashRecordsAt(name) != from:
		// Its removal drops its stubs' references before it removes the
		// entry: restored in between, the stubs led to content being
		// freed (a reviewer's finding). The user removed that snapshot.
		return fmt.Errorf("%s: a removed snapshot's copy, not restored (its removal may have dropped its stubs' references already); remove the snapshot again to finish", from)
	}
	if _, err := os.Lstat(filepath.Join(r.Dir(), filepath.FromSlash(trashFolder), purgingName(name))); err == nil {
		return fmt.Errorf("%s: being purged (purge it again to finish), not restored", from)
	}
	to, err := r.locateCreating(p)
	if err != nil {
		return err
	}
	defer to.close()
	trash, err := openBeneath(r.f, trashFolder, oDirPath, 0)
	if err != nil {
		return fmt.Errorf("open the site trash: %w", err)
	}
	defer trash.Close()
	if _, err := fstatat(fdOf(trash), name); errors.Is(err, syscall.ENOENT) {
		if _, err := os.Lstat(to.path()); err == nil {
			// Moved back by a run killed before it dropped these.
			return r.state.forgetTree(from)
		}
		return fmt.Errorf("%s: %w", from, fs.ErrNotExist)
	} else if err != nil {
		return err
	}
	// Checked before the records are copied, which would replace those
	// of the files there.
	switch _, err := os.Lstat(to.path()); {
	case err == nil:
		return fmt.Errorf("%s: %w", apiPath(to.rel), fs.ErrExist)
	case !isNotExist(err):
		return err
	}
	return r.moveWithRecords(ctx, from, to.rel, []*loc{to}, func() error {
		fault.Point("trash.restore.records-copied")
		if err := renameBeneath(&loc{rel: from, parent: trash, name: name}, to, false); err != nil {
			return err
		}
		fault.Point("trash.restored")
		return nil
	})
}

// PurgeTrash removes the site trash's entry name (a removed C+J space, or
// a snapshot's entry), for good, with its index records, which rm -rf
// would leave behind. The references of its stubs are then leaked: a
// references audit drops them and the collector frees their content.
//
// The entry is first claimed, under the site's moves lock: renamed in the
// trash to purgingName(name), with its records. A restore of the entry
// (under the same lock) then finds it gone, or took it first and the purge
// finds nothing: before, a restore in the midst of a purge moved the
// folder the purge was emptying, and both reported success over a restored
// space emptied (a reviewer's finding). Run again after a crash, with the
// entry's name or the claimed one, it finishes.
func (r *Root) PurgeTrash(ctx context.Context, name string) error {
	if err := checkTrashEntry(name); err != nil {
		return err
	}
	claimed := name
	if !strings.HasPrefix(name, purgingPrefix) {
		claimed = purgingName(name)
	}
	rel := path.Join(trashFolder, claimed)
	if !r.state.xattr {
		// As a delete step: a stub with other names has its data led to
		// by this entry's record only. Checked before the claim, so that
		// the entry can be restored.
		entry, records := rel, rel
		if _, err := os.Lstat(filepath.Join(r.Dir(), filepath.FromSlash(trashFolder), name)); err == nil {
			entry, records = path.Join(trashFolder, name), trashRecordsAt(name)
		}
		_, linked, err := r.trashedRecords(entry, records)
		if err != nil {
			return err
		}
		if n := countState(linked, Migrated); n > 0 {
			return fmt.Errorf("%s: not purged: %d stubs here have other names (hard links), which this site's state index does not know, so purging would leave their data reachable from none; restore the entry (hub site restore-space) and recall them, or remove their other names, first", entry, n)
		}
	}
	if claimed != name {
		// A mount in the entry is refused before the claim would carry it
		// away from where its operator finds it.
		if err := mountedBeneath(filepath.Join(r.Dir(), filepath.FromSlash(trashFolder), name)); err != nil && !isNotExist(err) {
			return err
		}
		switch err := r.claimTrashEntry(ctx, name, claimed); {
		case isNotExist(err):
			return r.state.forgetTree(rel) // purged already (by a run killed before it dropped these?)
		case err != nil:
			return err
		}
	}
	if err := cjRemoveTree(filepath.Join(r.Dir(), filepath.FromSlash(rel))); err != nil {
		return err
	}
	fault.Point("trash.purged")
	return r.state.forgetTree(rel)
}

// purgingPrefix starts the name of a trash entry a purge has claimed:
// with a dot, which neither a space's entry (<space>-<ns>) nor another
// has in that place.
const purgingPrefix = "purging."

// purgingName is the name entry is claimed under: a hash of it, as a
// snapshot's entry is too long for a prefix more.
func purgingName(entry string) string {
	sum := sha256.Sum256([]byte(entry))
	return purgingPrefix + hex.EncodeToString(sum[:16])
}

// claimTrashEntry renames the trash entry name to claimed, with its
// records (trashRecordsAt), under the moves lock. An entry already
// claimed (a purge killed after its claim) is left to finish; neither
// there is fs.ErrNotExist.
func (r *Root) claimTrashEntry(ctx context.Context, name, claimed string) error {
	trash, err := openBeneath(r.f, trashFolder, oDirPath, 0)
	if err != nil {
		return fmt.Errorf("open the site trash: %w", err)
	}
	defer trash.Close()
	if _, err := fstatat(fdOf(trash), name); err != nil {
		if _, err := fstatat(fdOf(trash), claimed); err == nil {
			return nil
		}
		return fmt.Errorf("%s: %w", path.Join(trashFolder, name), fs.ErrNotExist)
	}
	err = r.moveWithRecords(ctx, trashRecordsAt(name), path.Join(trashFolder, claimed), nil, func() error {
		return renameBeneath(&loc{rel: path.Join(trashFolder, name), parent: trash, name: name},
			&loc{rel: path.Join(trashFolder, claimed), parent: trash, name: claimed}, false)
	})
	fault.Point("trash.claimed")
	if !isNotExist(err) {
		return err
	}
	if _, err := fstatat(fdOf(trash), claimed); err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", path.Join(trashFolder, name), fs.ErrNotExist)
}

// trashRecordsAt is where the state index keeps the records of the files
// of the trash entry name: at the entry, as trashWithRecords moves them,
// but a snapshot's entry (snapshot.<space>.<name>.<ns>, moved there
// without them) has them at the snapshot's path, as its removal's retry
// reads them. Restored or purged by the entry's path, such a snapshot's
// stubs had no record (a reviewer's finding).
func trashRecordsAt(name string) string {
	parts := strings.Split(name, ".")
	if len(parts) == 4 && parts[0] == "snapshot" && parts[1] != "" && parts[2] != "" && isDigits(parts[3]) {
		return path.Join(cjSnapshotsDir, parts[1], parts[2])
	}
	return path.Join(trashFolder, name)
}

// checkTrashEntry refuses a name that is no entry of the site trash.
func checkTrashEntry(name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("%q: not an entry of the site trash", name)
	}
	return nil
}

// cjKindOf names a file mode's type for messages.
func cjKindOf(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsRegular():
		return "file"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "non-directory"
}
