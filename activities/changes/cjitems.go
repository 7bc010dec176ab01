package changes

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// The C+J API's writes: each stores its items and owes their changes
// (KindCJChange) in one transaction; a space also joins, changes or
// leaves the hub API space of its folder (docs/spaces-one-object.md).

// HubSpaceError is why a C+J space write cannot be the hub API space's
// too (models.ErrInUse, ErrImmutableSpace, ErrConflict on its name or
// folder); the C+J API answers it apart from its own conflicts.
type HubSpaceError struct{ Err error }

func (e *HubSpaceError) Error() string { return e.Err.Error() }
func (e *HubSpaceError) Unwrap() error { return e.Err }

// CJCheck checks a C+J write again inside its transaction, before
// anything is stored: the items it refers to still exist (create, update)
// or nothing refers to the item any more (delete). The API checked the
// same before, outside the transaction, where a concurrent write could
// change the answer before this one committed; run here, on PostgreSQL
// with the rows it relies on locked (models.FindCJItemForUpdate,
// LockCJItem) and on sqlite under the write lock every transaction takes
// at its start, the two writes cannot both pass. Its error is returned as
// it is. nil checks nothing.
type CJCheck func(ctx context.Context, tx bun.IDB) error

// CreateCJItems stores a new item with its sub-items (NEW) and owes their
// changes; a space joins or makes the hub API space of its folder. check
// runs first, in the transaction.
func (s *Service) CreateCJItems(ctx context.Context, it *models.CJItem, subs []*models.CJItem, check CJCheck) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if check != nil {
			if err := check(ctx, tx.Tx); err != nil {
				return err
			}
		}
		if it.Type == models.CJSpaces {
			ch, err := models.JoinHubSpace(ctx, tx, it)
			if err != nil {
				return &HubSpaceError{err}
			}
			if err := oweHubSide(ctx, tx, it, ch, true); err != nil {
				return err
			}
		}
		for _, x := range append([]*models.CJItem{it}, subs...) {
			if err := models.CreateCJItem(ctx, tx, x); err != nil {
				return err
			}
			if err := oweCJChange(ctx, tx, x); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpdateCJItem stores an edited item whose etag the client named and owes
// its change; a space's quota and profile become the hub API space's, and
// those of its items on the space's other sites. check runs first, in
// the transaction.
func (s *Service) UpdateCJItem(ctx context.Context, it *models.CJItem, etag string, check CJCheck) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if check != nil {
			if err := check(ctx, tx.Tx); err != nil {
				return err
			}
		}
		if err := models.UpdateCJItem(ctx, tx, it, etag); err != nil {
			return err
		}
		if it.Type == models.CJSpaces {
			ch, err := models.SpreadCJSpace(ctx, tx, it)
			if err != nil {
				return &HubSpaceError{err}
			}
			if err := oweHubSide(ctx, tx, it, ch, false); err != nil {
				return err
			}
		}
		return oweCJChange(ctx, tx, it)
	})
}

// DeleteCJItem hides an item whose etag the client named and owes the
// change that undoes its effect and then deletes it; a space's site
// leaves the hub API space, which goes when no site is left (unless the
// hub API still uses it). check runs in the transaction once the item's
// row is locked (models.LockCJItem), before it is marked: a write that
// refers to the item and locked the row first has committed, and check
// sees it.
func (s *Service) DeleteCJItem(ctx context.Context, it *models.CJItem, etag string, check CJCheck) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if check != nil {
			if err := models.LockCJItem(ctx, tx, it.ID); err != nil {
				return err
			}
			if err := check(ctx, tx.Tx); err != nil {
				return err
			}
		}
		if err := models.MarkCJItemDeleted(ctx, tx, it, etag); err != nil {
			return err
		}
		if it.Type == models.CJSpaces {
			ch, err := models.LeaveHubSpace(ctx, tx, it)
			if err != nil {
				return &HubSpaceError{err}
			}
			if ch.Deleted {
				if err := tx.OweScheduleSync(ctx, ch.Space.ID, workflows.SnapshotTemporalID(ch.Space.ID)); err != nil {
					return err
				}
			}
		}
		return oweCJChange(ctx, tx, it)
	})
}

// oweCJChange commits, with the item's change, the hand-over of its
// newest generation to its workflow (KindCJChange). If that can never be
// delivered, the change is a job that failed to run: as the contract says
// of job errors, the item becomes ERRORED with the cause in its log (a
// deletion is undone), and an empty PATCH retries.
func oweCJChange(ctx context.Context, tx *Tx, it *models.CJItem) error {
	return tx.Owe(ctx, KindCJChange, it.ID, CJChange{Site: it.Site, Type: it.Type, Generation: it.Generation})
}

// oweHubSide commits what a C+J space write owes beside its own change:
// the changes of the space's items on other sites that took its quota or
// profile and, for a site joining the hub space (join), that site's share
// files.
func oweHubSide(ctx context.Context, tx *Tx, it *models.CJItem, ch models.CJSpaceChange, join bool) error {
	for _, sib := range ch.Siblings {
		if err := oweCJChange(ctx, tx, sib); err != nil {
			return err
		}
	}
	if !join || ch.Space == nil {
		return nil
	}
	id := ch.Space.ID
	nfs, err := models.NFSShares(ctx, tx, &id)
	if err != nil {
		return err
	}
	smb, err := models.SMBShares(ctx, tx, &id)
	if err != nil {
		return err
	}
	var ops []workflows.SpaceOp
	share := func(kind string, shareID int64) {
		ops = append(ops, workflows.SpaceOp{Site: it.Site, Queue: vocab.DefaultQueue, Action: workflows.ShareSync,
			Share: workflows.ShareRef{Kind: kind, ID: shareID, Site: it.Site}})
	}
	for _, sh := range nfs {
		share(site.ShareNFS, sh.ID)
	}
	for _, sh := range smb {
		share(site.ShareSMB, sh.ID)
	}
	if len(ops) == 0 {
		return nil
	}
	return tx.Owe(ctx, KindSpaceOps, id, workflows.SpaceOps{Ops: ops})
}
