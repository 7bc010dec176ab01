package site

import (
	"context"
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

	"github.com/thehub/hub/activities/fsutil"
)

// cjSnapshotHeartbeatEvery is how many entries a snapshot copies between
// heartbeats.
const cjSnapshotHeartbeatEvery = 200

// cjSnapshot takes a read-only copy of a space, or removes one.
//
// The copy is a real copy, never hard links: a hard-linked file shares its
// data with the space, so an in-place write to the space would change the
// snapshot. It is built under a temporary name and renamed into place, so
// an existing snapshot is always complete and taking it again is a no-op.
func (a *Activities) cjSnapshot(ctx context.Context, s *CJSnapshot, del bool) (string, error) {
	return a.snapshot(ctx, path.Join(cjSpacesDir, s.Space), s, del)
}

// trashedSnapshotPrefix names snapshot name of space in the site trash.
func trashedSnapshotPrefix(space, name string) string { return "snapshot-" + space + "-" + name + "-" }

// emptySnapshotTrash removes the site trash's entries named with prefix:
// snapshots moved there for removal (never a space's data, whose trash
// entries are named otherwise).
func (a *Activities) emptySnapshotTrash(prefix string) error {
	trash, err := openBeneath(a.Root.f, trashFolder, os.O_RDONLY|oDirectory, 0)
	if isNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	names, err := trash.Readdirnames(-1)
	trash.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			if err := cjRemoveTree(filepath.Join(a.Root.Dir(), filepath.FromSlash(trashFolder), n)); err != nil {
				return err
			}
		}
	}
	return nil
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
		_, err := a.Root.moveToTrash(rel, trashedSnapshotPrefix(s.Space, s.Name)+fmt.Sprint(time.Now().UnixNano()))
		if err != nil && !isNotExist(err) {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		// Empty the trash of this snapshot, also of an attempt killed
		// after its move.
		if err := a.emptySnapshotTrash(trashedSnapshotPrefix(s.Space, s.Name)); err != nil {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		_ = a.Root.removeDir(parentRel) // only when empty: other snapshots of the space stay
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
	if st, err := fstatat(fdOf(parent), s.Name); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return "", cjPermanent(fmt.Errorf("cannot create %s: something else is in the way", rel))
		}
		// Complete (renamed into place); make sure the top is read-only
		// in case a previous attempt stopped right after the rename.
		if err := unix.Fchmodat(fdOf(parent), s.Name, 0o555, 0); err != nil {
			return "", err
		}
		return rel + " already taken", nil
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
	build, err := openBeneath(a.Root.f, snapshotsBuild, oDirPath, 0)
	if err != nil {
		return "", err
	}
	defer build.Close()
	tmpName := s.Space + "-" + s.Name
	tmp := filepath.Join(a.Root.Dir(), filepath.FromSlash(snapshotsBuild), tmpName)
	if err := cjRemoveTree(tmp); err != nil { // a crashed attempt's leftovers
		return "", err
	}
	files, bytes, err := cjCopyTree(ctx, a.Root, srcRel, tmp)
	if err == nil {
		err = cjReadOnly(tmp)
	}
	if err == nil {
		fsutil.Fault("snapshot.copied")
		err = unix.Renameat(fdOf(build), tmpName, fdOf(parent), s.Name)
	}
	if err == nil {
		fsutil.Fault("snapshot.placed")
		err = unix.Fchmodat(fdOf(parent), s.Name, 0o555, 0)
	}
	if err != nil {
		_ = cjRemoveTree(tmp)
		return "", fmt.Errorf("snapshot %s: %w", rel, err)
	}
	return fmt.Sprintf("took %s: %d files, %d bytes copied from %s", rel, files, bytes, srcRel), nil
}

// cjCopyTree copies the tree at srcRel (root-relative) to dst (which must
// not exist): folders, regular files with their mode and times, and
// symbolic links as links. Other kinds (devices, sockets, pipes) are
// skipped. The source is a space its users write to, so every folder and
// file of it is opened beneath the root without following a symlink: one
// swapped in while the copy runs fails the copy instead of bringing
// anything from elsewhere into the snapshot.
func cjCopyTree(ctx context.Context, root *Root, srcRel, dst string) (files, bytes int64, err error) {
	entries := 0
	var copyDir func(rel, to string) error
	copyDir = func(rel, to string) error {
		d, err := openBeneath(root.f, rel, os.O_RDONLY|oDirectory, 0)
		if err != nil {
			return err
		}
		defer d.Close()
		// Writable while the copy runs; cjReadOnly fixes the mode.
		if err := os.Mkdir(to, 0o755); err != nil {
			return err
		}
		des, err := d.ReadDir(-1)
		if err != nil {
			return err
		}
		for _, de := range des {
			if entries++; entries%cjSnapshotHeartbeatEvery == 0 {
				if err := cjHeartbeat(ctx, files); err != nil {
					return err
				}
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
			case de.Type().IsRegular():
				var n int64
				n, err = cjCopyFile(root, child, target)
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

func cjCopyFile(root *Root, srcRel, dst string) (n int64, err error) {
	in, err := openBeneath(root.f, srcRel, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if err := os.Chmod(dst, info.Mode().Perm()); err != nil {
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
		mode := info.Mode().Perm() &^ 0o222
		if d.IsDir() {
			mode |= 0o555
		}
		if err := os.Chmod(p, mode); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}
