package models

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/uptrace/bun"
)

// Kinds of answers a site gave that the hub keeps for reuse (cache_ttl).
const (
	AnswerAnalytics = "analytics" // GET /analytics/: what fills a folder
	AnswerListing   = "listing"   // GET /file/ and /spaces/{id}/files/: a folder's page
)

// SiteAnswer is the latest answer a site gave to one question: an
// analytics summary of a folder, or a page of a folder's listing. One row
// per (kind, site, path, variant), replaced by each new answer, so the
// table holds at most one row per question asked; the maintenance pass
// may drop old rows (PruneSiteAnswers). Variant tells apart answers to
// the same path that differ in what was asked (a listing's page, say).
type SiteAnswer struct {
	bun.BaseModel `bun:"table:site_answers,alias:sa"`

	ID         int64     `bun:"id,pk,autoincrement"`
	Kind       string    `bun:"kind"`
	Site       string    `bun:"site"`
	Path       string    `bun:"path"`
	Variant    string    `bun:"variant"`
	ComputedAt time.Time `bun:"computed_at"`
	Body       string    `bun:"body"` // the answer as JSON
}

// PutSiteAnswer records a's answer, replacing the previous answer to the
// same question; an answer older than the one kept is ignored (a slow
// run finishing after a newer one).
func PutSiteAnswer(ctx context.Context, db bun.IDB, a *SiteAnswer) error {
	a.ComputedAt = a.ComputedAt.UTC()
	_, err := db.NewInsert().Model(a).On("CONFLICT (kind, site, path, variant) DO UPDATE").
		Set("computed_at = EXCLUDED.computed_at, body = EXCLUDED.body").
		Where("sa.computed_at <= EXCLUDED.computed_at").Exec(ctx)
	return dbErr(err)
}

// FreshSiteAnswer is the recorded answer to a question computed at or
// after since; ok is false when there is none.
func FreshSiteAnswer(ctx context.Context, db bun.IDB, kind, site, path, variant string, since time.Time) (a SiteAnswer, ok bool, err error) {
	err = db.NewSelect().Model(&a).Where("kind = ? AND site = ? AND path = ? AND variant = ?", kind, site, path, variant).
		Where("computed_at >= ?", since.UTC()).Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false, nil
	}
	return a, err == nil, dbErr(err)
}

// SiteAnswersKept is how long the maintenance pass keeps an answer.
const SiteAnswersKept = 7 * 24 * time.Hour

// PruneSiteAnswers removes answers computed before cutoff.
func PruneSiteAnswers(ctx context.Context, db bun.IDB, cutoff time.Time) (int64, error) {
	res, err := db.NewDelete().Model((*SiteAnswer)(nil)).Where("computed_at < ?", cutoff.UTC()).Exec(ctx)
	if err != nil {
		return 0, dbErr(err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
