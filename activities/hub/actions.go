package hub

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
)

// ActionState is an action's new state and, once it ends, what it did.
type ActionState struct {
	ID      int64
	State   string
	Results string
}

// RecordAction stores an action's state and results.
func (a *Activities) RecordAction(ctx context.Context, s ActionState) error {
	return models.FinishAction(ctx, a.DB, s.ID, s.State, s.Results)
}

// SiteRef names a site.
type SiteRef struct {
	ID   int64
	Name string
}

// ListSites returns every site, by name.
func (a *Activities) ListSites(ctx context.Context) ([]SiteRef, error) {
	var sites []models.Site
	if err := models.SitesQuery(a.DB, &sites).Scan(ctx); err != nil {
		return nil, err
	}
	out := make([]SiteRef, len(sites))
	for i, s := range sites {
		out[i] = SiteRef{ID: s.ID, Name: s.Name}
	}
	return out, nil
}

// NASUsers is what a NAS users sync sends: the active users that have a
// NAS identity, to every site.
type NASUsers struct {
	Sites []string
	Users []site.NASUser
}

// LoadNASUsers reads the users and sites a NAS users sync sends.
func LoadNASUsers(ctx context.Context, db bun.IDB) (NASUsers, error) {
	out := NASUsers{Users: []site.NASUser{}}
	var users []models.User
	if err := db.NewSelect().Model(&users).Where("u.nas_uid IS NOT NULL AND u.is_active").Order("u.nas_uid").Scan(ctx); err != nil {
		return out, err
	}
	var sites []models.Site
	if err := models.SitesQuery(db, &sites).Scan(ctx); err != nil {
		return out, err
	}
	for _, u := range users {
		group := ""
		if u.NASPrimaryGroup != nil {
			group = *u.NASPrimaryGroup
		}
		out.Users = append(out.Users, site.NASUser{Username: u.Username, UID: *u.NASUID, PrimaryGroup: group, AllowSSH: u.NASAllowSSH})
	}
	for _, s := range sites {
		out.Sites = append(out.Sites, s.Name)
	}
	return out, nil
}

// NASUsersPlan is LoadNASUsers as an activity.
func (a *Activities) NASUsersPlan(ctx context.Context) (NASUsers, error) {
	return LoadNASUsers(ctx, a.DB)
}
