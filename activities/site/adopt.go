package site

import (
	"context"
	"os"

	"github.com/thehub/hub/internal/fault"
)

// AdoptResult counts what AdoptRecords found.
type AdoptResult struct {
	Adopted int `json:"adopted"` // unsigned records now signed
	Skipped int `json:"skipped"` // unsigned records that no longer describe their file
	// Refused counts unsigned records that are not of the legacy layout
	// (they name a reference, or lack the copy's key or a valid SHA-256):
	// no hub wrote them unsigned, so they are never signed.
	Refused int `json:"refused"`
}

// AdoptRecords signs the records written before records were signed
// (by a hub that kept remote copies under the file's path), so that those
// files can be recalled again. It trusts what is there: run it once, at
// the upgrade, before users could have written records of their own. A
// record that no longer matches its file (changed since) is left alone,
// and such a file is resident. Adopted records keep their legacy remote
// copy, which the collector never touches; migrating the file again moves
// it to the content-addressed layout. With dryRun nothing is written.
func AdoptRecords(ctx context.Context, root *Root, dryRun bool) (AdoptResult, error) {
	var res AdoptResult
	files, _ := newFilter(WalkOptions{Types: []string{TypeFile}})
	err := walkTree(ctx, root, []string{"/"}, walkConfig{filter: files}, func(items []item) error {
		for _, it := range items {
			if it.rec == nil || it.rec.Sig != "" {
				continue
			}
			if !legacyShaped(it.rec) {
				res.Refused++
				continue
			}
			if it.State == Resident {
				res.Skipped++
				continue
			}
			res.Adopted++
			if dryRun {
				continue
			}
			if err := root.adopt(it.Path, *it.rec); err != nil {
				return err
			}
		}
		return nil
	})
	return res, err
}

// legacyShaped tells a record an earlier hub could have left unsigned: a
// copy under a key of its target, checked by its SHA-256, and no reference.
func legacyShaped(rec *Record) bool {
	return rec.Ref == "" && rec.Target != "" && rec.Key != "" && validSum(rec.Checksum)
}

func (r *Root) adopt(p string, rec Record) error {
	l, err := r.locate(p)
	if err != nil {
		return err
	}
	defer l.close()
	fi, err := os.Lstat(l.path())
	if err != nil {
		return err
	}
	rec.Ino, rec.Btime = inode(fi), birthTime(l.path())
	if err := r.state.set(l.path(), l.rel, rec); err != nil {
		return err
	}
	fault.Point("site.adopted")
	return nil
}
