package models

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// Space is a managed storage area: a directory at the same mountpoint
// under the root of each of its sites.
type Space struct {
	bun.BaseModel `bun:"table:spaces,alias:sp"`

	ID             int64          `bun:"id,pk,autoincrement"`
	UUID           string         `bun:"uuid"`
	Name           string         `bun:"name"`
	Mountpoint     string         `bun:"mountpoint"`
	Size           *int64         `bun:"size"`
	PermissionMode string         `bun:"permission_mode"`
	Color          []int64        `bun:"color,type:jsonb"`
	Immutable      bool           `bun:"immutable"`
	OnSites        map[string]any `bun:"on_sites,type:jsonb"`
	Created        time.Time      `bun:"created"`

	Links            []SpaceSite       `bun:"rel:has-many,join:id=space_id"`
	SnapshotSchedule *SnapshotSchedule `bun:"rel:has-one,join:id=space_id"`
}

// OnSite tells whether the space is on site siteID (its links read).
func (sp *Space) OnSite(siteID int64) bool {
	for _, l := range sp.Links {
		if l.SiteID == siteID {
			return true
		}
	}
	return false
}

// SpaceSite links a space to a site, with the site-specific label and usage.
type SpaceSite struct {
	bun.BaseModel `bun:"table:space_sites,alias:ss"`

	SpaceID int64   `bun:"space_id,pk"`
	Space   *Space  `bun:"rel:belongs-to,join:space_id=id"`
	SiteID  int64   `bun:"site_id,pk"`
	Site    *Site   `bun:"rel:belongs-to,join:site_id=id"`
	Label   string  `bun:"label"`
	Usage   []int64 `bun:"usage,type:jsonb"`
	State   string  `bun:"state"`
	Error   string  `bun:"error"`
}

// SnapshotSchedule is a space's snapshot schedule (at most one).
type SnapshotSchedule struct {
	bun.BaseModel `bun:"table:space_snapshot_schedules,alias:sns"`

	ID        int64  `bun:"id,pk,autoincrement"`
	SpaceID   int64  `bun:"space_id"`
	Duration  string `bun:"duration"`
	Frequency string `bun:"frequency"`
	Time      string `bun:"time"`
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS is broken; nothing sensible to do
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// SpaceFilter narrows a space query; zero values do not filter.
type SpaceFilter struct {
	SiteID  *int64
	Keyword string // substring of the name, case-insensitive
}

func (f SpaceFilter) apply(q *bun.SelectQuery) *bun.SelectQuery {
	if f.SiteID != nil {
		q = q.Where("EXISTS (SELECT 1 FROM space_sites AS fss WHERE fss.space_id = sp.id AND fss.site_id = ?)", *f.SiteID)
	}
	if f.Keyword != "" {
		q = q.Where("LOWER(sp.name) LIKE ? ESCAPE '\\'", "%"+likeEscape(f.Keyword)+"%")
	}
	return q
}

func likeEscape(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range []rune(s) {
		switch r {
		case '\\', '%', '_':
			out = append(out, '\\')
		}
		out = append(out, toLower(r))
	}
	return string(out)
}

func toLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

func spaceRelations(q *bun.SelectQuery) *bun.SelectQuery {
	return q.Relation("Links", func(q *bun.SelectQuery) *bun.SelectQuery { return q.Order("ss.site_id") }).
		Relation("Links.Site").Relation("SnapshotSchedule")
}

// SpacesQuery selects spaces matching f, with their sites and schedule, by name.
func SpacesQuery(db bun.IDB, dest any, f SpaceFilter) *bun.SelectQuery {
	return f.apply(spaceRelations(db.NewSelect().Model(dest))).Order("sp.name")
}

// GetSpace loads a space matching f by id; a space not matching f is ErrNotFound.
func GetSpace(ctx context.Context, db bun.IDB, id int64, f SpaceFilter) (*Space, error) {
	sp := new(Space)
	err := f.apply(spaceRelations(db.NewSelect().Model(sp))).Where("sp.id = ?", id).Scan(ctx)
	return sp, dbErr(err)
}

// SpaceLink is the desired link of a space to a site.
type SpaceLink struct {
	SiteID int64
	Label  string
	Usage  []int64
}

// SpaceChange lists the sites whose directory a write adds or drops.
type SpaceChange struct {
	Added, Removed []Site
}

// SaveSpace inserts or updates sp and its schedule (when schedule is
// non-nil; a schedule with an empty Frequency deletes it) and, when links is
// non-nil, replaces its sites. It returns the sites added and removed.
func SaveSpace(ctx context.Context, db bun.IDB, sp *Space, schedule *SnapshotSchedule, links []SpaceLink) (SpaceChange, error) {
	var ch SpaceChange
	err := runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		if sp.ID == 0 {
			sp.UUID, sp.Created = NewUUID(), time.Now().UTC()
			if _, err := tx.NewInsert().Model(sp).Exec(ctx); err != nil {
				return dbErr(err)
			}
		} else if _, err := tx.NewUpdate().Model(sp).WherePK().ExcludeColumn("uuid", "mountpoint", "created").Exec(ctx); err != nil {
			return dbErr(err)
		}
		if schedule != nil {
			if _, err := tx.NewDelete().Model((*SnapshotSchedule)(nil)).Where("space_id = ?", sp.ID).Exec(ctx); err != nil {
				return dbErr(err)
			}
			if schedule.Frequency != "" {
				schedule.ID, schedule.SpaceID = 0, sp.ID
				if _, err := tx.NewInsert().Model(schedule).Exec(ctx); err != nil {
					return dbErr(err)
				}
			}
		}
		if links != nil {
			var err error
			ch, err = setSpaceLinks(ctx, tx, sp.ID, links)
			return err
		}
		return nil
	})
	return ch, err
}

