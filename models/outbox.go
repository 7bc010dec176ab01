package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Intent states. An intent is written PENDING in the transaction of the
// record change it belongs to; it is deleted once its workflow has it for
// good, or left DELIVERED when its workflow must still claim it (a
// signal: see ClaimIntent).
const (
	IntentPending   = "PENDING"
	IntentDelivered = "DELIVERED"
)

// Intent is a workflow start, signal or cancellation that the hub owes
// Temporal because of a committed record change (the transactional
// outbox; see activities/changes and docs/changes.md).
type Intent struct {
	bun.BaseModel `bun:"table:outbox,alias:o"`

	ID          int64     `bun:"id,pk,autoincrement"`
	Kind        string    `bun:"kind"`
	RefID       int64     `bun:"ref_id"` // the record it is about
	Payload     string    `bun:"payload"`
	State       string    `bun:"state"`
	Attempts    int       `bun:"attempts"`
	LastError   string    `bun:"last_error"`
	Created     time.Time `bun:"created"`
	Updated     time.Time `bun:"updated"`
	NextAttempt time.Time `bun:"next_attempt"`
}

// AddIntent stores a PENDING intent, due at notBefore for the reconciler.
func AddIntent(ctx context.Context, db bun.IDB, in *Intent, notBefore time.Time) error {
	now := time.Now().UTC()
	in.State, in.Created, in.Updated, in.NextAttempt = IntentPending, now, now, notBefore.UTC()
	_, err := db.NewInsert().Model(in).Exec(ctx)
	return err
}

// DueIntents lists, oldest first from after the id after, the PENDING
// intents due by now and the DELIVERED ones nobody claimed since
// staleBefore.
func DueIntents(ctx context.Context, db bun.IDB, now, staleBefore time.Time, after int64, limit int) ([]Intent, error) {
	var out []Intent
	err := db.NewSelect().Model(&out).Where("id > ?", after).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("state = ? AND next_attempt <= ?", IntentPending, now.UTC()).
				WhereOr("state = ? AND updated <= ?", IntentDelivered, staleBefore.UTC())
		}).
		Order("id").Limit(int64(limit)).Scan(ctx)
	return out, err
}

// IntentsOf lists the intents about one record, oldest first.
func IntentsOf(ctx context.Context, db bun.IDB, kind string, refID int64) ([]Intent, error) {
	var out []Intent
	err := db.NewSelect().Model(&out).Where("kind = ? AND ref_id = ?", kind, refID).Order("id").Scan(ctx)
	return out, err
}

// MarkIntentDelivered records that the workflow has the intent, which it
// must still claim.
func MarkIntentDelivered(ctx context.Context, db bun.IDB, id int64) error {
	_, err := db.NewUpdate().Model((*Intent)(nil)).Set("state = ?", IntentDelivered).
		Set("updated = ?", time.Now().UTC()).Where("id = ?", id).Exec(ctx)
	return err
}

// RetryIntent records a failed delivery attempt and when to try again.
func RetryIntent(ctx context.Context, db bun.IDB, id int64, cause string, next time.Time) error {
	_, err := db.NewUpdate().Model((*Intent)(nil)).Set("state = ?", IntentPending).
		Set("attempts = attempts + 1").Set("last_error = ?", cause).
		Set("updated = ?", time.Now().UTC()).Set("next_attempt = ?", next.UTC()).
		Where("id = ?", id).Exec(ctx)
	return err
}

// DeleteIntent removes intent id; claimed tells whether it was still
// there, so that of two callers exactly one claims it.
func DeleteIntent(ctx context.Context, db bun.IDB, id int64) (claimed bool, err error) {
	res, err := db.NewDelete().Model((*Intent)(nil)).Where("id = ?", id).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
