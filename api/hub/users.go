package hub

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) userRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("user")
	r.GET("/users/", perm, handle(s.listUsers))
	r.POST("/users/", perm, handle(s.createUser))
	r.POST("/users/change_password/", handle(s.changePassword))
	r.POST("/users/sync/", auth.Require("change_user"), handle(s.syncNASUsers))
	r.GET("/users/:username/", perm, handle(s.getUser))
	r.PATCH("/users/:username/", perm, handle(s.updateUser))
	r.DELETE("/users/:username/", perm, handle(s.deleteUser))
	r.POST("/users/:username/activate/", auth.Require("change_user"), handle(s.setActive(true)))
	r.POST("/users/:username/deactivate/", auth.Require("change_user"), handle(s.setActive(false)))
	r.GET("/my-permissions/", handle(s.myPermissions))
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func renderUser(c *gin.Context, u *models.User) userResponse {
	groups := make([]recordRef, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = recordRef{ID: g.ID, Name: g.Name, URL: web.AbsURL(c, "/api/groups/"+strconv.FormatInt(g.ID, 10)+"/")}
	}
	var nas *nasUserResponse
	if u.NASPrimaryGroup != nil {
		nas = &nasUserResponse{AllowSSH: u.NASAllowSSH, PrimaryGroup: *u.NASPrimaryGroup, UID: u.NASUID}
	}
	return userResponse{
		ID: u.ID, URL: web.AbsURL(c, "/api/users/"+u.Username+"/"), Username: u.Username,
		Email: u.Email, FirstName: u.FirstName, LastName: u.LastName,
		DateJoined: u.DateJoined, LastLogin: u.LastLogin, IsActive: u.IsActive,
		IsSuperuser: u.IsSuperuser, Groups: groups, NASUser: nas, Profile: renderProfile(u.Profile),
	}
}

// renderProfile reads a stored profile: the texts userInput.apply sets,
// and site ids, which come back from the database as JSON numbers.
func renderProfile(m map[string]any) userProfile {
	text := func(key string) string {
		s, _ := m[key].(string)
		return s
	}
	id := func(key string) *int64 {
		var n int64
		switch v := m[key].(type) {
		case int64:
			n = v
		case float64:
			n = int64(v)
		default:
			return nil
		}
		return &n
	}
	return userProfile{Country: text("country"), Department: text("department"), LineManager: text("line_manager"),
		Phone: text("phone"), Timezone: text("timezone"), DefaultSite: id("default_site"), HomeSite: id("home_site")}
}

func (s *Server) listUsers(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.User) *bun.SelectQuery { return models.UsersQuery(s.DB, d) }, func(u *models.User) any { return renderUser(c, u) })
}

func (s *Server) createUser(c *gin.Context) error {
	var in changes.UserInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	groups := in.Groups
	if groups == nil {
		groups = &[]string{models.GroupUsers}
	}
	if err := s.userGrantable(c, "", groups); err != nil {
		return err
	}
	u, err := s.Changes.CreateUser(c.Request.Context(), in)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, renderUser(c, u))
	return nil
}

func (s *Server) getUser(c *gin.Context) error {
	u, err := models.GetUser(c.Request.Context(), s.DB, c.Param("username"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderUser(c, u))
	return nil
}

func (s *Server) updateUser(c *gin.Context) error {
	var in changes.UserInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	if err := s.userGrantable(c, c.Param("username"), in.Groups); err != nil {
		return err
	}
	u, err := s.Changes.UpdateUser(c.Request.Context(), c.Param("username"), in)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderUser(c, u))
	return nil
}

func (s *Server) deleteUser(c *gin.Context) error {
	if p := auth.Current(c); p.User.Username == c.Param("username") {
		return web.Errorf(http.StatusConflict, "You cannot delete your own account.")
	}
	if err := s.userGrantable(c, c.Param("username"), nil); err != nil {
		return err
	}
	if err := models.DeleteUser(c.Request.Context(), s.DB, c.Param("username")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func (s *Server) setActive(active bool) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		ctx := c.Request.Context()
		if err := s.userGrantable(c, c.Param("username"), nil); err != nil {
			return err
		}
		u, err := models.GetUser(ctx, s.DB, c.Param("username"))
		if err != nil {
			return err
		}
		u.IsActive = active
		if _, err := s.DB.NewUpdate().Model(u).Column("is_active").WherePK().Exec(ctx); err != nil {
			return err
		}
		c.JSON(http.StatusCreated, renderUser(c, u))
		return nil
	}
}

// changePasswordInput is the body of POST /api/users/change_password/.
type changePasswordInput struct {
	OldPassword string `json:"old_password"`
	NewPassword string `json:"new_password"`
}

// changePassword changes the caller's own password, given the old one.
func (s *Server) changePassword(c *gin.Context) error {
	var in changePasswordInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	v := web.ValidationError{}
	v.Check(in.OldPassword != "", "old_password", "This field is required.")
	if in.NewPassword == "" {
		v.Add("new_password", "This field is required.")
	} else {
		changes.ValidatePassword(v, "new_password", in.NewPassword)
	}
	if err := v.Err(); err != nil {
		return err
	}
	// old_password is a password check like a login's, under the same
	// throttle: a stolen token or client key must not guess the password
	// here while the account's logins are throttled.
	u := auth.Current(c).User
	done, wait := s.Tokens.Throttle.Allow(c.Request, u.Username)
	if wait > 0 {
		return web.TooManyRequests(c, wait)
	}
	wrong := !u.CheckPassword(in.OldPassword)
	done(wrong)
	if wrong {
		return web.Invalid("old_password", "Your old password was entered incorrectly.")
	}
	if err := u.SetPassword(in.NewPassword); err != nil {
		return err
	}
	if _, err := s.DB.NewUpdate().Model(u).Column("password", "password_changed").WherePK().Exec(c.Request.Context()); err != nil {
		return err
	}
	c.JSON(http.StatusCreated, detailResponse{Detail: "Password changed."})
	return nil
}

func renderPermission(p *models.Permission) permissionResponse {
	return permissionResponse{ID: p.ID, AppLabel: p.AppLabel, Codename: p.Codename, Model: p.Model, Name: p.Name}
}

func renderPermissions(ps []models.Permission) []permissionResponse {
	out := make([]permissionResponse, len(ps))
	for i := range ps {
		out[i] = renderPermission(&ps[i])
	}
	return out
}

func (s *Server) myPermissions(c *gin.Context) error {
	group, direct, err := models.UserPermissions(c.Request.Context(), s.DB, auth.Current(c).User)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, []myPermissionsResponse{{
		GroupPermissions: renderPermissions(group), UserPermissions: renderPermissions(direct),
		GroupObjectPermissions: []map[string]any{}, UserObjectPermissions: []map[string]any{},
	}})
	return nil
}

// syncNASUsers sends the active users that have a NAS identity to every
// site (NASUsersSyncWorkflow) and answers 202 with the workflow id.
func (s *Server) syncNASUsers(c *gin.Context) error {
	ctx := c.Request.Context()
	in, err := hubact.LoadNASUsers(ctx, s.DB)
	if err != nil {
		return err
	}
	id, err := s.Changes.StartNASUsersSync(ctx, in)
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, nasSyncResponse{TaskID: id, Sites: in.Sites, Users: len(in.Users)})
	return nil
}
