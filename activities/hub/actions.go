package hub

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// RecordAction stores an action's state and results, errors in them
// without Temporal's wording.
func (a *Activities) RecordAction(ctx context.Context, s workflows.ActionState) error {
	return models.FinishAction(ctx, a.DB, s.ID, s.State, vocab.CleanErrorText(s.Results))
}

// ListSites returns every site, by name.
func (a *Activities) ListSites(ctx context.Context) ([]workflows.SiteRef, error) {
	var sites []models.Site
	if err := models.SitesQuery(a.DB, &sites).Scan(ctx); err != nil {
		return nil, err
	}
	out := make([]workflows.SiteRef, len(sites))
	for i, s := range sites {
		out[i] = workflows.SiteRef{ID: s.ID, Name: s.Name}
	}
	return out, nil
}

// LoadNASUsers reads the users and sites a NAS users sync sends.
func LoadNASUsers(ctx context.Context, db bun.IDB) (workflows.NASUsers, error) {
	out := workflows.NASUsers{Users: []site.NASUser{}}
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
func (a *Activities) NASUsersPlan(ctx context.Context) (workflows.NASUsers, error) {
	return LoadNASUsers(ctx, a.DB)
}
