package site

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver: pure Go, no bun (site workers have no hub database)

	"github.com/thehub/hub/internal/fault"
)

// The file index is a site's catalogue of its files, for search: one row
// per file, folder and symlink (path, name, type, size, times, migration
// state, user metadata and tags) in an embedded sqlite database,
// <root>/.hub/files.db, beside the state records. It is not the state
// index (index.go), which holds migration records where xattrs are
// missing. Where the root has user xattrs it is a cache of what a walk
// sees, rebuilt at will; where it has none it also holds the only copy of
// the files' user metadata and tags (by path), so it must be kept: a
// rebuilt index has lost them.
//
// It is filled by a scan (ScanFileIndex, a parallel Walk of the root that
// an operator schedules, and that the first search of a site runs) and
// kept up to date between scans by the steps that change files, which
// call FileIndex.Refresh with the paths they touched. Freshness is
// described in docs/search-analytics.md.
const fileIndexName = "files.db"

const fileIndexSchema = `
CREATE TABLE IF NOT EXISTS files (
	path   TEXT PRIMARY KEY,
	parent TEXT NOT NULL,
	name   TEXT NOT NULL,
	type   TEXT NOT NULL,
	size   INTEGER NOT NULL,
	mtime  INTEGER NOT NULL,
	atime  INTEGER NOT NULL,
	ctime  INTEGER NOT NULL,
	state  TEXT NOT NULL,
	meta   TEXT,
	scan   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_name ON files (name);
CREATE INDEX IF NOT EXISTS files_parent ON files (parent, name);
CREATE TABLE IF NOT EXISTS file_tags (
	path TEXT NOT NULL,
	tag  TEXT NOT NULL,
	PRIMARY KEY (path, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS file_tags_tag ON file_tags (tag, path);
CREATE TABLE IF NOT EXISTS file_meta (
	path  TEXT NOT NULL,
	key   TEXT NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY (path, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS file_meta_kv ON file_meta (key, value, path);
CREATE TABLE IF NOT EXISTS scans (
	id       INTEGER PRIMARY KEY,
	started  INTEGER NOT NULL,
	finished INTEGER,
	entries  INTEGER NOT NULL DEFAULT 0
);
`

// FileIndex is the file index of one root.
type FileIndex struct {
	root *Root
	db   *sql.DB
	// scanMu keeps one scan at a time in this process; a scan of another
	// process is told apart by its scans row.
	scanMu sync.Mutex
}

var fileIndexes sync.Map // root dir -> *fileIndexOnce

type fileIndexOnce struct {
	once sync.Once
	ix   *FileIndex
	err  error
}

// Files opens (once per process) the root's file index.
func (r *Root) Files() (*FileIndex, error) {
	v, _ := fileIndexes.LoadOrStore(r.dir, &fileIndexOnce{})
	o := v.(*fileIndexOnce)
	o.once.Do(func() { o.ix, o.err = OpenFileIndex(r, filepath.Join(r.dir, hubDir, fileIndexName)) })
	return o.ix, o.err
}

// OpenFileIndex opens the file index of root kept in file (created if
// missing). Most callers use Root.Files.
func OpenFileIndex(root *Root, file string) (*FileIndex, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		return nil, fmt.Errorf("file index: %w", err)
	}
	// WAL lets searches read while a scan writes; one connection per
	// process avoids SQLITE_BUSY storms between this process's writers,
	// and the busy timeout covers other nodes' processes.
	dsn := "file:" + file + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(30000)&_pragma=synchronous(NORMAL)" +
		"&_pragma=cache_size(-65536)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("file index: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(fileIndexSchema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("file index %s: %w", file, err)
	}
	return &FileIndex{root: root, db: db}, nil
}

// Close closes the database (tests; workers keep it open).
func (x *FileIndex) Close() error { return x.db.Close() }

