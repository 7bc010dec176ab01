package models

import (
	"context"
	"slices"

	"github.com/uptrace/bun"
)

// JobKey names a job's row as it is now: its id and its version
// (jobs.version, which a trigger moves on every update of the row; job
// ids are never reused), so that what was made of the row (a rendered
// job) can be kept and told stale by its key alone.
type JobKey struct {
	ID      int64 `bun:"id"`
	Version int64 `bun:"version"`
}

// JobKeys is window w (not 0) of the jobs matching f, newest first, as
// keys: the indexes of the list's orders hold the version too, so this
// reads index entries and no row (migration 20261126040000), a tenth of
// the cost of reading the rows.
func JobKeys(ctx context.Context, db bun.IDB, f JobFilter, w Window) ([]JobKey, error) {
	var keys []JobKey
	q := f.apply(db, db.NewSelect().TableExpr("jobs AS j").Column("j.id", "j.version"))
	if err := windowIDs(q, w, true, "j.created", "j.id").Scan(ctx, &keys); err != nil {
		return nil, dbErr(err)
	}
	if w.FromEnd {
		slices.Reverse(keys)
	}
	return keys, nil
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
