// Package changes is the hub's one way to change a record and tell its
// workflow. A change and the workflow start, signal or cancellation it
// owes (an intent) are committed in one transaction (a transactional
// outbox); the intent is delivered right after the commit and, whatever
// happens then (Temporal down, the hub killed), by the reconciling
// OutboxWorkflow later. Delivery is idempotent: starts use fixed workflow
// IDs, signals carry the intent's id and their workflow claims it once.
// An intent that can never be delivered marks its record failed.
// docs/changes.md has the reasoning.
//
// It is also the only place below the API that calls the Temporal client
// (reads.go), so that a schedule, a policy or a CLI changes state exactly
// as an HTTP request does.
package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/internal/fault"
	"github.com/thehub/hub/models"
)

// Service changes records and delivers what they owe to Temporal.
type Service struct {
	DB       *bun.DB
	Temporal client.Client
	Log      *slog.Logger
	// Progress, when set, hears how many intents a delivery pass has
	// handled so far (the reconciler's activity heartbeats with it).
	Progress func(handled int)
}

// Tunables, each with the reason for its value.
var (
	// ReconcileDelay: the reconciler leaves a new intent alone this long,
	// since the request that wrote it delivers it at once.
	ReconcileDelay = 30 * time.Second
	// UnclaimedAfter: a delivered signal that no workflow claimed in this
	// time was lost with its workflow (terminated by hand, say): it is
	// delivered again.
	UnclaimedAfter = 10 * time.Minute
	// GiveUpAfter: an intent Temporal has refused for this long, for
	// reasons that looked passing, fails its record.
	GiveUpAfter = 24 * time.Hour
	// deliverTimeout bounds one delivery attempt.
	deliverTimeout = 10 * time.Second
)

// Tx is the transaction of a record change and the intents it owes.
type Tx struct {
	bun.Tx
	owed []*models.Intent
}

// Owe records, in the transaction, that kind must be delivered about the
// record refID, with payload (JSON).
func (t *Tx) Owe(ctx context.Context, kind string, refID int64, payload any) error {
	if _, ok := kinds[kind]; !ok {
		return fmt.Errorf("unknown intent kind %q", kind)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	in := &models.Intent{Kind: kind, RefID: refID, Payload: string(raw)}
	if err := models.AddIntent(ctx, t.Tx, in, time.Now().Add(ReconcileDelay)); err != nil {
		return err
	}
	t.owed = append(t.owed, in)
	return nil
}

// Commit runs change in one transaction, then delivers the intents it
// owes. Once the transaction commits, Commit succeeds: an intent that
// cannot be delivered now is the reconciler's, or, if it never can be,
// fails its record.
func (s *Service) Commit(ctx context.Context, change func(ctx context.Context, tx *Tx) error) error {
	var owed []*models.Intent
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, btx bun.Tx) error {
		tx := &Tx{Tx: btx}
		if err := change(ctx, tx); err != nil {
			return err
		}
		owed = tx.owed
		return nil
	})
	if err != nil {
		return err
	}
	fault.Point("changes.committed")
	// The change is committed: deliver even if the client goes away.
	ctx = context.WithoutCancel(ctx)
	for _, in := range owed {
		s.deliver(ctx, in)
	}
	return nil
}

// DeliverDue delivers every intent the reconciler is due to: those the
// request that wrote them could not deliver, and signals no workflow
// claimed. It returns how many it handled.
func (s *Service) DeliverDue(ctx context.Context) (int, error) {
	return s.DeliverAsOf(ctx, time.Now())
}

// DeliverAsOf is DeliverDue as if it were now (tests deliver early).
func (s *Service) DeliverAsOf(ctx context.Context, now time.Time) (int, error) {
	n, after := 0, int64(0)
	for {
		due, err := models.DueIntents(ctx, s.DB, now, now.Add(-UnclaimedAfter), after, 200)
		if err != nil || len(due) == 0 {
			return n, err
		}
		for i := range due {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			s.deliver(ctx, &due[i])
			after = due[i].ID
			n++
		}
		if s.Progress != nil {
			s.Progress(n)
		}
	}
}

// errPermanent marks a delivery that can never succeed.
var errPermanent = errors.New("cannot be delivered")

// permanent tells whether err means Temporal will never accept the
// intent as it is: anything else (unavailable, timeouts, a previous run
// still closing) is worth another try.
func permanent(err error) bool {
	var inv *serviceerror.InvalidArgument
	var ns *serviceerror.NamespaceNotFound
	var denied *serviceerror.PermissionDenied
	return errors.Is(err, errPermanent) || errors.As(err, &inv) || errors.As(err, &ns) || errors.As(err, &denied)
}

// deliver makes one attempt at in, and records its outcome.
func (s *Service) deliver(ctx context.Context, in *models.Intent) {
	k := kinds[in.Kind]
	dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	err := k.deliver(dctx, s, in)
	cancel()
	fault.Point("changes.delivered")
	log := s.Log.With("intent", in.ID, "kind", in.Kind, "ref", in.RefID)
	switch {
	case err == nil && k.claimed:
		err = models.MarkIntentDelivered(ctx, s.DB, in.ID)
	case err == nil:
		_, err = models.DeleteIntent(ctx, s.DB, in.ID)
	case permanent(err) || time.Since(in.Created) > GiveUpAfter:
		log.Error("change cannot reach its workflow; its record is marked failed", "error", err)
		if ferr := k.fail(ctx, s, in, err); ferr != nil {
			log.Error("record not marked failed; will try again", "error", ferr)
			err = models.RetryIntent(ctx, s.DB, in.ID, err.Error(), time.Now().Add(ReconcileDelay))
			break
		}
		_, err = models.DeleteIntent(ctx, s.DB, in.ID)
	default:
		log.Warn("change not delivered yet; the reconciler will retry", "error", err)
		err = models.RetryIntent(ctx, s.DB, in.ID, err.Error(), time.Now().Add(backoff(in.Attempts)))
	}
	if err != nil {
		log.Error("intent state not recorded; the reconciler will deliver it again", "error", err)
	}
}

// backoff is the wait before attempt n+1: 5 s doubling up to 5 minutes.
func backoff(attempts int) time.Duration {
	d := 5 * time.Second
	for i := 0; i < attempts && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// Claim is the workflow side of a claimed intent (a signal): true the
// first time only, so a signal delivered twice is acted on once.
func Claim(ctx context.Context, db bun.IDB, intentID int64) (bool, error) {
	return models.DeleteIntent(ctx, db, intentID)
}
