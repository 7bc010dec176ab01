package site

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// cjSnapshotHeartbeatBytes is how much of one file a snapshot copies
// between heartbeats (it also beats once per entry): a long copy must not
// look like a dead worker, or Temporal would start a second attempt while
// the first still runs.
const cjSnapshotHeartbeatBytes = 4 << 20

// cjSnapshot takes a read-only copy of a space, or removes one.
//
// The copy is a real copy, never hard links: a hard-linked file shares its
// data with the space, so an in-place write to the space would change the
// snapshot. It is built under a temporary name and renamed into place, so
// an existing snapshot is always complete and taking it again is a no-op.
func (a *Activities) cjSnapshot(ctx context.Context, s *CJSnapshot, del bool) (string, error) {
	return a.snapshot(ctx, path.Join(cjSpacesDir, s.Space), s, del)
}

// snapshotTrashPrefix starts the site-trash entries of snapshot name of
// space: snapshot.<space>.<name>.<ns>. Names never hold a dot (cjNameRE),
// so neither a space's trash entry (<name>-<ns>) nor another snapshot's
// starts so. Entries of the older form snapshot-<space>-<name>-<ns> are
// never removed: a space named snapshot-<space>-<name> is trashed under
// the same form, so nothing tells them apart.
func snapshotTrashPrefix(space, name string) string { return "snapshot." + space + "." + name + "." }

// emptySnapshotTrash removes the site trash's entries of the snapshots of
// space whose name match accepts: snapshots moved there for removal, never
// a space's data. The references of their stubs on the targets drivers
// opens are dropped first (see dropTrashedRefs).
func (a *Activities) emptySnapshotTrash(ctx context.Context, drivers *driverSet, space string, match func(name string) bool) error {
	entries, err := a.snapshotTrashEntries(space, match)
	if err != nil {
		return err
	}
	for entry, name := range entries {
		if err := a.Root.dropTrashedRefs(ctx, drivers, entry, path.Join(cjSnapshotsDir, space, name)); err != nil {
			return err
		}
		fault.Point("snapshot.refs-dropped")
		if err := cjRemoveTree(filepath.Join(a.Root.Dir(), filepath.FromSlash(entry))); err != nil {
			return err
		}
	}
	return nil
}

