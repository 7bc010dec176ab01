package models

import (
	"context"
	"fmt"
	"sort"

	"github.com/uptrace/bun"
)

// Group is a set of users sharing permissions.
type Group struct {
	bun.BaseModel `bun:"table:groups,alias:g"`

	ID          int64        `bun:"id,pk,autoincrement"`
	Name        string       `bun:"name"`
	Permissions []Permission `bun:"m2m:group_permissions,join:Group=Permission"`
	Users       []User       `bun:"m2m:user_groups,join:Group=User"`
}

// GroupPermission links groups and permissions.
type GroupPermission struct {
	bun.BaseModel `bun:"table:group_permissions"`
	GroupID       int64       `bun:"group_id,pk"`
	Group         *Group      `bun:"rel:belongs-to,join:group_id=id"`
	PermissionID  int64       `bun:"permission_id,pk"`
	Permission    *Permission `bun:"rel:belongs-to,join:permission_id=id"`
}

// Default groups, created at every start when missing (EnsureAuthData).
// They are built in: the hub puts users in them by name (the bootstrap
// superuser in Administrators, new users and first logins through the
// identity provider in Users), so they are never renamed or deleted.
const (
	GroupAdministrators = "Administrators"
	GroupUsers          = "Users"
)

// BuiltinGroup reports whether name is a built-in group's.
func BuiltinGroup(name string) bool { return name == GroupAdministrators || name == GroupUsers }

// GroupsQuery selects groups with permissions and users into dest.
func GroupsQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Relation("Permissions").
		Relation("Users", func(q *bun.SelectQuery) *bun.SelectQuery { return q.Order("username") }).Order("g.id")
}

// GetGroup loads a group with its permissions and users.
func GetGroup(ctx context.Context, db bun.IDB, id int64) (*Group, error) {
	g := new(Group)
	err := GroupsQuery(db, g).Where("g.id = ?", id).Scan(ctx)
	return g, dbErr(err)
}

// SaveGroup inserts or updates g and, when perms is non-nil, replaces its
// permissions (given as codenames).
func SaveGroup(ctx context.Context, db bun.IDB, g *Group, perms []string) error {
	var err error
	if g.ID == 0 {
		_, err = db.NewInsert().Model(g).Exec(ctx)
	} else {
		_, err = db.NewUpdate().Model(g).Column("name").WherePK().Exec(ctx)
	}
	if err != nil {
		return dbErr(err)
	}
	if perms == nil {
		return nil
	}
	ps, err := permissionsByCodename(ctx, db, perms)
	if err != nil {
		return err
	}
	if _, err := db.NewDelete().Model((*GroupPermission)(nil)).Where("group_id = ?", g.ID).Exec(ctx); err != nil {
		return dbErr(err)
	}
	for _, p := range ps {
		if _, err := db.NewInsert().Model(&GroupPermission{GroupID: g.ID, PermissionID: p.ID}).Exec(ctx); err != nil {
			return dbErr(err)
		}
	}
	g.Permissions = ps
	return nil
}

// DeleteGroup removes a group; a built-in group is Refused.
func DeleteGroup(ctx context.Context, db bun.IDB, id int64) error {
	var name string
	if err := db.NewSelect().Model((*Group)(nil)).Column("name").Where("id = ?", id).Scan(ctx, &name); err != nil {
		return dbErr(err)
	}
	if BuiltinGroup(name) {
		return Refusef("Built-in groups cannot be deleted: the hub puts users in them by name.")
	}
	res, err := db.NewDelete().Model((*Group)(nil)).Where("id = ? AND name = ?", id, name).Exec(ctx)
	return affected(res, err)
}

func groupsByName(ctx context.Context, db bun.IDB, names []string) ([]Group, error) {
	var gs []Group
	if len(names) == 0 {
		return gs, nil
	}
	if err := db.NewSelect().Model(&gs).Where("name IN (?)", bun.In(names)).Order("name").Scan(ctx); err != nil {
		return nil, dbErr(err)
	}
	if missing := missingNames(names, gs, func(g Group) string { return g.Name }); missing != "" {
		return nil, fmt.Errorf("%w: group %q", ErrNotFound, missing)
	}
	return gs, nil
}

// missingNames returns the first wanted name absent from have.
func missingNames[T any](want []string, have []T, name func(T) string) string {
	seen := make(map[string]bool, len(have))
	for _, h := range have {
		seen[name(h)] = true
	}
	sorted := append([]string(nil), want...)
	sort.Strings(sorted)
	for _, w := range sorted {
		if !seen[w] {
			return w
		}
	}
	return ""
}
