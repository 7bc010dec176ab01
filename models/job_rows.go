package models

import (
	"context"
	"sync"

	"github.com/uptrace/bun"
)

// JobRows keeps the rows of the jobs a list showed, each as of its
// version (jobs.version, which a trigger moves on every update of the
// row; job ids are never reused). A page reads its jobs' ids and versions
// first, which costs a tenth of reading their rows, and then only the
// rows it does not hold at that version: a list whose jobs did not change
// reads no row twice. Safe for concurrent use; the zero value is ready.
type JobRows struct {
	mu   sync.Mutex
	rows map[int64]Job
}

// jobRowsMax bounds the rows kept (about 1 KiB each): a tenth of them go
// when it is reached.
const jobRowsMax = 10_000

// Page is JobsPage through the kept rows: window w of the jobs matching f,
// newest first. The rows it returns may be shared with other pages and
// must not be changed. A job updated between the read of its version and
// the read of its row is shown as read (newer); one deleted meanwhile is
// left out.
func (c *JobRows) Page(ctx context.Context, db bun.IDB, f JobFilter, w Window) ([]Job, error) {
	if w.Limit == 0 {
		var all []Job
		return all, dbErr(JobsQuery(db, &all, f).Scan(ctx))
	}
	var keys []struct {
		ID      int64 `bun:"id"`
		Version int64 `bun:"version"`
	}
	ids := f.apply(db, db.NewSelect().TableExpr("jobs AS j").Column("j.id"))
	err := db.NewSelect().TableExpr("jobs AS j").Column("j.id", "j.version").
		Where("j.id IN (?)", windowIDs(ids, w, true, "j.created", "j.id")).
		Order("j.created DESC", "j.id DESC").Scan(ctx, &keys)
	if err != nil {
		return nil, dbErr(err)
	}
	out := make([]Job, len(keys))
	var missing []int64
	c.mu.Lock()
	for i, k := range keys {
		if r, ok := c.rows[k.ID]; ok && r.Version == k.Version {
			out[i] = r
		} else {
			missing = append(missing, k.ID)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	var fresh []Job
	if err := db.NewSelect().Model(&fresh).Where("j.id IN (?)", bun.In(missing)).Scan(ctx); err != nil {
		return nil, dbErr(err)
	}
	byID := make(map[int64]Job, len(fresh))
	for _, r := range fresh {
		byID[r.ID] = r
	}
	c.keep(fresh)
	page := out[:0]
	for i, k := range keys {
		if out[i].ID == 0 {
			r, ok := byID[k.ID]
			if !ok {
				continue // deleted since its id was read
			}
			out[i] = r
		}
		page = append(page, out[i])
	}
	return page, nil
}

// keep adds rows, making room first when the bound is reached.
func (c *JobRows) keep(rows []Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.rows = make(map[int64]Job)
	}
	if len(c.rows)+len(rows) > jobRowsMax {
		for id := range c.rows { // in no particular order
			delete(c.rows, id)
			if len(c.rows) <= jobRowsMax*9/10-len(rows) {
				break
			}
		}
	}
	for _, r := range rows {
		c.rows[r.ID] = r
	}
}
