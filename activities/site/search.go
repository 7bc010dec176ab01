package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/internal/fault"

	"github.com/thehub/hub/workflows/vocab"
)

// ScanFileIndexInput names the folders to scan (none: the whole root).
type ScanFileIndexInput struct {
	Paths []string
}

// ScanFileIndexOutput reports a scan.
type ScanFileIndexOutput struct {
	Entries int64       `json:"entries"`
	Index   IndexStatus `json:"index"`
	// MetadataFields and Tags are the metadata keys and tags the site's
	// files carry (up to 1,000 each), for the hub's lists of them.
	MetadataFields []string `json:"metadata_fields,omitempty"`
	Tags           []string `json:"tags,omitempty"`
}

// heartbeatEvery spaces the heartbeats of a long scan (the SDK throttles
// them anyway; this keeps the calls cheap).
const heartbeatEvery = 2 * time.Second

// ScanFileIndex rebuilds the site's file index (or the rows under the
// given folders) from a parallel walk, heartbeating its progress.
func (a *Activities) ScanFileIndex(ctx context.Context, in ScanFileIndexInput) (*ScanFileIndexOutput, error) {
	x, err := a.Root.Files()
	if err != nil {
		return nil, err
	}
	for _, p := range in.Paths {
		if _, err := a.Root.Resolve(p); err != nil {
			return nil, badPath(err)
		}
	}
	n, err := x.Scan(ctx, in.Paths, beater(ctx))
	if err != nil {
		return nil, err
	}
	st, err := x.Status(ctx)
	if err != nil {
		return nil, err
	}
	out := &ScanFileIndexOutput{Entries: n, Index: st}
	out.MetadataFields, out.Tags, err = x.Fields(ctx)
	return out, err
}

func beater(ctx context.Context) func(int64) {
	last := time.Now()
	return func(n int64) {
		if activity.IsActivity(ctx) && time.Since(last) > heartbeatEvery {
			activity.RecordHeartbeat(ctx, n)
			last = time.Now()
		}
	}
}

// SearchFilesInput is one page of a search at a site.
type SearchFilesInput struct {
	Path      string        `json:"path"`
	Recursive bool          `json:"recursive"`
	Filters   SearchFilters `json:"filters"`
	Fields    []string      `json:"fields,omitempty"`
	After     string        `json:"after,omitempty"`
	Limit     int           `json:"limit"`
}

// SearchFilesOutput is one page of answers and how fresh they are.
type SearchFilesOutput struct {
	Files []FoundFile `json:"files"`
	// Next is the cursor of the next page; "" after the last.
	Next  string      `json:"next,omitempty"`
	Index IndexStatus `json:"index"`
}

// SearchFiles answers a page of a search from the site's file index. A
// site whose index was never built scans first (heartbeating), so its
// first answer is complete rather than empty.
func (a *Activities) SearchFiles(ctx context.Context, in SearchFilesInput) (*SearchFilesOutput, error) {
	if err := in.Filters.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadInput, err)
	}
	if _, err := a.Root.Resolve(in.Path); err != nil {
		return nil, badPath(err)
	}
	x, err := a.Root.Files()
	if err != nil {
		return nil, err
	}
	st, err := x.Status(ctx)
	if err != nil {
		return nil, err
	}
	if st.Scanned.IsZero() {
		if _, err := x.Scan(ctx, nil, beater(ctx)); err != nil {
			return nil, err
		}
		if st, err = x.Status(ctx); err != nil {
			return nil, err
		}
	}
	files, next, err := x.Query(ctx, IndexQuery{Path: in.Path, Recursive: in.Recursive, Filters: in.Filters,
		Fields: in.Fields, After: in.After, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return &SearchFilesOutput{Files: files, Next: next, Index: st}, nil
}

// SetMetadataInput changes the user metadata of paths of the site.
type SetMetadataInput struct {
	Paths  []string   `json:"paths"`
	Change MetaChange `json:"change"`
}

// MetadataResult is one path's metadata after a change, or why it failed.
type MetadataResult struct {
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata"`
	Tags     []string          `json:"tags"`
	Error    string            `json:"error,omitempty"`
}

// SetMetadataOutput holds one result per path, in order.
type SetMetadataOutput struct {
	Results []MetadataResult `json:"results"`
	// Fields and Tags are every field name and tag the files now carry,
	// for the hub's lists.
	Fields []string `json:"fields"`
	Tags   []string `json:"tags"`
}

// SetMetadata applies a metadata change to each path: in the file's
// extended attributes where the filesystem keeps them, and in the file
// index. A path that fails (missing, outside the root) fails alone.
func (a *Activities) SetMetadata(ctx context.Context, in SetMetadataInput) (*SetMetadataOutput, error) {
	if err := in.Change.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadInput, err)
	}
	x, err := a.Root.Files()
	if err != nil {
		return nil, err
	}
	out := &SetMetadataOutput{Results: []MetadataResult{}, Fields: []string{}, Tags: []string{}}
	fields, tags := map[string]bool{}, map[string]bool{}
	for _, p := range in.Paths {
		m, err := a.setMeta(ctx, x, p, in.Change)
		r := MetadataResult{Path: p, Metadata: map[string]string{}, Tags: []string{}}
		if err != nil {
			r.Error = err.Error()
		} else {
			for k, v := range m.Fields {
				r.Metadata[k] = v
				fields[k] = true
			}
			for _, t := range m.Tags {
				tags[t] = true
			}
			r.Tags = append(r.Tags, m.Tags...)
		}
		out.Results = append(out.Results, r)
	}
	for k := range fields {
		out.Fields = append(out.Fields, k)
	}
	for t := range tags {
		out.Tags = append(out.Tags, t)
	}
	return out, nil
}

