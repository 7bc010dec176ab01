package models

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/uptrace/bun"
)

// Resource types of the storage-management (Collection+JSON) API, in the
// order its billboard lists them.
const (
	CJDatastores = "datastores"
	CJIlmsteps   = "ilmsteps"
	CJProfiles   = "profiles"
	CJSpaces     = "spaces"
	CJTemplates  = "templates"
	CJExposers   = "exposers"
	CJSnapshots  = "snapshots"
)

// CJTypes lists every C+J resource type in billboard order.
var CJTypes = []string{CJDatastores, CJIlmsteps, CJProfiles, CJSpaces, CJTemplates, CJExposers, CJSnapshots}

// Item status values (spec: States and transitions).
const (
	CJNew        = "NEW"
	CJPending    = "PENDING"
	CJInProgress = "INPROGRESS"
	CJActive     = "ACTIVE"
	CJErrored    = "ERRORED"
)

// ErrStale means a conditional write named an entity tag that is no longer
// the item's: someone else changed it first.
var ErrStale = errors.New("stale entity tag")

// cjLogMax bounds an item's job log; older entries are dropped first.
const cjLogMax = 200

// CJLogEntry is one line of the job log of an item.
type CJLogEntry struct {
	Time       time.Time `json:"time"`
	Level      string    `json:"level"` // info or error
	Message    string    `json:"message"`
	Generation int64     `json:"generation,omitempty"` // the change the line is about
}

// CJItem is one object of the storage-management API. Data holds the
// type's own fields as JSON; the columns hold what every item has. Name and
// Scope are copied out of Data for uniqueness: names are unique per site,
// type and scope (the space of a snapshot, empty otherwise).
//
// Etag changes with every client write and only then; Generation counts
// those writes so that the job engine can tell whether the change it
// applied is still the newest. A deleted item is hidden at once and removed
// when its deletion has been applied at the site.
type CJItem struct {
	bun.BaseModel `bun:"table:cj_items,alias:ci"`

	ID         int64          `bun:"id,pk,autoincrement"`
	Site       string         `bun:"site"`
	Type       string         `bun:"type"`
	Scope      string         `bun:"scope"`
	Name       string         `bun:"name"`
	Etag       string         `bun:"etag"`
	Generation int64          `bun:"generation"`
	Status     string         `bun:"status"`
	Deleted    bool           `bun:"deleted"`
	Comment    string         `bun:"comment"`
	Extras     map[string]any `bun:"extras,type:jsonb"`
	Data       map[string]any `bun:"data,type:jsonb"`
	Log        []CJLogEntry   `bun:"log,type:jsonb"`
	Created    time.Time      `bun:"created_at"`
	Modified   time.Time      `bun:"modified_at"`
}

// NewCJEtag returns a fresh random entity tag.
func NewCJEtag() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CreateCJItem inserts it as a new item: generation 1, a fresh etag, status
// NEW unless set. A taken name is ErrConflict.
func CreateCJItem(ctx context.Context, db bun.IDB, it *CJItem) error {
	now := time.Now().UTC()
	it.Etag, it.Generation, it.Created, it.Modified = NewCJEtag(), 1, now, now
	if it.Status == "" {
		it.Status = CJNew
	}
	if it.Extras == nil {
		it.Extras = map[string]any{}
	}
	if it.Data == nil {
		it.Data = map[string]any{}
	}
	if it.Log == nil {
		it.Log = []CJLogEntry{}
	}
	_, err := db.NewInsert().Model(it).Exec(ctx)
	return dbErr(err)
}

// GetCJItem loads a visible (not deleted) item of a site and type.
func GetCJItem(ctx context.Context, db bun.IDB, site, typ string, id int64) (*CJItem, error) {
	it := new(CJItem)
	err := db.NewSelect().Model(it).
		Where("ci.id = ? AND ci.site = ? AND ci.type = ? AND NOT ci.deleted", id, site, typ).Scan(ctx)
	return it, dbErr(err)
}

// GetCJItemByID loads an item by id, deleted or not; the job engine uses it.
func GetCJItemByID(ctx context.Context, db bun.IDB, id int64) (*CJItem, error) {
	it := new(CJItem)
	err := db.NewSelect().Model(it).Where("ci.id = ?", id).Scan(ctx)
	return it, dbErr(err)
}

// ListCJItems returns a site's items of a type by id; withDeleted adds the
// items whose deletion is still under way.
func ListCJItems(ctx context.Context, db bun.IDB, site, typ string, withDeleted bool) ([]CJItem, error) {
	var items []CJItem
	q := db.NewSelect().Model(&items).Where("ci.site = ? AND ci.type = ?", site, typ).Order("ci.id")
	if !withDeleted {
		q = q.Where("NOT ci.deleted")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, dbErr(err)
	}
	return items, nil
}

