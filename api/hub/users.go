package hub

import (
	"context"
	"net/http"
	"net/mail"
	"regexp"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
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

type nasUserInput struct {
	AllowSSH     *bool   `json:"allow_ssh"`
	PrimaryGroup *string `json:"primary_group"`
}

type profileInput struct {
	Country     *string `json:"country"`
	Department  *string `json:"department"`
	LineManager *string `json:"line_manager"`
	Phone       *string `json:"phone"`
	Timezone    *string `json:"timezone"`
	DefaultSite *int64  `json:"default_site"`
	HomeSite    *int64  `json:"home_site"`
}

// userInput is the writable part of a user; nil means "not sent".
type userInput struct {
	Username  *string       `json:"username"`
	Password  *string       `json:"password"`
	Email     *string       `json:"email"`
	FirstName *string       `json:"first_name"`
	LastName  *string       `json:"last_name"`
	IsActive  *bool         `json:"is_active"`
	Groups    *[]string     `json:"groups"`
	NASUser   *nasUserInput `json:"nas_user"`
	Profile   *profileInput `json:"profile"`
}

var usernamePattern = regexp.MustCompile(`^[\w.@+-]+$`)

const minPasswordLength = 8

func validatePassword(v web.ValidationError, field, pw string) {
	v.Check(len(pw) >= minPasswordLength, field, "Ensure this field has at least 8 characters.")
	v.Check(len(pw) <= 72, field, "Ensure this field has no more than 72 bytes.")
}

// apply validates in and copies it onto u. create demands the required fields.
func (in *userInput) apply(ctx context.Context, db bun.IDB, u *models.User, create bool) error {
	v := web.ValidationError{}
	if in.Username != nil || create {
		name := deref(in.Username)
		switch {
		case name == "":
			v.Add("username", "This field is required.")
		case len(name) > 150:
			v.Add("username", "Ensure this field has no more than 150 characters.")
		case !usernamePattern.MatchString(name):
			v.Add("username", "Enter a valid username. This value may contain only letters, numbers, and @/./+/-/_ characters.")
		case name != u.Username:
			if _, err := models.GetUser(ctx, db, name); err == nil {
				v.Add("username", "A user with that username already exists.")
			}
		}
		u.Username = name
	}
	if in.Password != nil || create {
		if in.Password == nil || *in.Password == "" {
			v.Add("password", "This field is required.")
		} else {
			validatePassword(v, "password", *in.Password)
			if len(v["password"]) == 0 {
				if err := u.SetPassword(*in.Password); err != nil {
					return err
				}
			}
		}
	}
	if in.Email != nil {
		if *in.Email != "" {
			if _, err := mail.ParseAddress(*in.Email); err != nil {
				v.Add("email", "Enter a valid email address.")
			}
		}
		u.Email = *in.Email
	}
	setIf(&u.FirstName, in.FirstName)
	setIf(&u.LastName, in.LastName)
	setIf(&u.IsActive, in.IsActive)
	if n := in.NASUser; n != nil {
		if n.PrimaryGroup == nil && u.NASPrimaryGroup == nil || n.PrimaryGroup != nil && *n.PrimaryGroup == "" {
			v.Add("nas_user.primary_group", "This field is required.")
		}
		if n.PrimaryGroup != nil {
			u.NASPrimaryGroup = n.PrimaryGroup
		}
		setIf(&u.NASAllowSSH, n.AllowSSH)
	}
	if p := in.Profile; p != nil {
		if u.Profile == nil {
			u.Profile = map[string]any{}
		}
		for key, val := range map[string]*string{"country": p.Country, "department": p.Department,
			"line_manager": p.LineManager, "phone": p.Phone} {
			if val != nil {
				u.Profile[key] = *val
			}
		}
		if p.Timezone != nil {
			if _, err := time.LoadLocation(*p.Timezone); err != nil || *p.Timezone == "" {
				v.Add("profile.timezone", "Enter a valid IANA time zone name, e.g. Europe/Paris.")
			}
			u.Profile["timezone"] = *p.Timezone
		}
		for key, id := range map[string]*int64{"default_site": p.DefaultSite, "home_site": p.HomeSite} {
			if id == nil {
				continue
			}
			if n, err := db.NewSelect().Model((*models.Site)(nil)).Where("id = ?", *id).Count(ctx); err != nil {
				return err
			} else if n == 0 {
				v.Add("profile."+key, "Invalid pk \""+strconv.FormatInt(*id, 10)+"\" - object does not exist.")
			}
			u.Profile[key] = *id
		}
	}
	if in.Groups != nil {
		for _, g := range *in.Groups {
			if n, err := db.NewSelect().Model((*models.Group)(nil)).Where("name = ?", g).Count(ctx); err != nil {
				return err
			} else if n == 0 {
				v.Add("groups", "Object with name="+g+" does not exist.")
			}
		}
	}
	return v.Err()
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
	var in userInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	u := &models.User{IsActive: true}
	if err := in.apply(ctx, s.DB, u, true); err != nil {
		return err
	}
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return err
	}
	groups := []string{models.GroupUsers}
	if in.Groups != nil {
		groups = *in.Groups
	}
	err = s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		return models.CreateUser(ctx, tx, u, groups, conf.InitialUID)
	})
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
	var in userInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return err
	}
	var u *models.User
	err = s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		if u, err = models.GetUser(ctx, tx, c.Param("username")); err != nil {
			return err
		}
		if err := in.apply(ctx, tx, u, false); err != nil {
			return err
		}
		var groups []string
		if in.Groups != nil {
			groups = append([]string{}, *in.Groups...)
		}
		return models.UpdateUser(ctx, tx, u, groups, conf.InitialUID)
	})
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
	if err := models.DeleteUser(c.Request.Context(), s.DB, c.Param("username")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func (s *Server) setActive(active bool) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		ctx := c.Request.Context()
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
		validatePassword(v, "new_password", in.NewPassword)
	}
	if err := v.Err(); err != nil {
		return err
	}
	u := auth.Current(c).User
	if !u.CheckPassword(in.OldPassword) {
		return web.Invalid("old_password", "Your old password was entered incorrectly.")
	}
	if err := u.SetPassword(in.NewPassword); err != nil {
		return err
	}
	if _, err := s.DB.NewUpdate().Model(u).Column("password").WherePK().Exec(c.Request.Context()); err != nil {
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
	id := "nas-users-sync-" + models.NewUUID()
	start, err := changes.NewStart(id, workflows.NASUsersSyncWorkflowName, in)
	if err != nil {
		return err
	}
	err = s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		return tx.Owe(ctx, changes.KindStart, 0, start)
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusAccepted, nasSyncResponse{TaskID: id, Sites: in.Sites, Users: len(in.Users)})
	return nil
}
