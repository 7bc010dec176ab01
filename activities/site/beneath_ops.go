//go:build unix

package site

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/internal/fault"
)

// The operations below act on a folder or file through a descriptor
// opened beneath the root (or the configuration folder): the *at calls
// (unlinkat, renameat, fstatat, getdents on an open folder) take the name
// of the last component inside a parent the kernel holds open, so a
// folder above it swapped for a symlink at any instant cannot redirect
// them outside. A checked path is never used again by name.

// trashDir is the folder of the root's .hub folder where removed C+J
// spaces that held data are kept for an operator.
const trashFolder = hubDir + "/trash"

// lstat describes p (an API path) without following a final symlink,
// through its pinned parent folder.
func (r *Root) lstat(p string) (os.FileInfo, error) {
	l, err := r.locate(p)
	if err != nil {
		return nil, err
	}
	defer l.close()
	return os.Lstat(l.path())
}

// openDir opens the folder p beneath the root to read its entries; a
// symlink anywhere on the way is refused.
func (r *Root) openDir(p string) (*os.File, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return nil, err
	}
	if rel == hubDir || strings.HasPrefix(rel, hubDir+"/") {
		return nil, fmt.Errorf("%q: %w", p, ErrReserved)
	}
	return openBeneath(r.f, rel, os.O_RDONLY|oDirectory, 0)
}

// checkDir tells whether p is a folder beneath the root reached through
// folders only: nil, a symlink refusal (ErrSymlink), fs.ErrNotExist when
// it (or a folder above it) is missing, or ENOTDIR when it is something
// else. The check holds the folder open while it looks, so its answer is
// about the folder at p, not whatever a swapped link pointed at.
func (r *Root) checkDir(p string) error {
	rel, err := cleanRel(p)
	if err != nil {
		return err
	}
	d, err := openBeneath(r.f, rel, oDirPath, 0)
	if err == nil {
		d.Close()
		return nil
	}
	if !errors.Is(err, unix.ENOTDIR) {
		return err
	}
	// ENOTDIR: p itself is not a folder, or one above it is a file.
	f, ferr := openBeneath(r.f, rel, oProbe, 0)
	if ferr != nil {
		return &os.PathError{Op: "open", Path: apiPath(rel), Err: fs.ErrNotExist}
	}
	f.Close()
	return &os.PathError{Op: "open", Path: apiPath(rel), Err: unix.ENOTDIR}
}

// removeDir removes the folder p when it is empty, with rmdir in its
// pinned parent: a folder holding anything stays (ENOTEMPTY), as does
// anything that is not a folder (ENOTDIR), a symlink included.
func (r *Root) removeDir(p string) error {
	l, err := r.locate(p)
	if err != nil {
		return err
	}
	defer l.close()
	if l.name == "" {
		return fmt.Errorf("%q: the site root is never removed", p)
	}
	st, err := fstatat(fdOf(l.parent), l.name)
	switch {
	case err != nil:
		return &os.PathError{Op: "rmdir", Path: apiPath(l.rel), Err: err}
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return &os.PathError{Op: "rmdir", Path: apiPath(l.rel), Err: unix.ENOTDIR}
	}
	if err := unix.Unlinkat(fdOf(l.parent), l.name, unix.AT_REMOVEDIR); err != nil {
		return &os.PathError{Op: "rmdir", Path: apiPath(l.rel), Err: err}
	}
	return nil
}

// ErrMountedBeneath: a filesystem is mounted at or beneath a folder that
// was to be removed or moved to the trash. A removal would delete what is on it,
// which is not the folder's (a bind mount of shared data), and a move
// would carry the mount along into the trash, whose purge would: nothing
// is done until it is unmounted.
var ErrMountedBeneath = errors.New("a filesystem is mounted beneath it; unmount it first")

// mountedBeneath is ErrMountedBeneath, naming the mount point, when a
// filesystem is mounted at or beneath the folder abs.
func mountedBeneath(abs string) error {
	if m := fsutil.MountedBeneath(abs); m != "" {
		return fmt.Errorf("%s: %w (at %s)", abs, ErrMountedBeneath, m)
	}
	return nil
}

// volumeOf returns the folder (API form) where a filesystem is mounted
// beneath the root holding the file rel (the deepest of them), or "" when
// rel is on the root's own mount. A bind mount of a folder of the root's
// own filesystem counts: it has the root's device, but its own mount.
func (r *Root) volumeOf(rel string) string {
	for _, m := range r.mountsBeneath() {
		if rel == m || strings.HasPrefix(rel, m+"/") {
			return apiPath(m)
		}
	}
	return ""
}

// mountsBeneath lists the mount points beneath the root (root-relative,
// deepest first), from the mount table read at most every few seconds
// (markerVolume reads it at once for a mount it does not list).
func (r *Root) mountsBeneath() []string {
	r.mounts.Lock()
	defer r.mounts.Unlock()
	r.readMounts()
	return r.mounts.list
}