// setSpaceLinks makes the space's links exactly links: kept links get the
// new label and usage and keep their state, new ones start pending.
func setSpaceLinks(ctx context.Context, tx bun.IDB, spaceID int64, links []SpaceLink) (SpaceChange, error) {
	var ch SpaceChange
	var old []SpaceSite
	if err := tx.NewSelect().Model(&old).Relation("Site").Where("ss.space_id = ?", spaceID).Scan(ctx); err != nil {
		return ch, dbErr(err)
	}
	want := map[int64]bool{}
	for _, l := range links {
		want[l.SiteID] = true
	}
	had := map[int64]bool{}
	for _, o := range old {
		had[o.SiteID] = true
		if !want[o.SiteID] {
			if _, err := tx.NewDelete().Model((*SpaceSite)(nil)).Where("space_id = ? AND site_id = ?", spaceID, o.SiteID).Exec(ctx); err != nil {
				return ch, dbErr(err)
			}
			ch.Removed = append(ch.Removed, *o.Site)
		}
	}
	for _, l := range links {
		usage := l.Usage
		if usage == nil {
			usage = []int64{}
		}
		if had[l.SiteID] {
			link := &SpaceSite{SpaceID: spaceID, SiteID: l.SiteID, Label: l.Label, Usage: usage}
			_, err := tx.NewUpdate().Model(link).Column("label", "usage").WherePK().Exec(ctx)
			if err != nil {
				return ch, dbErr(err)
			}
			continue
		}
		link := &SpaceSite{SpaceID: spaceID, SiteID: l.SiteID, Label: l.Label, Usage: usage, State: vocab.SpaceSitePending}
		if _, err := tx.NewInsert().Model(link).Exec(ctx); err != nil {
			return ch, dbErr(err)
		}
		site := new(Site)
		if err := tx.NewSelect().Model(site).Where("id = ?", l.SiteID).Scan(ctx); err != nil {
			return ch, dbErr(err)
		}
		ch.Added = append(ch.Added, *site)
		had[l.SiteID] = true
	}
	return ch, nil
}

// SetSiteSpaces makes the spaces linked to a site exactly those named
// (unknown names are ErrNotFound). New links take the site's label. It
// returns, per space, the change for this site.
func SetSiteSpaces(ctx context.Context, db bun.IDB, site *Site, names []string) (added, removed []Space, err error) {
	err = runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		var spaces []Space
		if len(names) > 0 {
			if err := tx.NewSelect().Model(&spaces).Where("name IN (?)", bun.In(names)).Scan(ctx); err != nil {
				return dbErr(err)
			}
			if missing := missingNames(names, spaces, func(s Space) string { return s.Name }); missing != "" {
				return fmt.Errorf("%w: space %q", ErrNotFound, missing)
			}
		}
		var old []SpaceSite
		if err := tx.NewSelect().Model(&old).Relation("Space").Where("ss.site_id = ?", site.ID).Scan(ctx); err != nil {
			return dbErr(err)
		}
		want := map[int64]bool{}
		for _, s := range spaces {
			want[s.ID] = true
		}
		had := map[int64]bool{}
		for _, o := range old {
			had[o.SpaceID] = true
			if want[o.SpaceID] {
				continue
			}
			if _, err := tx.NewDelete().Model((*SpaceSite)(nil)).Where("space_id = ? AND site_id = ?", o.SpaceID, site.ID).Exec(ctx); err != nil {
				return dbErr(err)
			}
			removed = append(removed, *o.Space)
		}
		for _, s := range spaces {
			if had[s.ID] {
				continue
			}
			had[s.ID] = true
			link := &SpaceSite{SpaceID: s.ID, SiteID: site.ID, Label: site.Label, Usage: []int64{}, State: vocab.SpaceSitePending}
			if _, err := tx.NewInsert().Model(link).Exec(ctx); err != nil {
				return dbErr(err)
			}
			added = append(added, s)
		}
		return nil
	})
	return added, removed, err
}

