package site

import (
	"os"
)

// entryAt is how a walk knows an entry beyond its full path: as name in
// the folder it holds open as dirfd, so that stat and attribute reads
// need not resolve the whole path again (on Linux). The zero value knows
// nothing more.
type entryAt struct {
	dirfd int
	name  string // "" when the entry is known by its full path only
	// noIndex says the state index held no record folder for the entry's
	// folder when the walk opened it (see noRecordsBelow).
	noIndex bool
	// noAttr says the entry's folder has no folder mark (see
	// folderMarks): a policy scan then skips its attribute read.
	noAttr bool
}

// noRecordsBelow reports whether the index has no record of any entry
// directly in the folder rel, which a walk checks once per folder instead
// of once per file. A record written after the check is one the walk could
// equally have missed by reading that file a moment earlier: a walk is not
// a snapshot. Any doubt (an index still to import, an unreadable folder)
// answers false, and the per-file lookups run as before.
func (ix *index) noRecordsBelow(rel string) bool {
	if !ix.imported.Load() {
		return false
	}
	folder := ix.dir
	if rel != "" {
		var err error
		if _, folder, err = ix.paths(rel); err != nil {
			return false
		}
	}
	_, err := os.Lstat(folder)
	return absent(err)
}
