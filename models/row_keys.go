package models

import (
	"context"
	"slices"

	"github.com/uptrace/bun"
)

// RowKey names a job's or a task's row as it is now: its id and its
// version (jobs.version, tasks.version: a trigger moves it on every
// update of the row; ids are never reused), so that what was made of the
// row (its rendering in a list) can be kept and told stale by its key
// alone.
type RowKey struct {
	ID      int64 `bun:"id"`
	Version int64 `bun:"version"`
}

// JobKeys is window w (not 0) of the jobs matching f, newest first, as
// keys. They come from an index in the list's order where one fits the
// filter ((created, id, version) for every job, (state, created, id,
// version) for one state; migration 20261126040000), so a page skips
// index entries, never whole rows, reads no row, and no filter sorts the
// jobs it matches.
//
// A site named in f (Site) is matched two ways, by the id of the site
// called so now and by the name a job was created with: each way is read
// from its own index ((site_id, created, id, version) and (site, created,
// id, version); migration 20261127000000), the first Offset+Limit keys of
// each, and the two merged, so that a small site's page does not read the
// whole list to find its jobs among everyone's.
func JobKeys(ctx context.Context, db bun.IDB, f JobFilter, w Window) ([]RowKey, error) {
	keys := func(f JobFilter) *bun.SelectQuery {
		return f.apply(db, db.NewSelect().TableExpr("jobs AS j").Column("j.id", "j.version"))
	}
	if f.Site == "" {
		return rowKeys(ctx, keys(f), w, "j")
	}
	rest := f.butSite()
	top := Window{Limit: w.Offset + w.Limit, FromEnd: w.FromEnd}
	half := func(cond string, args ...any) *bun.SelectQuery {
		return windowIDs(keys(rest).Column("j.created").Where(cond, args...), top, true, "j.created", "j.id")
	}
	now, args := f.siteNowCond("j")
	both := db.NewSelect().TableExpr("(SELECT * FROM (?) AS n UNION SELECT * FROM (?) AS o) AS j", half(now, args...), half("j.site = ?", f.Site)).
		Column("j.id", "j.version")
	return rowKeys(ctx, both, w, "j")
}

// TaskKeys is window w (not 0) of the tasks matching f, newest first, as
// keys, from the index of the list's order alone (migration
// 20261126050000).
func TaskKeys(ctx context.Context, db bun.IDB, f TaskFilter, w Window) ([]RowKey, error) {
	return rowKeys(ctx, f.apply(db.NewSelect().TableExpr("tasks AS t").Column("t.id", "t.version")), w, "t")
}

// rowKeys reads window w of q, a select of the ids and versions of a
// table aliased alias, in the lists' order (newest first).
func rowKeys(ctx context.Context, q *bun.SelectQuery, w Window, alias string) ([]RowKey, error) {
	keys, err := scanKeys(ctx, windowIDs(q, w, true, alias+".created", alias+".id"))
	if w.FromEnd {
		slices.Reverse(keys)
	}
	return keys, err
}

// scanKeys reads the keys q selects (id, version), scanned by position:
// two integers a row, for which bun's scanning by column name is a fifth
// of the read (a throwaway probe, 100 keys of a job's stats on sqlite:
// 59–62 µs through bun's Scan, 51 µs so).
func scanKeys(ctx context.Context, q *bun.SelectQuery) ([]RowKey, error) {
	rows, err := q.Rows(ctx)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	keys := make([]RowKey, 0, 100)
	for rows.Next() {
		var k RowKey
		if err := rows.Scan(&k.ID, &k.Version); err != nil {
			return nil, dbErr(err)
		}
		keys = append(keys, k)
	}
	return keys, dbErr(rows.Err())
}

// JobsByID reads the jobs of ids (those that exist), in no order.
func JobsByID(ctx context.Context, db bun.IDB, ids []int64) ([]Job, error) {
	var jobs []Job
	if len(ids) == 0 {
		return jobs, nil
	}
	// j.* for the version, which bun leaves out of a model's columns (scanonly).
	return jobs, dbErr(db.NewSelect().Model(&jobs).ColumnExpr("j.*").Where("j.id IN (?)", bun.In(ids)).Scan(ctx))
}

// TasksByID reads the tasks of ids (those that exist), in no order.
func TasksByID(ctx context.Context, db bun.IDB, ids []int64) ([]TaskRow, error) {
	var tasks []TaskRow
	if len(ids) == 0 {
		return tasks, nil
	}
	return tasks, dbErr(tasksSelect(db, &tasks).Where("t.id IN (?)", bun.In(ids)).Scan(ctx))
}