// IndexedFile is one row of the file index.
type IndexedFile struct {
	Path  string `json:"path"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"` // Unix ns
	Atime int64  `json:"atime"`
	Ctime int64  `json:"ctime"`
	State State  `json:"state"`
	Meta  Meta   `json:"meta"`
}

func splitAPIPath(p string) (parent, name string) {
	parent, name = path.Split(p)
	if parent != "/" {
		parent = strings.TrimSuffix(parent, "/")
	}
	return parent, name
}

// put writes rows in one transaction. Rows a walk saw (walked) carry
// the metadata read from the files' xattrs: where the index holds the
// only copy (roots without xattrs, and symlinks everywhere, which take no
// user xattrs) the stored metadata of existing rows is kept instead.
// Other rows (a metadata change) carry the metadata to store.
//
// Each row is stamped with the newest scan begun, not the scan (or the
// step) that writes it, and its stamp never goes down: the sweep of scan
// S removes the rows below its folders stamped lower than S, so exactly
// those no walk, step or metadata change wrote since S began. Scans of
// other nodes run beside S (scanMu is per process): an older scan that
// reaches a file after S did, or sees a file made after S read its
// folder, must not leave a row S then sweeps, with the only copy of the
// file's metadata on a root without xattrs (TestTwoScansKeepMetadata).
// The write lock taken at BEGIN (_txlock=immediate) keeps a scan from
// beginning until the rows are in.
func (x *FileIndex) put(ctx context.Context, scan int64, rows []IndexedFile, walked bool) error {
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var newest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(id) FROM scans`).Scan(&newest); err != nil {
		return err
	}
	scan = max(scan, newest.Int64)
	up := `INSERT INTO files (path, parent, name, type, size, mtime, atime, ctime, state, meta, scan)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (path) DO UPDATE SET type = excluded.type, size = excluded.size, mtime = excluded.mtime,
		atime = excluded.atime, ctime = excluded.ctime, state = excluded.state,
		scan = MAX(files.scan, excluded.scan)`
	stmts := map[bool]*sql.Stmt{} // by whether the stored metadata is kept
	for keep, q := range map[bool]string{true: up, false: up + `, meta = excluded.meta`} {
		if stmts[keep], err = tx.PrepareContext(ctx, q); err != nil {
			return err
		}
		defer stmts[keep].Close()
	}
	for _, f := range rows {
		keepMeta := walked && (!x.root.state.xattr || f.Type == TypeSymlink)
		stmt := stmts[keepMeta]
		parent, name := splitAPIPath(f.Path)
		var meta any
		if !f.Meta.empty() {
			b, _ := json.Marshal(f.Meta)
			meta = string(b)
		}
		if _, err := stmt.ExecContext(ctx, f.Path, parent, name, f.Type, f.Size, f.Mtime, f.Atime, f.Ctime, string(f.State), meta, scan); err != nil {
			return err
		}
		if !keepMeta {
			if err := setMetaRows(ctx, tx, f.Path, f.Meta); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// setMetaRows makes the searchable metadata rows of p match m.
func setMetaRows(ctx context.Context, tx *sql.Tx, p string, m Meta) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM file_tags WHERE path = ?`, p); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM file_meta WHERE path = ?`, p); err != nil {
		return err
	}
	for _, t := range m.Tags {
		if _, err := tx.ExecContext(ctx, `INSERT INTO file_tags (path, tag) VALUES (?, ?)`, p, t); err != nil {
			return err
		}
	}
	for k, v := range m.Fields {
		if _, err := tx.ExecContext(ctx, `INSERT INTO file_meta (path, key, value) VALUES (?, ?, ?)`, p, k, v); err != nil {
			return err
		}
	}
	return nil
}

// removeTree drops p and everything below it.
func (x *FileIndex) removeTree(ctx context.Context, tx *sql.Tx, p string) error {
	lo, hi := subtreeRange(p)
	for _, q := range []string{
		`DELETE FROM files WHERE path = ? OR (path > ? AND path < ?)`,
		`DELETE FROM file_tags WHERE path = ? OR (path > ? AND path < ?)`,
		`DELETE FROM file_meta WHERE path = ? OR (path > ? AND path < ?)`,
	} {
		if _, err := tx.ExecContext(ctx, q, p, lo, hi); err != nil {
			return err
		}
	}
	return nil
}

// subtreeRange bounds the paths strictly below folder p: they sort
// between p+"/" and p+"0" ("0" follows "/").
func subtreeRange(p string) (lo, hi string) {
	if p == "/" {
		return "/", "0"
	}
	return p + "/", p + "0"
}

// describe reads one entry as the index keeps it; the metadata comes from
// xattrs where the root has them.
func (x *FileIndex) row(it item, abs string) (IndexedFile, error) {
	f := IndexedFile{Path: it.Path, Type: it.Type, Size: it.Size, Mtime: it.Mtime.UnixNano(),
		Atime: it.atime, Ctime: it.ctime, State: it.State}
	_, f.Name = splitAPIPath(it.Path)
	if f.Atime == 0 {
		f.Atime, f.Ctime = f.Mtime, f.Mtime
	}
	if x.root.state.xattr && it.Type != TypeSymlink {
		m, _, err := readXattrMeta(abs)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return f, err
		}
		f.Meta = m
	}
	return f, nil
}

// Refresh brings the rows of the given paths (and, for folders, what is
// below them when deep) up to date with the disk, in one transaction: a
// path that is gone is dropped with its subtree. Steps call it with the
// paths they changed.
func (x *FileIndex) Refresh(ctx context.Context, paths []string, deep bool) error {
	var rows []IndexedFile
	var gone, folders []string
	for _, p := range paths {
		rel, err := cleanRel(p)
		if err != nil {
			continue
		}
		row, ok, err := x.describeRow(apiPath(rel))
		switch {
		case err != nil:
			return err
		case !ok:
			gone = append(gone, apiPath(rel))
		case row.Type == TypeDirectory && deep:
			folders = append(folders, row.Path)
		default:
			rows = append(rows, row)
		}
	}
	if len(gone) > 0 {
		tx, err := x.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		for _, p := range gone {
			if err := x.removeTree(ctx, tx, p); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	if len(rows) > 0 {
		if err := x.put(ctx, x.currentScan(ctx), rows, true); err != nil {
			return err
		}
	}
	if len(folders) > 0 {
		_, err := x.scan(ctx, folders, nil)
		return err
	}
	return nil
}

// describeRow reads p from the disk as the index keeps it; ok is false
// when p is gone (or is a kind of file the hub does not handle).
func (x *FileIndex) describeRow(p string) (IndexedFile, bool, error) {
	l, err := x.root.locate(p)
	if err != nil {
		return IndexedFile{}, false, nil //nolint:nilerr // unreachable now: gone for the index
	}
	defer l.close()
	fi, err := os.Lstat(l.path())
	if err != nil {
		return IndexedFile{}, false, nil //nolint:nilerr // gone
	}
	typ := typeOf(fi.Mode())
	if typ == "" {
		return IndexedFile{}, false, nil
	}
	it := (&walker{root: x.root}).makeItem(l.rel, l.path(), typ, fi)
	if typ == TypeFile {
		it.atime, it.ctime = fileTimes(fi)
	}
	row, err := x.row(it, l.path())
	return row, err == nil, err
}

// indexSteps refreshes the rows of the paths a step ran on, when the
// site has a file index (a site nobody searches pays nothing). The index
// is a cache the next scan repairs, so a failure here fails no step.
func (r *Root) indexSteps(ctx context.Context, jobs []*job) {
	paths := make([]string, len(jobs))
	for i, j := range jobs {
		paths[i] = j.in
	}
	r.indexPaths(ctx, paths)
}

// indexPaths is indexSteps for a list of API paths.
func (r *Root) indexPaths(ctx context.Context, paths []string) {
	if ctx.Err() != nil || len(paths) == 0 {
		return
	}
	if _, err := os.Stat(filepath.Join(r.dir, hubDir, fileIndexName)); err != nil {
		return
	}
	x, err := r.Files()
	if err != nil {
		return
	}
	_ = x.Refresh(ctx, paths, true)
}

// drop removes p and its subtree.
func (x *FileIndex) drop(ctx context.Context, p string) error {
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := x.removeTree(ctx, tx, p); err != nil {
		return err
	}
	return tx.Commit()
}

// currentScan is the id rows written between scans carry: the last scan's,
// so the next scan (a higher id) still sweeps them if they are gone.
func (x *FileIndex) currentScan(ctx context.Context) int64 {
	var id sql.NullInt64
	_ = x.db.QueryRowContext(ctx, `SELECT MAX(id) FROM scans`).Scan(&id)
	return id.Int64
}

// IndexStatus says how fresh the index is.
type IndexStatus struct {
	// Scanned is the end of the last complete scan (zero: never).
	Scanned time.Time `json:"scanned"`
	// Entries is the number of rows.
	Entries int64 `json:"entries"`
}

// Status reports the last complete scan and the row count.
func (x *FileIndex) Status(ctx context.Context) (IndexStatus, error) {
	var s IndexStatus
	var fin sql.NullInt64
	err := x.db.QueryRowContext(ctx, `SELECT MAX(finished) FROM scans WHERE finished IS NOT NULL`).Scan(&fin)
	if err != nil {
		return s, err
	}
	if fin.Valid {
		s.Scanned = time.Unix(0, fin.Int64).UTC()
	}
	err = x.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM files`).Scan(&s.Entries)
	return s, err
}

