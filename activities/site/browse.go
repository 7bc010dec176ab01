package site

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/workflows/vocab"
)

// ListDirInput asks for one page of a directory's children.
type ListDirInput struct {
	Path    string
	Offset  int
	Limit   int // 0 = all
	Details bool
	// Types keeps only children of these types (file, directory,
	// symlink); empty keeps all. Filtered before paging.
	Types []string `json:",omitempty"`
	// Restricted keeps only restricted children (true) or only the others
	// (false); nil keeps all. Filtered before paging.
	Restricted *bool `json:",omitempty"`
}

// FileInfo is a file or directory as the file browser shows it.
type FileInfo struct {
	Path            string         `json:"path"`
	Name            string         `json:"name"`
	Type            string         `json:"type"`
	Size            int64          `json:"size"`
	DataSize        int64          `json:"data_size"`
	DiskUsage       int64          `json:"disk_usage"`
	PathDepth       int            `json:"path_depth"`
	TotalFiles      *int64         `json:"total_files"`
	Atime           time.Time      `json:"atime"`
	Ctime           time.Time      `json:"ctime"`
	Mtime           time.Time      `json:"mtime"`
	Status          string         `json:"status"`
	RemoteLocations map[string]any `json:"remote_locations"`
	Error           string         `json:"error,omitempty"`
	// Metadata is the user metadata (fields, and "tags" when the entry
	// has tags), from its attributes or the file index.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Restricted: the hub does not act on this entry (a symlink, which it
	// never follows, or a special file: fifo, socket, device).
	Restricted bool `json:"restricted,omitempty"`
}

// ListDirOutput is the directory itself and one page of its children,
// sorted by name.
type ListDirOutput struct {
	Entry    FileInfo
	Children []FileInfo
	Total    int
}

// ListDir lists a directory of the site (or describes a single file).
// A path that leaves the root, also through a symlink at its end, is
// refused (BadPath) as its sub-paths are.
func (a *Activities) ListDir(ctx context.Context, in ListDirInput) (*ListDirOutput, error) {
	if _, err := a.Root.Resolve(in.Path); err != nil {
		return nil, badPath(err)
	}
	entry, err := a.fileInfo(in.Path, in.Details)
	if err != nil {
		return nil, err
	}
	out := &ListDirOutput{Entry: entry}
	if entry.Type != TypeDirectory {
		return out, nil
	}
	// Listed through the folder held open beneath the root: a folder
	// swapped for a symlink since it was described is refused, never
	// followed to list what it points at.
	d, err := a.Root.openDir(in.Path)
	if err != nil {
		return nil, badPath(err)
	}
	des, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, de := range des {
		if (entry.Path == "/" && de.Name() == hubDir) || strings.HasPrefix(de.Name(), tmpPrefix) {
			continue
		}
		if !in.keeps(de.Type()) {
			continue
		}
		names = append(names, de.Name())
	}
	sort.Strings(names)
	out.Total = len(names)
	total := int64(len(names))
	out.Entry.TotalFiles = &total
	lo := min(in.Offset, len(names))
	hi := len(names)
	if in.Limit > 0 {
		hi = min(lo+in.Limit, len(names))
	}
	for _, n := range names[lo:hi] {
		fi, err := a.fileInfo(path.Join(entry.Path, n), in.Details)
		if err != nil {
			fi = FileInfo{Path: path.Join(entry.Path, n), Name: n, Error: err.Error(), RemoteLocations: map[string]any{},
				Restricted: errors.Is(err, errUnsupportedType)}
		}
		fi.Metadata = a.browseMeta(ctx, fi)
		out.Children = append(out.Children, fi)
	}
	out.Entry.Metadata = a.browseMeta(ctx, out.Entry)
	return out, nil
}

// keeps tells whether a child of this mode passes the type and
// restricted filters (read from the folder entry: no stat per child).
func (in ListDirInput) keeps(mode fs.FileMode) bool {
	typ := ""
	switch {
	case mode.IsDir():
		typ = TypeDirectory
	case mode&fs.ModeSymlink != 0:
		typ = TypeSymlink
	case mode.IsRegular():
		typ = TypeFile
	}
	if len(in.Types) > 0 && !slices.Contains(in.Types, typ) {
		return false
	}
	if in.Restricted != nil {
		restricted := typ == "" || typ == TypeSymlink
		return restricted == *in.Restricted
	}
	return true
}

// errUnsupportedType marks a special file (fifo, socket, device), which
// the hub lists as restricted but never handles.
var errUnsupportedType = errors.New("the hub handles no special files (fifo, socket, device)")

// browseMeta is the user metadata of a listed entry: its attributes'
// where the root keeps them, else the file index's (when it has one).
func (a *Activities) browseMeta(ctx context.Context, fi FileInfo) map[string]any {
	if fi.Error != "" || fi.Type == "" {
		return nil
	}
	var m Meta
	if a.Root.state.xattr && fi.Type != TypeSymlink {
		l, err := a.Root.locate(fi.Path)
		if err != nil {
			return nil
		}
		m, _, _ = readXattrMeta(l.path())
		l.close()
	} else if _, err := os.Stat(filepath.Join(a.Root.dir, hubDir, fileIndexName)); err == nil {
		if x, err := a.Root.Files(); err == nil {
			m, _ = x.storedMeta(ctx, fi.Path)
		}
	}
	if m.empty() {
		return nil
	}
	out := make(map[string]any, len(m.Fields)+1)
	for k, v := range m.Fields {
		out[k] = v
	}
	if len(m.Tags) > 0 {
		out["tags"] = m.Tags
	}
	return out
}

func (a *Activities) fileInfo(p string, details bool) (FileInfo, error) {
	e, rec, err := a.Root.Stat(p)
	if err != nil {
		if st, lerr := a.Root.lstat(p); lerr == nil && typeOf(st.Mode()) == "" {
			return FileInfo{}, errUnsupportedType
		}
		return FileInfo{}, badPath(err)
	}
	fi := FileInfo{Path: e.Path, Name: path.Base(e.Path), Type: e.Type, Size: e.Size, Mtime: e.Mtime,
		Status: string(e.State), PathDepth: strings.Count(strings.TrimSuffix(e.Path, "/"), "/"),
		RemoteLocations: map[string]any{}}
	if e.Path == "/" {
		fi.Name, fi.PathDepth = "/", 0
	}
	if rec != nil && rec.Target != "" {
		fi.RemoteLocations[rec.Target] = map[string]any{"key": rec.Key, "checksum": rec.Checksum}
	}
	if e.Type == TypeSymlink {
		fi.Restricted = true
		return fi, nil // a link is shown, never followed
	}
	st, err := a.Root.lstat(p)
	if err != nil && !isNotExist(err) {
		return fi, badPath(err)
	}
	if err == nil {
		fi.DataSize = st.Size()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			fi.DiskUsage = sys.Blocks * 512
			fi.Atime, fi.Ctime = accessChangeTimes(sys)
		}
	}
	return fi, nil
}

// badPath marks the error of a path the client named wrongly (outside the
// root, reserved for the hub, missing) as a non-retryable BadPath, which
// the API answers with 404 at once; other errors stay retryable.
func badPath(err error) error {
	if errors.Is(err, ErrOutsideRoot) || errors.Is(err, ErrReserved) || errors.Is(err, os.ErrNotExist) {
		return temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadPath, err)
	}
	return err
}