// readMounts reads the mount table again if it was read over 5 seconds
// ago; r.mounts is locked. Only a mount a path can reach counts
// (fsutil.Visible): one hidden by another mounted over it, or over a
// folder above it, is not where its point's path goes (a reviewer's
// finding: such a volume counted as mounted, and the references of its
// stubs were dropped).
func (r *Root) readMounts() {
	if time.Since(r.mounts.read) <= 5*time.Second {
		return
	}
	r.mounts.list = nil // a new slice: callers of mountsBeneath read the old one unlocked
	r.mounts.ids = map[uint64]string{}
	r.mounts.from = map[string]string{}
	r.mounts.root, _, _ = fsutil.MountIDOf(r.dir)
	processRoot, _, _ := fsutil.MountIDOf("/")
	for _, m := range fsutil.Visible(fsutil.Mounts(), processRoot) {
		rel, ok := strings.CutPrefix(m.Point, r.dir+"/")
		if !ok {
			continue
		}
		r.mounts.list = append(r.mounts.list, rel)
		r.mounts.ids[m.ID] = rel
		r.mounts.from[rel] = m.From
	}
	slices.SortFunc(r.mounts.list, func(a, b string) int { return len(b) - len(a) })
	r.mounts.read = time.Now()
}

// rootVolume is what a marker names as the volume of a file on the root's
// own filesystem (see volumeKeeps); volumeOf says "" for it.
const rootVolume = "/"

// markerVolume says, for the marker of the file rel being written, the
// volume it is on (rootVolume for the root's own filesystem) and what is
// mounted there (see mountFrom). The mount of the file at (the step's
// pinned path to it, or its path beneath the root) is looked up in the
// mount table, read again at once when the table does not list it or its
// mount point leads to another mount now (the kernel reuses the IDs of
// mounts gone), so that a marker written right after a mount names it.
// Where at does not lead to the file ino, the mount of the nearest folder
// above rel that exists is looked up instead; without mount IDs (Linux
// before 5.8), the volume is told by rel's path. strict (at is the step's
// own descriptor path): a file on a filesystem that is not mounted
// beneath the root now (a volume unmounted lazily under the step) fails,
// rather than writing a marker that names no volume (a reviewer's
// finding: an audit dropped it while the volume was down).
func (r *Root) markerVolume(at, rel string, ino uint64, strict bool) (vol, from string, err error) {
	id, got, ok := fsutil.MountIDOf(at)
	if ok && ino != 0 && got != ino {
		if strict {
			return "", "", fmt.Errorf("%s: the step's file is not the one at its path (inode %d, not %d)", apiPath(rel), got, ino)
		}
		ok = false
	}
	if !ok && !strict {
		// Not there (yet: a snapshot's stub, a received file, renamed into
		// place after): the mount of the nearest folder above it that is
		// (a reviewer's finding: one received right after its volume's
		// mount named no volume).
		for dir := path.Dir(rel); !ok; dir = path.Dir(dir) {
			id, _, ok = fsutil.MountIDOf(filepath.Join(r.dir, filepath.FromSlash(dir)))
			if dir == "." || dir == "/" {
				break
			}
		}
	}
	if ok {
		for range 2 {
			r.mounts.Lock()
			r.readMounts()
			point, beneath := r.mounts.ids[id]
			onRoot, from := id == r.mounts.root, r.mounts.from[point]
			r.mounts.Unlock()
			if onRoot {
				return rootVolume, "", nil // the root's own mount, which holds while the root is there
			}
			if beneath {
				if now, _, ok := fsutil.MountIDOf(filepath.Join(r.dir, filepath.FromSlash(point))); ok && now == id {
					return apiPath(point), from, nil
				}
			}
			r.forgetMounts()
		}
		if strict {
			return "", "", fmt.Errorf("%s is on a filesystem (mount %d) that is not mounted beneath the site root now (a volume unmounted under the step?): no reference is written", apiPath(rel), id)
		}
	}
	if vol = r.volumeOf(rel); vol == "" {
		return rootVolume, "", nil
	}
	return vol, r.mountFrom(vol), nil
}

// mountFrom says what is mounted at the volume folder vol (API form, as
// volumeOf gives it) now: its filesystem type, source and the folder of
// it mounted (fsutil.Mount.From). An audit drops a reference of a volume
// only while its volume is mounted from where it was when the reference
// was written: a part of it (a subfolder bind-mounted, an NFS export of a
// subdirectory) or a block snapshot of it mounted in its place holds
// records the site wrote, but not all of them.
func (r *Root) mountFrom(vol string) string {
	if vol == "" {
		return ""
	}
	r.mounts.Lock()
	defer r.mounts.Unlock()
	r.readMounts()
	return r.mounts.from[strings.TrimPrefix(vol, "/")]
}

// forgetMounts makes the next mountsBeneath read the mount table: an
// audit judges by the mounts of now.
func (r *Root) forgetMounts() {
	r.mounts.Lock()
	r.mounts.read = time.Time{}
	r.mounts.Unlock()
}