// maxIndexFields caps the metadata keys and tags a scan reports.
const maxIndexFields = 1000

// Fields returns the metadata keys and tags the index holds (up to
// maxIndexFields each, by name): what files carry, set through the API or
// arrived with them (send, a restore, setfattr).
func (x *FileIndex) Fields(ctx context.Context) (keys, tags []string, err error) {
	for _, q := range []struct {
		sql string
		out *[]string
	}{
		{`SELECT DISTINCT key FROM file_meta ORDER BY key LIMIT ?`, &keys},
		{`SELECT DISTINCT tag FROM file_tags ORDER BY tag LIMIT ?`, &tags},
	} {
		rows, err := x.db.QueryContext(ctx, q.sql, maxIndexFields)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return nil, nil, err
			}
			*q.out = append(*q.out, v)
		}
		if err := rows.Close(); err != nil {
			return nil, nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	return keys, tags, nil
}

// scanBatch is the rows written per transaction during a scan.
const scanBatch = 5000

// Scan walks the given folders (all of the root when none) with the
// parallel walker and rewrites their rows; rows of entries no longer on
// disk are removed at the end. progress hears the entries seen so far.
func (x *FileIndex) Scan(ctx context.Context, paths []string, progress func(n int64)) (int64, error) {
	if len(paths) == 0 {
		paths = []string{"/"}
	}
	return x.scan(ctx, paths, progress)
}

