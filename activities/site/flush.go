package site

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"

	"github.com/thehub/hub/activities/fsutil"
)

// flushSite flushes the filesystem holding the open folder d
// (fsutil.SyncFSOf) before a recall drops records and references, a
// migrate releases files marked in their attributes, a received batch is
// reported, or a snapshot is placed; tests see when it runs, make it fail,
// or play a user's save during it.
var flushSite = fsutil.SyncFSOf

// written names the filesystems a batch wrote on, for one flush each: the
// root's, and any mounted beneath it, which the root's syncfs does not
// reach, each by the folder of a file written there.
type written struct {
	mu      sync.Mutex
	any     bool
	folders map[uint64]string // device → root-relative folder, besides the root's
}

// add counts rel (root-relative), whose stat is fi, as written; with fi
// nil (the file is gone), only the root's filesystem.
func (w *written) add(root *Root, rel string, fi fs.FileInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.any = true
	if fi == nil || device(fi) == root.dev {
		return
	}
	dev := device(fi)
	if w.folders == nil {
		w.folders = map[uint64]string{}
	}
	if _, ok := w.folders[dev]; !ok {
		w.folders[dev] = path.Dir(rel)
	}
}

// flush flushes each filesystem written on, once; nothing when none was.
// A mount's folder is opened beneath the root and must still be on the
// filesystem it named (a user may have moved it meanwhile): else the
// batch fails, and its retry flushes again.
func (w *written) flush(root *Root) error {
	if !w.any {
		return nil
	}
	if err := flushSite(root.flushDir); err != nil {
		return err
	}
	for dev, rel := range w.folders {
		if err := flushFolder(root, rel, dev); err != nil {
			return fmt.Errorf("flush the filesystem of %s: %w", apiPath(rel), err)
		}
	}
	return nil
}

func flushFolder(root *Root, rel string, dev uint64) error {
	d, err := openBeneath(root.f, rel, os.O_RDONLY|oDirectory, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return err
	}
	if device(fi) != dev {
		return fmt.Errorf("moved to another filesystem during the batch")
	}
	return flushSite(d)
}