// DeleteSpace removes a space and returns it with its sites as they were,
// so that the caller can remove its directories, and the C+J space items
// of its folder marked deleted (their changes remove the folder where
// they exist; the caller owes them). A space still used — by shares,
// schedules or policies of the hub API, or by C+J exposers or snapshots
// of its folder on one of its sites — is ErrInUse: the folder must not go
// while a record of either API points at it.
func DeleteSpace(ctx context.Context, db bun.IDB, id int64) (*Space, []*CJItem, error) {
	var sp *Space
	var items []*CJItem
	err := runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		var err error
		if sp, err = GetSpace(ctx, tx, id, SpaceFilter{}); err != nil {
			return err
		}
		users, err := SpaceHubUsers(ctx, tx, id)
		if err != nil {
			return err
		}
		if users != "" {
			return fmt.Errorf("%w: it has %s", ErrInUse, users)
		}
		for _, l := range sp.Links {
			it, err := DropSpaceCJItem(ctx, tx, sp, l.Site.Name)
			if err != nil {
				return err
			}
			if it != nil {
				items = append(items, it)
			}
		}
		res, err := tx.NewDelete().Model((*Space)(nil)).Where("id = ?", id).Exec(ctx)
		return deleted(res, err)
	})
	return sp, items, err
}

// RecordSpaceSite stores the outcome of creating a space's directory on a
// site. A link removed meanwhile is left alone.
func RecordSpaceSite(ctx context.Context, db bun.IDB, spaceID int64, site, state, msg string) error {
	_, err := db.NewUpdate().Model((*SpaceSite)(nil)).Set("state = ?", state).Set("error = ?", msg).
		Where("space_id = ?", spaceID).
		Where("site_id = (SELECT id FROM sites WHERE name = ?)", site).Exec(ctx)
	return dbErr(err)
}

// SpaceShares returns a space's NFS and SMB shares.
func SpaceShares(ctx context.Context, db bun.IDB, spaceID int64) ([]NFSShare, []SMBShare, error) {
	var nfs []NFSShare
	if err := db.NewSelect().Model(&nfs).Where("space_id = ?", spaceID).Order("id").Scan(ctx); err != nil {
		return nil, nil, dbErr(err)
	}
	var smb []SMBShare
	if err := db.NewSelect().Model(&smb).Where("space_id = ?", spaceID).Order("id").Scan(ctx); err != nil {
		return nil, nil, dbErr(err)
	}
	return nfs, smb, nil
}

// GetSpaceByName loads a space (without its relations) by name.
func GetSpaceByName(ctx context.Context, db bun.IDB, name string) (*Space, error) {
	sp := new(Space)
	return sp, dbErr(db.NewSelect().Model(sp).Where("sp.name = ?", name).Scan(ctx))
}

// SpaceNames maps every space's id to its name.
func SpaceNames(ctx context.Context, db bun.IDB) (map[int64]string, error) {
	var rows []Space
	if err := db.NewSelect().Model(&rows).Column("id", "name").Scan(ctx); err != nil {
		return nil, dbErr(err)
	}
	out := make(map[int64]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Name
	}
	return out, nil
}

// SnapshotScheduleSpaceIDs lists the spaces that have a snapshot schedule.
func SnapshotScheduleSpaceIDs(ctx context.Context, db bun.IDB) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*SnapshotSchedule)(nil)).Column("space_id").Where("frequency <> ''").Order("space_id").Scan(ctx, &ids)
	return ids, dbErr(err)
}
