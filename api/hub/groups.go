package hub

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) groupRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("group")
	r.GET("/groups/", perm, handle(s.listGroups))
	r.POST("/groups/", perm, handle(s.saveGroup))
	r.GET("/groups/:id/", perm, handle(s.getGroup))
	r.PATCH("/groups/:id/", perm, handle(s.saveGroup))
	r.DELETE("/groups/:id/", perm, handle(s.deleteGroup))

	pperm := auth.CRUD("permission")
	r.GET("/permissions/", pperm, handle(func(c *gin.Context) error {
		return web.Paginate(c, func(d *[]models.Permission) *bun.SelectQuery { return models.PermissionsQuery(s.DB, d) }, func(p *models.Permission) any { return renderPermission(p) })
	}))
	r.GET("/permissions/:id/", pperm, handle(func(c *gin.Context) error {
		id, err := web.PathID(c, "id")
		if err != nil {
			return err
		}
		p, err := models.GetPermission(c.Request.Context(), s.DB, id)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, renderPermission(p))
		return nil
	}))
}

func renderGroup(c *gin.Context, g *models.Group) groupResponse {
	perms := make([]string, len(g.Permissions))
	for i, p := range g.Permissions {
		perms[i] = p.Codename
	}
	users := make([]string, len(g.Users))
	for i, u := range g.Users {
		users[i] = u.Username
	}
	return groupResponse{ID: g.ID, URL: web.AbsURL(c, "/api/groups/"+strconv.FormatInt(g.ID, 10)+"/"),
		Name: g.Name, Permissions: perms, Users: users}
}

func (s *Server) listGroups(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Group) *bun.SelectQuery { return models.GroupsQuery(s.DB, d) }, func(g *models.Group) any { return renderGroup(c, g) })
}

func (s *Server) getGroup(c *gin.Context) error {
	return getOne(c, s.DB, models.GetGroup, renderGroup)
}

// groupInput is the body of POST and PATCH /api/groups/.
type groupInput struct {
	Name        *string   `json:"name"`
	Permissions *[]string `json:"permissions"`
	Users       *[]string `json:"users"`
}

// saveGroup creates (POST) or updates (PATCH) a group. permissions are
// codenames; users, when sent, replaces the group's members by username.
func (s *Server) saveGroup(c *gin.Context) error {
	var in groupInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var g *models.Group
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		g = new(models.Group)
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if g, err = models.GetGroup(ctx, tx, id); err != nil {
				return err
			}
		}
		v := web.ValidationError{}
		if in.Name != nil || create {
			v.Check(deref(in.Name) != "", "name", "This field is required.")
			v.Check(len(deref(in.Name)) <= 150, "name", "Ensure this field has no more than 150 characters.")
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
			if isNotFound(err) {
				return web.Invalid("permissions", err.Error())
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
	if err != nil {
		return err
	}
	return saved(c, create, renderGroup(c, g))
}

func setGroupUsers(ctx context.Context, tx bun.IDB, g *models.Group, usernames []string) error {
	if _, err := tx.NewDelete().Model((*models.UserGroup)(nil)).Where("group_id = ?", g.ID).Exec(ctx); err != nil {
		return err
	}
	for _, name := range usernames {
		u, err := models.GetUser(ctx, tx, name)
		if isNotFound(err) {
			return web.Invalid("users", "Object with username="+name+" does not exist.")
		} else if err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(&models.UserGroup{UserID: u.ID, GroupID: g.ID}).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) deleteGroup(c *gin.Context) error {
	return deleteByID(c, s.DB, models.DeleteGroup)
}
