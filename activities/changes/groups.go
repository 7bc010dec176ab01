package changes

import (
	"context"
	"errors"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// GroupInput is a group as a client writes it; nil fields keep their
// value. Permissions are codenames; Users, when sent, replaces the
// group's members by username.
type GroupInput struct {
	Name        *string   `json:"name"`
	Permissions *[]string `json:"permissions"`
	Users       *[]string `json:"users"`
}

// SaveGroup creates (id 0) or updates group id from in.
func (s *Service) SaveGroup(ctx context.Context, id int64, in GroupInput) (*models.Group, error) {
	var g *models.Group
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		g = new(models.Group)
		if id != 0 {
			var err error
			if g, err = models.GetGroup(ctx, tx, id); err != nil {
				return err
			}
		}
		v := models.FieldErrors{}
		if in.Name != nil || id == 0 {
			v.Check(deref(in.Name) != "", "name", "This field is required.")
			v.Check(len(deref(in.Name)) <= 150, "name", "Ensure this field has no more than 150 characters.")
			v.Check(id == 0 || !models.BuiltinGroup(g.Name) || deref(in.Name) == g.Name, "name",
				"Built-in groups cannot be renamed: the hub puts users in them by name.")
			g.Name = deref(in.Name)
		}
		if err := v.Err(); err != nil {
			return err
		}
		var perms []string
		if in.Permissions != nil {
			perms = append([]string{}, *in.Permissions...)
		}
		if err := models.SaveGroup(ctx, tx, g, perms); err != nil {
			if errors.Is(err, models.ErrNotFound) {
				return models.Invalid("permissions", err.Error())
			}
			return err
		}
		if in.Users != nil {
			if err := setGroupUsers(ctx, tx, g, *in.Users); err != nil {
				return err
			}
		}
		var err error
		g, err = models.GetGroup(ctx, tx, g.ID)
		return err
	})
	return g, err
}

func setGroupUsers(ctx context.Context, tx bun.IDB, g *models.Group, usernames []string) error {
	if _, err := tx.NewDelete().Model((*models.UserGroup)(nil)).Where("group_id = ?", g.ID).Exec(ctx); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, name := range usernames {
		if seen[name] {
			continue // named twice: a member once (a 500 before)
		}
		seen[name] = true
		u, err := models.GetUser(ctx, tx, name)
		if errors.Is(err, models.ErrNotFound) {
			return models.Invalid("users", "Object with username="+name+" does not exist.")
		} else if err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(&models.UserGroup{UserID: u.ID, GroupID: g.ID}).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}