// FindCJItem loads the visible item of a type named name in scope.
func FindCJItem(ctx context.Context, db bun.IDB, site, typ, scope, name string) (*CJItem, error) {
	it := new(CJItem)
	err := db.NewSelect().Model(it).
		Where("ci.site = ? AND ci.type = ? AND ci.scope = ? AND ci.name = ? AND NOT ci.deleted", site, typ, scope, name).
		Scan(ctx)
	return it, dbErr(err)
}

// FindCJItemForUpdate is FindCJItem that, on PostgreSQL, also locks the
// item's row until the transaction db ends: a deletion of it (which takes
// the same lock, LockCJItem) waits, and one that committed first leaves
// it not found. On sqlite every transaction already holds the database's
// write lock from its start (_txlock=immediate, one connection), so the
// plain read is enough. A write that checks "the item it refers to still
// exists" with it cannot commit beside the referred item's deletion.
func FindCJItemForUpdate(ctx context.Context, db bun.IDB, site, typ, scope, name string) (*CJItem, error) {
	it := new(CJItem)
	q := db.NewSelect().Model(it).
		Where("ci.site = ? AND ci.type = ? AND ci.scope = ? AND ci.name = ? AND NOT ci.deleted", site, typ, scope, name)
	if IsPostgres(db) {
		q = q.For("UPDATE")
	}
	return it, dbErr(q.Scan(ctx))
}

// LockCJItem takes, on PostgreSQL, the row lock of item id until the
// transaction db ends (see FindCJItemForUpdate); a deletion takes it
// before checking that nothing refers to the item, so that it sees every
// reference committed by a write that held the lock before it. On sqlite
// it does nothing: the transaction holds the write lock already.
func LockCJItem(ctx context.Context, db bun.IDB, id int64) error {
	if !IsPostgres(db) {
		return nil
	}
	_, err := db.ExecContext(ctx, `SELECT 1 FROM cj_items WHERE id = ? FOR UPDATE`, id)
	return dbErr(err)
}

// UpdateCJItem stores it.Name, Data, Comment and Extras if the item's etag is
// still etag (compare-and-swap in the UPDATE itself, so concurrent writers
// cannot both win), with a new etag, the next generation and status PENDING.
// A changed etag is ErrStale, a missing or deleted item ErrNotFound, a
// taken name ErrConflict.
func UpdateCJItem(ctx context.Context, db bun.IDB, it *CJItem, etag string) error {
	next := &CJItem{ID: it.ID, Name: it.Name, Data: it.Data, Comment: it.Comment, Extras: it.Extras,
		Etag: NewCJEtag(), Status: CJPending, Modified: time.Now().UTC()}
	res, err := db.NewUpdate().Model(next).
		Column("name", "data", "comment", "extras", "etag", "status", "modified_at").
		Set("generation = generation + 1").
		Where("id = ? AND etag = ? AND NOT deleted", it.ID, etag).Exec(ctx)
	if err := casResult(ctx, db, it.ID, res, err); err != nil {
		return err
	}
	return reload(ctx, db, it)
}

// MarkCJItemDeleted hides the item if its etag is still etag and moves it
// to the next generation, status PENDING, for the job engine to undo its
// effect and then remove it. Errors as UpdateCJItem.
func MarkCJItemDeleted(ctx context.Context, db bun.IDB, it *CJItem, etag string) error {
	res, err := db.NewUpdate().Model((*CJItem)(nil)).
		Set("deleted = TRUE, status = ?, modified_at = ?, generation = generation + 1", CJPending, time.Now().UTC()).
		Where("id = ? AND etag = ? AND NOT deleted", it.ID, etag).Exec(ctx)
	if err := casResult(ctx, db, it.ID, res, err); err != nil {
		return err
	}
	return reload(ctx, db, it)
}