// removeTree removes abs and everything below it, on abs's own mount
// only: a filesystem mounted beneath it, even after a check of the mount
// table, is left whole (ErrMountedBeneath).
func removeTree(abs string) error {
	err := fsutil.RemoveAllOnOneMount(abs)
	if errors.Is(err, fsutil.ErrOtherMount) {
		return fmt.Errorf("%w: %w", ErrMountedBeneath, err)
	}
	return err
}

// moveToTrash moves the folder p, with everything in it, to
// <root>/.hub/trash/<name> by one renameat between its pinned parent and
// the pinned trash folder, and returns where it went. The rename is
// atomic: a crash leaves the folder whole in one place or the other.
func (r *Root) moveToTrash(p, name string) (string, error) {
	l, err := r.locate(p)
	if err != nil {
		return "", err
	}
	defer l.close()
	if l.name == "" {
		return "", fmt.Errorf("%q: the site root is never moved", p)
	}
	if err := mkdirBeneath(r.f, trashFolder, 0o750); err != nil {
		return "", err
	}
	trash, err := openBeneath(r.f, trashFolder, oDirPath, 0)
	if err != nil {
		return "", err
	}
	defer trash.Close()
	st, err := fstatat(fdOf(l.parent), l.name)
	switch {
	case err != nil:
		return "", &os.PathError{Op: "stat", Path: apiPath(l.rel), Err: err}
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return "", &os.PathError{Op: "rename", Path: apiPath(l.rel), Err: unix.ENOTDIR}
	}
	if err := mountedBeneath(l.path()); err != nil {
		return "", err
	}
	fault.Point("trash.before-rename")
	if err := unix.Renameat(fdOf(l.parent), l.name, fdOf(trash), name); err != nil {
		return "", &os.PathError{Op: "rename", Path: apiPath(l.rel), Err: err}
	}
	fault.Point("trash.renamed")
	return filepath.Join(r.dir, filepath.FromSlash(trashFolder), name), nil
}

// namesIn lists the entries of the folder rel beneath parent; none when
// there is no such folder.
func namesIn(parent *os.File, rel string) ([]string, error) {
	d, err := openBeneath(parent, rel, os.O_RDONLY|oDirectory, 0)
	if isNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// The configuration folder (settings, exports, shares, quotas, policies)
// is opened by its name, which the operator chose, and every file in it
// is then reached beneath it: when it sits inside the site root (the
// default, <root>/.hub/config), a folder in it swapped for a symlink
// cannot send a write or a removal elsewhere.

// openConfig opens the configuration folder, creating it if missing.
func (a *Activities) openConfig() (*os.File, error) {
	if err := os.MkdirAll(a.ConfigDir, 0o750); err != nil {
		return nil, err
	}
	return openRootDir(a.ConfigDir)
}

// configError names a configuration file in a refusal about its folder.
func configError(rel string, err error) error {
	if errors.Is(err, ErrSymlink) {
		return fmt.Errorf("configuration file %s: %w", rel, ErrSymlink)
	}
	return err
}

// writeConfig replaces the configuration file rel (a slash path below the
// configuration folder) with data, creating its folders, atomically and
// durably (fsutil.WriteFile through the pinned folder).
func (a *Activities) writeConfig(rel string, data []byte) error {
	cfg, err := a.openConfig()
	if err != nil {
		return err
	}
	defer cfg.Close()
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if err := mkdirBeneath(cfg, dir, 0o750); err != nil {
		return configError(rel, err)
	}
	d, err := openBeneath(cfg, dir, oDirPath, 0)
	if err != nil {
		return configError(rel, err)
	}
	defer d.Close()
	return fsutil.WriteFile(d.Name()+"/"+base, data, 0o644)
}

// removeConfig removes the configuration file rel, with unlinkat in its
// pinned folder, and says whether it was there; a missing file (or
// folder) is already removed.
func (a *Activities) removeConfig(rel string) (removed bool, err error) {
	cfg, err := a.openConfig()
	if err != nil {
		return false, err
	}
	defer cfg.Close()
	dir, base := path.Split(rel)
	d, err := openBeneath(cfg, strings.TrimSuffix(dir, "/"), oDirPath, 0)
	if isNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, configError(rel, err)
	}
	defer d.Close()
	switch err := unix.Unlinkat(fdOf(d), base, 0); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	default:
		return false, &os.PathError{Op: "remove", Path: rel, Err: err}
	}
}

// readConfig returns the content of the configuration file rel, opened
// beneath the configuration folder.
func (a *Activities) readConfig(rel string) ([]byte, error) {
	cfg, err := a.openConfig()
	if err != nil {
		return nil, err
	}
	defer cfg.Close()
	f, err := openBeneath(cfg, rel, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, configError(rel, err)
	}
	defer f.Close()
	return io.ReadAll(f)
}
