package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/crypto/bcrypt"
)

// User is a hub account.
type User struct {
	bun.BaseModel `bun:"table:users,alias:u"`

	ID       int64  `bun:"id,pk,autoincrement"`
	Username string `bun:"username"`
	Password string `bun:"password"` // bcrypt hash; "" means no usable password
	// PasswordChanged is when Password was last set: the hub's tokens
	// issued before are refused (api/auth).
	PasswordChanged *time.Time     `bun:"password_changed"`
	Email           string         `bun:"email"`
	FirstName       string         `bun:"first_name"`
	LastName        string         `bun:"last_name"`
	IsActive        bool           `bun:"is_active"`
	IsSuperuser     bool           `bun:"is_superuser"`
	DateJoined      time.Time      `bun:"date_joined"`
	LastLogin       *time.Time     `bun:"last_login"`
	NASAllowSSH     bool           `bun:"nas_allow_ssh"`
	NASPrimaryGroup *string        `bun:"nas_primary_group"`
	NASUID          *int64         `bun:"nas_uid"`
	Profile         map[string]any `bun:"profile,type:jsonb"`
	IDPIssuer       *string        `bun:"idp_issuer"`
	IDPSubject      *string        `bun:"idp_subject"`

	Groups []Group `bun:"m2m:user_groups,join:User=Group"`
}

// UserGroup links users and groups.
type UserGroup struct {
	bun.BaseModel `bun:"table:user_groups"`
	UserID        int64  `bun:"user_id,pk"`
	User          *User  `bun:"rel:belongs-to,join:user_id=id"`
	GroupID       int64  `bun:"group_id,pk"`
	Group         *Group `bun:"rel:belongs-to,join:group_id=id"`
}

// SetPassword stores a slow (bcrypt) hash of password.
func (u *User) SetPassword(password string) error {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	u.Password = string(h)
	now := time.Now().UTC()
	u.PasswordChanged = &now
	return nil
}

// CheckPassword reports whether password matches the stored hash.
func (u *User) CheckPassword(password string) bool {
	return u.Password != "" && bcrypt.CompareHashAndPassword([]byte(u.Password), []byte(password)) == nil
}

// GetUser loads a user by username, with groups.
func GetUser(ctx context.Context, db bun.IDB, username string) (*User, error) {
	u := new(User)
	err := db.NewSelect().Model(u).Relation("Groups").Where("u.username = ?", username).Scan(ctx)
	return u, dbErr(err)
}

// GetUserByID loads a user by id, with groups.
func GetUserByID(ctx context.Context, db bun.IDB, id int64) (*User, error) {
	u := new(User)
	err := db.NewSelect().Model(u).Relation("Groups").Where("u.id = ?", id).Scan(ctx)
	return u, dbErr(err)
}

// UsersQuery selects users with groups into dest, ordered by username.
func UsersQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Relation("Groups").Order("u.username")
}

// CreateUser inserts u and sets its groups by name; a NAS user gets the next
// free uid at or above initialUID.
func CreateUser(ctx context.Context, db bun.IDB, u *User, groups []string, initialUID int64) error {
	if u.DateJoined.IsZero() {
		u.DateJoined = time.Now().UTC()
	}
	if u.NASPrimaryGroup != nil && u.NASUID == nil {
		uid, err := nextUID(ctx, db, initialUID)
		if err != nil {
			return err
		}
		u.NASUID = &uid
	}
	if _, err := db.NewInsert().Model(u).Exec(ctx); err != nil {
		return dbErr(err)
	}
	return SetUserGroups(ctx, db, u, groups)
}

func nextUID(ctx context.Context, db bun.IDB, initial int64) (int64, error) {
	var maxUID *int64
	err := db.NewSelect().Model((*User)(nil)).ColumnExpr("MAX(nas_uid)").Scan(ctx, &maxUID)
	if err != nil {
		return 0, dbErr(err)
	}
	if maxUID == nil || *maxUID < initial {
		return initial, nil
	}
	return *maxUID + 1, nil
}

// UpdateUser writes every column of u and, when groups is non-nil, replaces
// its groups.
func UpdateUser(ctx context.Context, db bun.IDB, u *User, groups []string, initialUID int64) error {
	if u.NASPrimaryGroup != nil && u.NASUID == nil {
		uid, err := nextUID(ctx, db, initialUID)
		if err != nil {
			return err
		}
		u.NASUID = &uid
	}
	if _, err := db.NewUpdate().Model(u).WherePK().ExcludeColumn("id").Exec(ctx); err != nil {
		return dbErr(err)
	}
	if groups == nil {
		return nil
	}
	return SetUserGroups(ctx, db, u, groups)
}

