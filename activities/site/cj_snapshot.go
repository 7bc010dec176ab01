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
	if !cjNameRE.MatchString(s.Space) {
		return "", cjPermanent(fmt.Errorf("invalid space name %q", s.Space))
	}
	parentRel := path.Join(cjSnapshotsDir, s.Space)
	rel := path.Join(parentRel, s.Name)
	dst, err := a.Root.Resolve(rel)
	if err != nil {
		return "", err
	}
	if del {
		if err := cjRemoveTree(dst); err != nil {
			return "", fmt.Errorf("remove %s: %w", rel, err)
		}
		if parent, err := a.Root.Resolve(parentRel); err == nil {
			_ = os.Remove(parent) // only when empty: other snapshots of the space stay
		}
		return "removed " + rel, nil
	}

	if fi, err := os.Lstat(dst); err == nil {
		if !fi.IsDir() {
			return "", cjPermanent(fmt.Errorf("cannot create %s: a %s is in the way", rel, cjKindOf(fi.Mode())))
		}
		// Complete (renamed into place); make sure the top is read-only
		// in case a previous attempt stopped right after the rename.
		if err := os.Chmod(dst, 0o555); err != nil {
			return "", err
		}
		return rel + " already taken", nil
	}
	srcRel := path.Join(cjSpacesDir, s.Space)
	src, err := a.Root.Resolve(srcRel)
	if err != nil {
		return "", err
	}
	// A missing space may still be being created: retried.
	if fi, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("space folder %s: %w", srcRel, err)
	} else if !fi.IsDir() {
		return "", cjPermanent(fmt.Errorf("space folder %s is not a directory", srcRel))
	}

	tmp := filepath.Join(filepath.Dir(dst), tmpPrefix+s.Name)
	if err := cjRemoveTree(tmp); err != nil { // a crashed attempt's leftovers
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	files, bytes, err := cjCopyTree(ctx, src, tmp)
	if err == nil {
		err = cjReadOnly(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err == nil {
		err = os.Chmod(dst, 0o555)
	}
	if err != nil {
		_ = cjRemoveTree(tmp)
		return "", fmt.Errorf("snapshot %s: %w", rel, err)
	}
	return fmt.Sprintf("took %s: %d files, %d bytes copied from %s", rel, files, bytes, srcRel), nil
}

// cjCopyTree copies the tree at src to dst (which must not exist): folders,
// regular files with their mode and times, and symbolic links as links.
// Other kinds (devices, sockets, pipes) are skipped.
func cjCopyTree(ctx context.Context, src, dst string) (files, bytes int64, err error) {
	entries := 0
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, walkErr error) error {
		if walkErr != nil {
			return walkErr
		}
		if entries++; entries%cjSnapshotHeartbeatEvery == 0 {
			if err := cjHeartbeat(ctx, files); err != nil {
				return err
			}
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			// Writable while the copy runs; cjReadOnly fixes the mode.
			return os.Mkdir(target, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			n, err := cjCopyFile(p, target, info)
			files++
			bytes += n
			return err
		}
		return nil
	})
	return files, bytes, err
}

func cjCopyFile(src, dst string, info fs.FileInfo) (n int64, err error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
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