func (x *FileIndex) scan(ctx context.Context, paths []string, progress func(n int64)) (int64, error) {
	x.scanMu.Lock()
	defer x.scanMu.Unlock()
	started := time.Now().UnixNano()
	res, err := x.db.ExecContext(ctx, `INSERT INTO scans (started) VALUES (?)`, started)
	if err != nil {
		return 0, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	f, err := newFilter(WalkOptions{})
	if err != nil {
		return 0, err
	}
	var n int64
	var pending []IndexedFile
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		err := x.put(ctx, id, pending, true)
		fault.Point("fileindex.batch")
		pending = pending[:0]
		if progress != nil {
			progress(n)
		}
		return err
	}
	var rels []string
	for _, p := range paths {
		rel, err := cleanRel(p)
		if err != nil {
			return 0, err
		}
		rels = append(rels, rel)
	}
	err = walkTree(ctx, x.root, paths, walkConfig{filter: f, missingOK: true}, func(items []item) error {
		for _, it := range items {
			// Only attributes are read by this name, never data, and
			// without following a final symlink.
			abs := filepath.Join(x.root.dir, filepath.FromSlash(strings.TrimPrefix(it.Path, "/")))
			row, err := x.row(it, abs)
			if err != nil {
				return err
			}
			if marks := x.root.state.marks; marks != nil && it.rec != nil && it.rec.fromXattr {
				if err := marks.mark(abs); err != nil {
					return err
				}
			}
			pending = append(pending, row)
			n++
			if len(pending) >= scanBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return n, fmt.Errorf("scan the file index: %w", err)
	}
	whole := len(rels) == 1 && rels[0] == ""
	if err := x.sweep(ctx, id, rels, n); err != nil {
		return n, err
	}
	if marks := x.root.state.marks; whole && marks != nil {
		// Every folder where this walk found a record is marked, and the
		// site marks a folder before writing a record in it.
		if err := marks.setComplete(); err != nil {
			return n, fmt.Errorf("scan the file index: %w", err)
		}
	}
	return n, nil
}

// sweep ends scan id of rels (clean relative paths), which saw n
// entries: it removes the rows below them that nothing wrote since the
// scan began (gone since the last scan) and records the scan, in one
// transaction.
func (x *FileIndex) sweep(ctx context.Context, id int64, rels []string, n int64) error {
	if !x.root.state.xattr {
		if err := x.keepPresent(ctx, id, rels); err != nil {
			return err
		}
	}
	tx, err := x.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, rel := range topLevel(rels) {
		p := apiPath(rel)
		lo, hi := subtreeRange(p)
		const stale = `(SELECT path FROM files WHERE path > ? AND path < ? AND scan < ?)`
		for _, q := range []string{
			`DELETE FROM file_tags WHERE path IN ` + stale,
			`DELETE FROM file_meta WHERE path IN ` + stale,
			`DELETE FROM files WHERE path > ? AND path < ? AND scan < ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, lo, hi, id); err != nil {
				return err
			}
		}
	}
	if len(rels) == 1 && rels[0] == "" {
		_, err = tx.ExecContext(ctx, `UPDATE scans SET finished = ?, entries = ? WHERE id = ?`, time.Now().UnixNano(), n, id)
	} else {
		// A partial scan does not make the whole index fresh.
		_, err = tx.ExecContext(ctx, `UPDATE scans SET entries = ? WHERE id = ?`, n, id)
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

// keepPresent looks again, before the sweep of scan id, at the rows below
// rels it would remove that hold metadata, which on a root without xattrs
// lives only here: a file the walk missed while it was away from its path
// (moved away and back, an editor's save by rename) but that is there
// now keeps its row and metadata. A file away both when the walk read
// its folder and now loses them, as a deleted file does.
func (x *FileIndex) keepPresent(ctx context.Context, id int64, rels []string) error {
	var stale []string
	for _, rel := range topLevel(rels) {
		lo, hi := subtreeRange(apiPath(rel))
		rows, err := x.db.QueryContext(ctx,
			`SELECT path FROM files WHERE path > ? AND path < ? AND scan < ? AND meta IS NOT NULL`, lo, hi, id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return err
			}
			stale = append(stale, p)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	var back []IndexedFile
	for _, p := range stale {
		row, ok, err := x.describeRow(p)
		if err != nil {
			return err
		}
		if ok {
			back = append(back, row)
		}
		if len(back) >= scanBatch {
			if err := x.put(ctx, id, back, true); err != nil {
				return err
			}
			back = back[:0]
		}
	}
	if len(back) == 0 {
		return nil
	}
	return x.put(ctx, id, back, true)
}
