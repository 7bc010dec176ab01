// Package fsutil holds the file-writing rules the site and target
// activities share: data is written to a temporary file next to its
// destination and renamed into place, so readers never see half a file,
// and a writer killed mid-write leaves nothing that a retry does not
// clean up.
package fsutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// TmpPrefix marks the temporary files being written; listings hide them.
const TmpPrefix = ".hub-tmp-"

// TempName is the one temporary file name of dst.
func TempName(dst string) string {
	name := TmpPrefix + filepath.Base(dst)
	if len(name) > 255 { // NAME_MAX
		sum := sha256.Sum256([]byte(filepath.Base(dst)))
		name = TmpPrefix + hex.EncodeToString(sum[:16])
	}
	return filepath.Join(filepath.Dir(dst), name)
}

// OpenTemp opens TempName(dst), empty and locked by this writer. The name
// is fixed per destination, so a write retried after its worker was killed
// reuses the dead writer's file instead of leaving it behind; the lock
// (which the kernel releases when a process dies) makes a concurrent
// writer of the same destination wait for the first.
//
// The caller writes, renames the file onto dst and only then closes it;
// on failure it removes the file before closing it (see Discard).
func OpenTemp(ctx context.Context, dst string) (*os.File, error) {
	name := TempName(dst)
	for {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		if err := lock(ctx, f); err != nil {
			_ = f.Close()
			return nil, err
		}
		// The previous holder may have renamed the file into place (or
		// removed it) before we got the lock: then start over.
		held, errHeld := f.Stat()
		named, errNamed := os.Stat(name)
		if errHeld == nil && errNamed == nil && os.SameFile(held, named) {
			if err := f.Truncate(0); err != nil {
				_ = f.Close()
				return nil, err
			}
			return f, nil
		}
		_ = f.Close()
	}
}

// Discard removes a temporary file from OpenTemp and then unlocks it, in
// that order, so a waiting writer starts afresh.
func Discard(f *os.File) {
	_ = os.Remove(f.Name())
	_ = f.Close()
}

// lock takes an exclusive flock on f, waiting while another writer holds
// it, until ctx ends.
func lock(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WriteFile replaces name with data durably (mode perm): readers see the
// old or the new content, never a mix, and a crash leaves no stray file.
func WriteFile(name string, data []byte, perm os.FileMode) (err error) {
	f, err := OpenTemp(context.Background(), name)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			Discard(f)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(name))
}

// SyncDir makes a folder's entries (a rename into it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
