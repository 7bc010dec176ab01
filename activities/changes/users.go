package changes

import (
	"context"
	"net/mail"
	"regexp"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

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

// UserInput is the writable part of a user; nil means "not sent".
type UserInput struct {
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

// ValidatePassword adds to v what is wrong with a new password pw.
func ValidatePassword(v models.FieldErrors, field, pw string) {
	v.Check(len(pw) >= minPasswordLength, field, "Ensure this field has at least 8 characters.")
	v.Check(len(pw) <= 72, field, "Ensure this field has no more than 72 bytes.")
}

// apply validates in and copies it onto u. create demands the required fields.
func (in *UserInput) apply(ctx context.Context, db bun.IDB, u *models.User, create bool) error {
	v := models.FieldErrors{}
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
			ValidatePassword(v, "password", *in.Password)
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

// CreateUser creates an active user from in, in the Users group unless
// in names its groups.
func (s *Service) CreateUser(ctx context.Context, in UserInput) (*models.User, error) {
	u := &models.User{IsActive: true}
	if err := in.apply(ctx, s.DB, u, true); err != nil {
		return nil, err
	}
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return nil, err
	}
	groups := []string{models.GroupUsers}
	if in.Groups != nil {
		groups = *in.Groups
	}
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		return models.CreateUser(ctx, tx, u, groups, conf.InitialUID)
	})
	return u, err
}

// UpdateUser applies in to the user named username.
func (s *Service) UpdateUser(ctx context.Context, username string, in UserInput) (*models.User, error) {
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return nil, err
	}
	var u *models.User
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		var err error
		if u, err = models.GetUser(ctx, tx, username); err != nil {
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
	return u, err
}

// StartNASUsersSync starts a NASUsersSyncWorkflow sending in (the active
// users with a NAS identity) to every site, and returns its id.
func (s *Service) StartNASUsersSync(ctx context.Context, in workflows.NASUsers) (string, error) {
	id := "nas-users-sync-" + models.NewUUID()
	start, err := NewStart(id, workflows.NASUsersSyncWorkflowName, in)
	if err != nil {
		return "", err
	}
	return id, s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		return tx.Owe(ctx, KindStart, 0, start)
	})
}