// casResult tells a lost compare-and-swap (ErrStale) from a missing item.
func casResult(ctx context.Context, db bun.IDB, id int64, res interface{ RowsAffected() (int64, error) }, err error) error {
	if err != nil {
		return dbErr(err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	cur, err := GetCJItemByID(ctx, db, id)
	switch {
	case err != nil:
		return err
	case cur.Deleted:
		return ErrNotFound
	}
	return ErrStale
}

func reload(ctx context.Context, db bun.IDB, it *CJItem) error {
	cur, err := GetCJItemByID(ctx, db, it.ID)
	if err != nil {
		return err
	}
	*it = *cur
	return nil
}

// AppendCJLog adds entries to an item's job log, keeping the newest
// cjLogMax. Only the item's job (one at a time) and the API's failure path
// write the log, so the read-modify-write does not race.
func AppendCJLog(ctx context.Context, db bun.IDB, id int64, entries ...CJLogEntry) error {
	it, err := GetCJItemByID(ctx, db, id)
	if err != nil {
		return err
	}
	log := append(it.Log, entries...)
	if len(log) > cjLogMax {
		log = log[len(log)-cjLogMax:]
	}
	_, err = db.NewUpdate().Model(&CJItem{ID: id, Log: log}).Column("log").WherePK().Exec(ctx)
	return dbErr(err)
}

// SetCJStatus sets the item's status if it is still at generation, and
// reports whether it was: a newer change keeps its own status (PENDING)
// until the job engine reaches it.
func SetCJStatus(ctx context.Context, db bun.IDB, id, generation int64, status string) (bool, error) {
	res, err := db.NewUpdate().Model((*CJItem)(nil)).
		Set("status = ?, modified_at = ?", status, time.Now().UTC()).
		Where("id = ? AND generation = ?", id, generation).Exec(ctx)
	if err != nil {
		return false, dbErr(err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// RemoveCJItem deletes the row of an item whose deletion (at generation)
// has been applied; it reports false when the item moved on meanwhile.
func RemoveCJItem(ctx context.Context, db bun.IDB, id, generation int64) (bool, error) {
	res, err := db.NewDelete().Model((*CJItem)(nil)).
		Where("id = ? AND generation = ? AND deleted", id, generation).Exec(ctx)
	if err != nil {
		return false, dbErr(err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// RestoreCJItem makes an item whose deletion failed visible again, ERRORED,
// so that its log explains why and the client can retry the DELETE. A
// space's hub API side comes back in the same transaction
// (RelinkHubSpace): its folder is still there, so both APIs show it.
func RestoreCJItem(ctx context.Context, db bun.IDB, id, generation int64) (bool, error) {
	var restored bool
	err := runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		res, err := tx.NewUpdate().Model((*CJItem)(nil)).
			Set("deleted = FALSE, status = ?, modified_at = ?", CJErrored, time.Now().UTC()).
			Where("id = ? AND generation = ? AND deleted", id, generation).Exec(ctx)
		if err != nil {
			return dbErr(err)
		}
		n, _ := res.RowsAffected()
		if restored = n > 0; !restored {
			return nil
		}
		it, err := GetCJItemByID(ctx, tx, id)
		if err != nil || it.Type != CJSpaces {
			return err
		}
		if _, ok := it.Data[CJKeepFolder]; ok {
			delete(it.Data, CJKeepFolder)
			if _, err := tx.NewUpdate().Model(it).Column("data").WherePK().Exec(ctx); err != nil {
				return dbErr(err)
			}
		}
		return RelinkHubSpace(ctx, tx, it)
	})
	return restored, err
}

// SyncCJItems makes a site's items of typ exactly the named documents given
// (read-only resources reported by the site, such as datastores): missing
// ones are created ACTIVE, changed ones get their new data and a new etag,
// and the others are removed.
func SyncCJItems(ctx context.Context, db bun.IDB, site, typ string, docs map[string]map[string]any) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		have, err := ListCJItems(ctx, tx, site, typ, true)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		seen := make(map[string]bool, len(have))
		for _, it := range have {
			seen[it.Name] = true
			doc, ok := docs[it.Name]
			switch {
			case !ok:
				if _, err := tx.NewDelete().Model((*CJItem)(nil)).Where("id = ?", it.ID).Exec(ctx); err != nil {
					return dbErr(err)
				}
			case !sameJSON(it.Data, doc):
				up := &CJItem{ID: it.ID, Data: doc, Etag: NewCJEtag(), Modified: now}
				if _, err := tx.NewUpdate().Model(up).Column("data", "etag", "modified_at").
					Set("generation = generation + 1").WherePK().Exec(ctx); err != nil {
					return dbErr(err)
				}
			}
		}
		for name, doc := range docs {
			if seen[name] {
				continue
			}
			it := &CJItem{Site: site, Type: typ, Name: name, Status: CJActive, Data: doc}
			if err := CreateCJItem(ctx, tx, it); err != nil {
				return fmt.Errorf("create %s %s: %w", typ, name, err)
			}
		}
		return nil
	})
}

// sameJSON compares two documents as their JSON round trip would, since
// stored numbers come back as float64.
func sameJSON(a, b map[string]any) bool {
	roundTrip := func(m map[string]any) (any, bool) {
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, false
		}
		var v any
		return v, json.Unmarshal(raw, &v) == nil
	}
	da, okA := roundTrip(a)
	db, okB := roundTrip(b)
	return okA && okB && reflect.DeepEqual(da, db)
}

// FirstSiteName returns the name of the oldest site record, the default
// site of the C+J API; ErrNotFound when there is none.
func FirstSiteName(ctx context.Context, db bun.IDB) (string, error) {
	var name string
	err := db.NewSelect().Model((*Site)(nil)).Column("name").Order("id").Limit(1).Scan(ctx, &name)
	return name, dbErr(err)
}
