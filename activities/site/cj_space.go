package site

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/thehub/hub/activities/fsutil"
)

// cjSpace creates a space's directory with its templates' folders and
// records its quota, or removes both.
func (a *Activities) cjSpace(s *CJSpace, del bool) (string, error) {
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
		case (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)) && s.KeepNonEmpty:
			moved = " (kept in place: not empty, its data stays where it is)"
		case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
			trash, err := a.Root.moveToTrash(rel, fmt.Sprintf("%s-%d", s.Name, time.Now().UnixNano()))
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
		fsutil.Fault("cj.space.removed")
		if err := a.cjRemoveFile(quota); err != nil {
			return "", fmt.Errorf("remove quota of %s: %w", rel, err)
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