func (a *Activities) setMeta(ctx context.Context, x *FileIndex, p string, c MetaChange) (Meta, error) {
	l, err := a.Root.locate(p)
	if err != nil {
		return Meta{}, err
	}
	defer l.close()
	abs := l.path()
	fi, err := os.Lstat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Meta{}, fmt.Errorf("%s does not exist", apiPath(l.rel))
		}
		return Meta{}, err
	}
	w := &walker{root: a.Root}
	it := w.makeItem(l.rel, abs, typeOf(fi.Mode()), fi)
	if it.Type == "" {
		return Meta{}, fmt.Errorf("%s: the hub keeps no metadata on this kind of file", apiPath(l.rel))
	}
	it.atime, it.ctime = fileTimes(fi)
	old, xattrs, err := readXattrMeta(abs)
	if err != nil {
		return Meta{}, err
	}
	if !xattrs || !a.Root.state.xattr || it.Type == TypeSymlink {
		xattrs = false
		if old, err = x.storedMeta(ctx, apiPath(l.rel)); err != nil {
			return Meta{}, err
		}
	}
	m, err := c.apply(old)
	if err != nil {
		return Meta{}, err
	}
	if xattrs {
		if xattrs, err = writeXattrMeta(abs, old, m); err != nil {
			return Meta{}, fmt.Errorf("metadata of %s: %w", apiPath(l.rel), err)
		}
	}
	fault.Point("meta.written")
	row, err := x.row(it, abs)
	if err != nil {
		return Meta{}, err
	}
	row.Meta = m
	return m, x.put(ctx, x.currentScan(ctx), []IndexedFile{row}, false)
}

// storedMeta is the metadata the index holds for p (roots without
// xattrs keep it there only).
func (x *FileIndex) storedMeta(ctx context.Context, p string) (Meta, error) {
	var meta *string
	err := x.db.QueryRowContext(ctx, `SELECT meta FROM files WHERE path = ?`, p).Scan(&meta)
	var m Meta
	if err != nil || meta == nil {
		return m, nil //nolint:nilerr // no row: no metadata yet
	}
	return m, json.Unmarshal([]byte(*meta), &m)
}

// fileMeta is the metadata of the file at abs (API path p) as it travels
// with a send: from its attributes, else from the index.
func (a *Activities) fileMeta(ctx context.Context, abs, p string) Meta {
	if a.Root.state.xattr {
		if m, ok, err := readXattrMeta(abs); err == nil && ok {
			return m
		}
	}
	x, err := a.Root.Files()
	if err != nil {
		return Meta{}
	}
	m, _ := x.storedMeta(ctx, p)
	return m
}

// replaceMeta makes p's metadata exactly m (a received file takes its
// source's), in its attributes or the index, and refreshes its row.
func (a *Activities) replaceMeta(ctx context.Context, p string, m Meta) error {
	x, err := a.Root.Files()
	if err != nil {
		return err
	}
	l, err := a.Root.locate(p)
	if err != nil {
		return err
	}
	defer l.close()
	abs := l.path()
	fi, err := os.Lstat(abs)
	if err != nil {
		return err
	}
	it := (&walker{root: a.Root}).makeItem(l.rel, abs, typeOf(fi.Mode()), fi)
	if it.Type == "" {
		return nil
	}
	it.atime, it.ctime = fileTimes(fi)
	if a.Root.state.xattr && it.Type != TypeSymlink {
		old, ok, err := readXattrMeta(abs)
		if err != nil {
			return err
		}
		if ok {
			if _, err := writeXattrMeta(abs, old, m); err != nil {
				return err
			}
		}
	}
	row, err := x.row(it, abs)
	if err != nil {
		return err
	}
	row.Meta = m
	return x.put(ctx, x.currentScan(ctx), []IndexedFile{row}, false)
}

// sentMeta is the metadata a send carries with p (nil: none).
func (a *Activities) sentMeta(ctx context.Context, p string) *Meta {
	l, err := a.Root.locate(p)
	if err != nil {
		return nil
	}
	defer l.close()
	m := a.fileMeta(ctx, l.path(), apiPath(l.rel))
	if m.empty() {
		return nil
	}
	return &m
}

// receivedPaths are the destination paths a Receive touched (with the
// old paths of moves), for the file index.
func (a *Activities) receivedPaths(in ReceiveInput) []string {
	var out []string
	for _, f := range in.Files {
		out = append(out, a.destPath(in, f.Path))
		if f.OldPath != "" {
			out = append(out, a.destPath(in, f.OldPath))
		}
	}
	return out
}