// snapshotTrashEntries maps the site trash's entries (root-relative) of
// the snapshots of space whose name match accepts to their snapshot's
// name.
func (a *Activities) snapshotTrashEntries(space string, match func(name string) bool) (map[string]string, error) {
	names, err := namesIn(a.Root.f, trashFolder)
	if err != nil {
		return nil, err
	}
	entries := map[string]string{}
	for _, n := range names {
		parts := strings.Split(n, ".")
		if len(parts) == 4 && parts[0] == "snapshot" && parts[1] == space && match(parts[2]) && isDigits(parts[3]) {
			entries[path.Join(trashFolder, n)] = parts[2]
		}
	}
	return entries, nil
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// snapshotsBuild is where snapshots are built before they are renamed
// into place: inside the hub's own folder, which no user path reaches.
const snapshotsBuild = hubDir + "/snapshots-build"

// snapshot takes (or, with del, removes) snapshot s.Name of space
// s.Space, whose folder is srcRel (root-relative), at
// .snapshots/<space>/<name>. The snapshot's folder is placed and removed
// through descriptors opened beneath the root (renameat into the pinned
// parent; removal by a move to the site trash): a .snapshots folder
// swapped for a symlink cannot send a snapshot, or a removal, elsewhere.
func (a *Activities) snapshot(ctx context.Context, srcRel string, s *CJSnapshot, del bool) (string, error) {
	if !cjNameRE.MatchString(s.Space) || !cjNameRE.MatchString(s.Name) {
		return "", cjPermanent(fmt.Errorf("invalid space or snapshot name %q/%q", s.Space, s.Name))
	}
	parentRel := path.Join(cjSnapshotsDir, s.Space)
	rel := path.Join(parentRel, s.Name)
	if del {
		// Under the site's moves lock: a step inside the snapshot (a
		// recall of one of its stubs) that checked its folder under the
		// lock is not moved away before its rename.
		unlock, err := a.Root.lockMoves(ctx)
		if err != nil {
			return "", err
		}
		_, err = a.Root.moveToTrash(rel, snapshotTrashPrefix(s.Space, s.Name)+fmt.Sprint(time.Now().UnixNano()))
		unlock()
		if err != nil && !isNotExist(err) {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		// Empty the trash of this snapshot, also of an attempt killed
		// after its move.
		drivers := a.drivers(s.Targets)
		if err := a.emptySnapshotTrash(ctx, drivers, s.Space, func(n string) bool { return n == s.Name }); err != nil {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		// Index records of its stubs (those in attributes went with the
		// files).
		if err := a.Root.forgetRemovedSnapshot(ctx, rel); err != nil {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		_ = a.Root.removeDir(parentRel) // only when empty: other snapshots of the space stay
		// Reported removed once that is on disk: a crash rolling the
		// move back would bring the snapshot back under a freed name.
		if err := flushSite(a.Root.flushDir); err != nil {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		if err != nil {
			return rel + " already removed", nil
		}
		return "removed " + rel, nil
	}

	if err := mkdirBeneath(a.Root.f, parentRel, 0o755); err != nil {
		return "", err
	}
	parent, err := openBeneath(a.Root.f, parentRel, oDirPath, 0)
	if err != nil {
		return "", err
	}
	defer parent.Close()
	if msg, found, err := placedSnapshot(parent, s.Name, rel); found {
		if err == nil {
			err = flushSite(a.Root.flushDir) // placed by an attempt that did not report it
		}
		return msg, err
	}
	// A removal of this snapshot that moved it to the trash and then
	// failed (its retries ran out) leaves the item to be retried: its name
	// must not be taken again with today's content, as if it were the
	// point in time its users kept.
	if trashed, err := a.snapshotTrashEntries(s.Space, func(n string) bool { return n == s.Name }); err != nil {
		return "", err
	} else if len(trashed) > 0 {
		return "", cjPermanent(fmt.Errorf("snapshot %s was removed, and its removal has not finished (its copy is in the site trash): remove it again to finish, then take it anew", rel))
	}
	// A missing space may still be being created: retried.
	src, err := openBeneath(a.Root.f, srcRel, oDirPath, 0)
	if err != nil {
		return "", fmt.Errorf("space folder %s: %w", srcRel, err)
	}
	src.Close()

	if err := mkdirBeneath(a.Root.f, snapshotsBuild, 0o750); err != nil {
		return "", err
	}
	build, err := openBeneath(a.Root.f, snapshotsBuild, os.O_RDONLY|oDirectory, 0)
	if err != nil {
		return "", err
	}
	defer build.Close()
	buildDir := filepath.Join(a.Root.Dir(), filepath.FromSlash(snapshotsBuild))
	own, held, err := newSnapshotBuild(ctx, a.Root, build, buildDir)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", rel, err)
	}
	defer held.Close() // releases the attempt's lock
	limit := s.LockThreshold
	if limit <= 0 {
		limit = defaultSnapshotLimit
	}
	sc := &snapshotCopy{root: a.Root, drivers: a.drivers(s.Targets), src: srcRel, build: buildRel(own), final: rel,
		room: &poolRoom{limit: limit, measure: func() (int64, int64, error) { return a.measurePool(ctx, cjPoolName) }}}
	tmp := filepath.Join(buildDir, own, snapshotTree)
	files, bytes, err := cjCopyTree(ctx, a.Root, srcRel, tmp, sc)
	if err == nil {
		err = cjReadOnly(tmp)
	}
	if err == nil {
		// What the snapshot keeps is on disk before it is placed and
		// reported taken (the space's files may be changed or deleted the
		// next instant): its copies, and its stubs' markers on their
		// targets.
		err = beatWhile(ctx, func() any { return "flushing" }, func() error {
			if err := flushSite(a.Root.flushDir); err != nil {
				return err
			}
			return sc.drivers.flush(ctx)
		})
	}
	if err == nil {
		// An attempt that outlived its time (a flush stuck for hours) places
		// nothing: its item may have been given up and removed since.
		err = ctx.Err()
	}
	if err == nil {
		fault.Point("snapshot.copied")
		// The tree renamed is this attempt's own, whole: renamed out of
		// the folder it holds locked, never over a snapshot another
		// attempt placed meanwhile.
		err = sc.place(ctx, build, parent, s.Name, func() error {
			return renameBeneath(&loc{rel: sc.build, parent: held, name: snapshotTree}, &loc{rel: rel, parent: parent, name: s.Name}, false)
		})
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			sc.discard(ctx)
			_ = cjRemoveTree(filepath.Join(buildDir, own))
			if msg, found, err := placedSnapshot(parent, s.Name, rel); found {
				return msg, err
			}
		}
	}
	if err == nil {
		_ = unix.Unlinkat(fdOf(build), own, unix.AT_REMOVEDIR) // empty now; else a later build removes it
		fault.Point("snapshot.placed")
		// Placed: a failure now leaves it to the retry, which finds it
		// placed; nothing of it is discarded. It is reported taken once
		// its placement is on disk (else a crash could roll the rename
		// back, the tree then removed as a build's leftover).
		err = readOnlyAt(parent, s.Name)
		if err == nil {
			err = flushSite(a.Root.flushDir)
		}
		if err != nil {
			return "", fmt.Errorf("snapshot %s, placed: %w", rel, err)
		}
	}
	if err != nil {
		sc.discard(ctx)
		_ = cjRemoveTree(filepath.Join(buildDir, own))
		return "", fmt.Errorf("snapshot %s: %w", rel, err)
	}
	return fmt.Sprintf("took %s: %d files, %d bytes copied from %s%s", rel, files, bytes, srcRel, sc.summary()), nil
}

// forgetRemovedSnapshot drops the index records of the removed snapshot
// rel, under the moves lock and only while no snapshot is there: one
// placed there anew (its placement moves records under the same lock)
// after a stale attempt of the removal emptied the trash would lose its
// stubs' records.
func (r *Root) forgetRemovedSnapshot(ctx context.Context, rel string) error {
	unlock, err := r.lockMoves(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := r.lstat(rel); !isNotExist(err) {
		return err // placed anew (nil), or unknown
	}
	return r.state.forgetTree(rel)
}

// placedSnapshot tells whether snapshot name is in place in parent. One
// that is is complete (only whole copies are renamed there); its top is
// made read-only again in case the attempt that placed it stopped right
// after the rename.
func placedSnapshot(parent *os.File, name, rel string) (msg string, found bool, err error) {
	st, err := fstatat(fdOf(parent), name)
	if err != nil {
		return "", false, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", true, cjPermanent(fmt.Errorf("cannot create %s: something else is in the way", rel))
	}
	if err := readOnlyAt(parent, name); err != nil {
		return "", true, err
	}
	return rel + " already taken", true, nil
}

// readOnlyAt removes the write bits of the folder name in parent (a
// snapshot's, placed: its other bits are its space folder's).
func readOnlyAt(parent *os.File, name string) error {
	st, err := fstatat(fdOf(parent), name)
	if err != nil {
		return err
	}
	return unix.Fchmodat(fdOf(parent), name, uint32(st.Mode)&0o777&^0o222, 0)
}

// snapshotTree is the name of the copy in an attempt's build folder.
const snapshotTree = "tree"

// newSnapshotBuild makes a build attempt's own folder in the build folder
// (build, open for reading, at buildDir): a fresh random name that no
// other attempt can pick, locked (flock) until held is closed. It then
// removes the leftovers of earlier attempts: the folders nobody holds
// locked (a lock dies with its process), which cannot be a live attempt's.
// The build folder itself stays locked while it looks and makes the new
// folder, so that no attempt takes a folder just made, not locked yet, for
// a leftover. Where the filesystem cannot lock, leftovers are left for an
// operator: nothing tells them from a live attempt's.
func newSnapshotBuild(ctx context.Context, root *Root, build *os.File, buildDir string) (own string, held *os.File, err error) {
	locks := true
	err = flockWait(build)
	if noLocks(err) {
		locks, err = false, nil
	} else if err != nil {
		return "", nil, err
	}
	type leftover struct {
		name string
		f    *os.File // open and locked
	}
	var dead []leftover
	defer func() {
		for _, d := range dead {
			if err == nil {
				if cjRemoveTree(filepath.Join(buildDir, d.name)) == nil {
					_ = root.state.forgetTree(buildRel(d.name))
				}
				_ = cjHeartbeat(ctx)
			}
			d.f.Close()
		}
	}()
	if locks {
		defer unix.Flock(fdOf(build), unix.LOCK_UN) // runs before the removals
		names, err := build.Readdirnames(-1)
		if err != nil {
			return "", nil, err
		}
		for _, n := range names {
			d, err := openBeneath(build, n, os.O_RDONLY|oDirectory, 0)
			if err != nil {
				continue // not a folder: not a build
			}
			if unix.Flock(fdOf(d), unix.LOCK_EX|unix.LOCK_NB) != nil {
				d.Close() // a live attempt's
				continue
			}
			dead = append(dead, leftover{n, d})
		}
	}
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		own = hex.EncodeToString(b[:])
		if err = unix.Mkdirat(fdOf(build), own, 0o750); !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return "", nil, err
	}
	if held, err = openBeneath(build, own, os.O_RDONLY|oDirectory, 0); err == nil && locks {
		if err = unix.Flock(fdOf(held), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			held.Close()
		}
	}
	if err != nil {
		_ = unix.Unlinkat(fdOf(build), own, unix.AT_REMOVEDIR)
		return "", nil, err
	}
	return own, held, nil
}

// noLocks tells a flock error saying the filesystem cannot lock (NFS
// without a lock service, some FUSE filesystems); see fsutil's lock.
func noLocks(err error) bool {
	return errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)
}

// cjCopyTree copies the tree at srcRel (root-relative) to dst (which must
// not exist): folders, regular files with their mode and times, and
// symbolic links as links. Other kinds (devices, sockets, pipes) are
// skipped. The source is a space its users write to, so every folder and
// file of it is opened beneath the root without following a symlink: one
// swapped in while the copy runs fails the copy instead of bringing
// anything from elsewhere into the snapshot.
func cjCopyTree(ctx context.Context, root *Root, srcRel, dst string, sc *snapshotCopy) (files, bytes int64, err error) {
	var copyDir func(rel, to string) error
	copyDir = func(rel, to string) (err error) {
		d, err := openBeneath(root.f, rel, os.O_RDONLY|oDirectory, 0)
		if err != nil {
			return err
		}
		defer d.Close()
		info, err := d.Stat()
		if err != nil {
			return err
		}
		// The worker's alone while the copy runs; then its source's
		// owner, ACLs and mode (cjReadOnly drops the write bits).
		if err := os.Mkdir(to, 0o700); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				err = keepAccess(d, info, to)
			}
		}()
		des, err := d.ReadDir(-1)
		if err != nil {
			return err
		}
		for _, de := range des {
			if err := cjHeartbeat(ctx, files); err != nil {
				return err
			}
			child, target := path.Join(rel, de.Name()), filepath.Join(to, de.Name())
			switch {
			case de.IsDir():
				err = copyDir(child, target)
			case de.Type()&fs.ModeSymlink != 0:
				var link string
				if link, err = os.Readlink(d.Name() + "/" + de.Name()); err == nil {
					err = os.Symlink(link, target)
				}
				if st, serr := fstatat(fdOf(d), de.Name()); err == nil && serr == nil {
					err = chownCopy(target, int(st.Uid), int(st.Gid))
				}
			case de.Type().IsRegular():
				var n int64
				n, err = cjCopyFile(ctx, root, child, target, sc)
				if errors.Is(err, errNotRegular) {
					err = nil // swapped for a special file since listed: skipped as those are
					break
				}
				files++
				bytes += n
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return files, bytes, copyDir(srcRel, dst)
}

// errNotRegular: what cjCopyFile opened is not a regular file (a FIFO,
// device or folder swapped in since the listing); nothing was copied.
var errNotRegular = errors.New("not a regular file")

// cjCopyFile copies the regular file srcRel (root-relative) to dst,
// which it creates, heartbeating every cjSnapshotHeartbeatBytes. The
// source is opened without blocking (a FIFO swapped in would otherwise
// wait for a writer, and then copy what it sends) and checked to be a
// regular file before anything is read. A stub (a migrated file whose
// record the site trusts) is copied by sc, as a stub of its own.
func cjCopyFile(ctx context.Context, root *Root, srcRel, dst string, sc *snapshotCopy) (n int64, err error) {
	in, err := openBeneath(root.f, srcRel, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return 0, err
	}
	if !info.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: %w", srcRel, errNotRegular)
	}
	if sc != nil {
		if err := sc.room.reserve(info.Size()); err != nil {
			return 0, err
		}
		rec, err := root.record(filepath.Join(root.Dir(), filepath.FromSlash(srcRel)), srcRel, info)
		if err != nil && !errors.Is(err, ErrUntrustedRecord) {
			return 0, err
		}
		// The record is checked against the file opened: a file swapped
		// in since is copied as what it is.
		if rec != nil && rec.State == Migrated && rec.matches(info) {
			if rec.Pending == pendingRecall {
				return 0, cjPermanent(fmt.Errorf("%s: %w", apiPath(srcRel), errRecallInterrupted))
			}
			return sc.copyStub(ctx, in, info, srcRel, dst, *rec)
		}
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	for err == nil {
		var c int64
		c, err = io.CopyN(out, in, cjSnapshotHeartbeatBytes)
		n += c
		if err == nil {
			err = cjHeartbeat(ctx, n)
		}
	}
	if err == io.EOF {
		err = nil
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if err := keepAccess(in, info, dst); err != nil {
		return n, err
	}
	return n, os.Chtimes(dst, info.ModTime(), info.ModTime())
}

// cjReadOnly removes every write permission below dir (dir itself stays
// writable so that it can still be renamed into place).
func cjReadOnly(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return nil // a link's own mode means nothing on Linux
		}
		if err := os.Chmod(p, info.Mode().Perm()&^0o222); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}
