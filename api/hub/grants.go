package hub

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// Permissions are granted only by those who hold them. A caller who is not
// a superuser may write a user or a group (create, change, activate,
// delete) only when every permission it holds, before and after the write,
// is one the caller holds too; a superuser only a superuser may change.
// With change_user alone, a user could otherwise join Administrators or
// set the password of the superuser. See docs/identity.md.

// grantable refuses the write when the permissions sets hold one the
// caller lacks (403, naming the first).
func grantable(c *gin.Context, sets ...map[string]bool) error {
	p := auth.Current(c)
	if p.User.IsSuperuser {
		return nil
	}
	var lacking []string
	for _, set := range sets {
		for codename := range set {
			if !p.Can(codename) {
				lacking = append(lacking, codename)
			}
		}
	}
	if len(lacking) == 0 {
		return nil
	}
	slices.Sort(lacking)
	lacking = slices.Compact(lacking)
	return web.Errorf(http.StatusForbidden, "You cannot grant or change permissions you do not hold: %s.", strings.Join(lacking, ", "))
}

// userGrantable refuses a write to the user named username (when it
// exists) that the caller may not make, with the groups it would join.
func (s *Server) userGrantable(c *gin.Context, username string, groups *[]string) error {
	if auth.Current(c).User.IsSuperuser {
		return nil
	}
	ctx := c.Request.Context()
	var sets []map[string]bool
	if username != "" {
		u, err := models.GetUser(ctx, s.DB, username)
		if err != nil {
			return err
		}
		if u.IsSuperuser {
			return web.Errorf(http.StatusForbidden, "Only a superuser can change a superuser.")
		}
		held, err := models.PermissionSet(ctx, s.DB, u)
		if err != nil {
			return err
		}
		sets = append(sets, held)
	}
	if groups != nil {
		joined, err := models.GroupsPermissionSet(ctx, s.DB, *groups, nil)
		if err != nil {
			return err
		}
		sets = append(sets, joined)
	}
	return grantable(c, sets...)
}

// groupGrantable refuses a write to group id (0: a new one) that the
// caller may not make: the permissions it holds or would grant, and the
// users the write touches, each a user the caller may write. A write
// touches the users it adds or removes and, when it changes the group's
// permissions, every member, whose permissions change with the group's.
func (s *Server) groupGrantable(c *gin.Context, id int64, in changes.GroupInput) error {
	if auth.Current(c).User.IsSuperuser {
		return nil
	}
	ctx := c.Request.Context()
	held := map[string]bool{}
	members := map[string]bool{}
	if id != 0 {
		g, err := models.GetGroup(ctx, s.DB, id)
		if err != nil {
			return err
		}
		if held, err = models.GroupsPermissionSet(ctx, s.DB, nil, []int64{id}); err != nil {
			return err
		}
		for _, u := range g.Users {
			members[u.Username] = true
		}
	}
	sets := []map[string]bool{held}
	touched := map[string]bool{}
	if in.Permissions != nil {
		granted := map[string]bool{}
		for _, p := range *in.Permissions {
			granted[p] = true
		}
		sets = append(sets, granted)
		if !maps.Equal(held, granted) {
			maps.Copy(touched, members)
		}
	}
	if err := grantable(c, sets...); err != nil {
		return err
	}
	if in.Users != nil {
		kept := map[string]bool{}
		for _, u := range *in.Users {
			kept[u] = true
			if !members[u] {
				touched[u] = true
			}
		}
		for u := range members {
			if !kept[u] {
				touched[u] = true
			}
		}
	}
	for _, u := range slices.Sorted(maps.Keys(touched)) {
		if err := s.userGrantable(c, u, nil); err != nil && !errors.Is(err, models.ErrNotFound) {
			return err
		}
	}
	return nil
}