// SetUserGroups replaces u's groups with the named ones (ErrNotFound names a
// missing group).
func SetUserGroups(ctx context.Context, db bun.IDB, u *User, names []string) error {
	gs, err := groupsByName(ctx, db, names)
	if err != nil {
		return err
	}
	if _, err := db.NewDelete().Model((*UserGroup)(nil)).Where("user_id = ?", u.ID).Exec(ctx); err != nil {
		return dbErr(err)
	}
	for _, g := range gs {
		if _, err := db.NewInsert().Model(&UserGroup{UserID: u.ID, GroupID: g.ID}).Exec(ctx); err != nil {
			return dbErr(err)
		}
	}
	u.Groups = gs
	return nil
}

// DeleteUser removes a user by username.
func DeleteUser(ctx context.Context, db bun.IDB, username string) error {
	res, err := db.NewDelete().Model((*User)(nil)).Where("username = ?", username).Exec(ctx)
	return affected(res, err)
}

// TouchLogin records a successful login.
func TouchLogin(ctx context.Context, db bun.IDB, u *User) error {
	now := time.Now().UTC()
	u.LastLogin = &now
	_, err := db.NewUpdate().Model(u).Column("last_login").WherePK().Exec(ctx)
	return dbErr(err)
}

// affected turns "no rows affected" into ErrNotFound.
func affected(res interface{ RowsAffected() (int64, error) }, err error) error {
	if err != nil {
		return dbErr(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// EnsureAdmin creates the superuser username in the Administrators group
// when missing, with password. When the user exists, the password is reset
// only if reset is true (an operator set it explicitly). It reports whether
// the user was created.
func EnsureAdmin(ctx context.Context, db bun.IDB, username, password string, reset bool) (bool, error) {
	u, err := GetUser(ctx, db, username)
	switch {
	case err == nil:
		if !reset || (u.IsActive && u.CheckPassword(password)) {
			return false, nil // unchanged: its tokens stay good (SetPassword)
		}
		if err := u.SetPassword(password); err != nil {
			return false, err
		}
		u.IsActive = true
		_, err := db.NewUpdate().Model(u).Column("password", "password_changed", "is_active").WherePK().Exec(ctx)
		return false, dbErr(err)
	case err != ErrNotFound:
		return false, err
	}
	u = &User{Username: username, IsActive: true, IsSuperuser: true}
	if err := u.SetPassword(password); err != nil {
		return false, err
	}
	return true, CreateUser(ctx, db, u, []string{GroupAdministrators}, 0)
}

// Identity is a user as an external identity provider knows them.
type Identity struct {
	Issuer, Subject, Username, Email, FirstName, LastName string
	EmailVerified                                         bool // the provider vouches for Email
}

// ErrIdentityTaken: the username is linked to another identity.
var ErrIdentityTaken = errors.New("the username is linked to another identity")

// ErrIdentityUnproven: the username is a local account's that the identity
// has not shown to be its own.
var ErrIdentityUnproven = errors.New("the username belongs to a local account; an identity is linked to it only when the provider vouches for the account's email (email_verified), and never to a superuser")

// LinkIdentity finds the user linked to id (issuer, subject); else the
// unlinked user named id.Username, which it links when id proves to be
// its owner (a verified email equal to the account's; never a superuser:
// a username claim is often the user's own choice at the provider); else
// it creates an active user of the Users group, linked, without a usable
// password. All in one transaction, so two first logins at once make one
// user.
func LinkIdentity(ctx context.Context, db *bun.DB, id Identity) (*User, error) {
	var u *User
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		existing := new(User)
		err := tx.NewSelect().Model(existing).Where("idp_issuer = ? AND idp_subject = ?", id.Issuer, id.Subject).Scan(ctx)
		if err == nil {
			u = existing
			return nil
		}
		if existing, err := GetUser(ctx, tx, id.Username); err == nil {
			if existing.IDPIssuer != nil {
				return ErrIdentityTaken
			}
			if existing.IsSuperuser || !id.EmailVerified || existing.Email == "" || !strings.EqualFold(existing.Email, id.Email) {
				return ErrIdentityUnproven
			}
			existing.IDPIssuer, existing.IDPSubject = &id.Issuer, &id.Subject
			u = existing
			_, err := tx.NewUpdate().Model(u).Column("idp_issuer", "idp_subject").WherePK().Exec(ctx)
			return err
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		u = &User{Username: id.Username, Email: id.Email, FirstName: id.FirstName, LastName: id.LastName,
			IsActive: true, IDPIssuer: &id.Issuer, IDPSubject: &id.Subject}
		return CreateUser(ctx, tx, u, []string{GroupUsers}, 0)
	})
	return u, err
}
