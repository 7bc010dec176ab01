package models

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// Permission is a Django-style model permission: <action>_<model>.
type Permission struct {
	bun.BaseModel `bun:"table:permissions,alias:p"`

	ID       int64  `bun:"id,pk,autoincrement"`
	AppLabel string `bun:"app_label"`
	Codename string `bun:"codename"`
	Model    string `bun:"model"`
	Name     string `bun:"name"`
}

// UserPermission grants a permission to one user directly.
type UserPermission struct {
	bun.BaseModel `bun:"table:user_permissions"`
	UserID        int64 `bun:"user_id,pk"`
	PermissionID  int64 `bun:"permission_id,pk"`
}

// AppLabel is the app label of every hub permission.
const AppLabel = "hub"

// Actions are the four permission verbs of every model.
var Actions = []string{"view", "add", "change", "delete"}

// PermissionModels lists every model that has permissions, with the
// human-readable name used in permission names. Later features add models
// here; EnsureAuthData creates the missing rows at start-up.
var PermissionModels = []struct{ Model, Verbose string }{
	{"user", "user"}, {"group", "group"}, {"permission", "permission"}, {"clientkey", "client key"},
	{"site", "site"}, {"node", "node"}, {"queue", "queue"}, {"configuration", "configuration"},
	{"alert", "alert"}, {"action", "action"}, {"space", "space"}, {"nfsshare", "NFS share"},
	{"smbshare", "SMB share"}, {"storagepool", "storage pool"}, {"server", "server"},
	{"datastore", "data store"}, {"ipaddress", "IP address"}, {"bucket", "bucket"},
	{"externaltarget", "external target"}, {"workflow", "workflow"}, {"schedule", "schedule"},
	{"policy", "policy"}, {"job", "job"}, {"task", "task"}, {"jobstat", "job stat"},
	{"settingstask", "settings task"}, {"setting", "setting"}, {"feature", "feature"},
	{"filestatustype", "file status type"}, {"certificatelifetime", "certificate lifetime"},
	{"tag", "tag"}, {"search", "search"}, {"file", "file"},
}

// usersGroupGrants are the codenames of the default Users group: read access
// to the catalogue, running jobs and searches, and managing their own keys.
func usersGroupGrants() []string {
	var out []string
	for _, m := range PermissionModels {
		switch m.Model {
		case "user", "group", "permission", "configuration", "setting", "certificatelifetime":
			continue
		}
		out = append(out, "view_"+m.Model)
	}
	return append(out, "add_clientkey", "change_clientkey", "delete_clientkey",
		"add_job", "change_job", "add_search", "delete_search")
}

// ExtraPermissions are permissions beyond the four verbs of a model.
var ExtraPermissions = []Permission{
	// Without it, a user changes (pauses, resumes, cancels, resubmits,
	// deletes) only its own jobs: change_job, which every member of
	// Users holds, would otherwise let anyone cancel anyone's.
	{Codename: PermManageJobs, Model: "job", Name: "Can manage every job"},
}

// PermManageJobs lets a user change every job, not only its own.
const PermManageJobs = "manage_job"

// Codename returns the codename of action on model, e.g. view_site.
func Codename(action, model string) string { return action + "_" + model }

// EnsureAuthData creates missing permissions and the default groups
// (Administrators with every permission, Users with usersGroupGrants). It is
// idempotent and runs at every start.
func EnsureAuthData(ctx context.Context, db bun.IDB) error {
	for _, m := range PermissionModels {
		for _, a := range Actions {
			p := &Permission{AppLabel: AppLabel, Codename: Codename(a, m.Model), Model: m.Model,
				Name: fmt.Sprintf("Can %s %s", a, m.Verbose)}
			if _, err := db.NewInsert().Model(p).On("CONFLICT (codename) DO NOTHING").Exec(ctx); err != nil {
				return fmt.Errorf("ensure permission %s: %w", p.Codename, err)
			}
		}
	}
	for _, extra := range ExtraPermissions {
		p := extra
		p.AppLabel = AppLabel
		if _, err := db.NewInsert().Model(&p).On("CONFLICT (codename) DO NOTHING").Exec(ctx); err != nil {
			return fmt.Errorf("ensure permission %s: %w", p.Codename, err)
		}
	}
	var all []string
	if err := db.NewSelect().Model((*Permission)(nil)).Column("codename").Scan(ctx, &all); err != nil {
		return dbErr(err)
	}
	for name, grants := range map[string][]string{GroupAdministrators: all, GroupUsers: usersGroupGrants()} {
		if err := ensureGroupGrants(ctx, db, name, grants); err != nil {
			return err
		}
	}
	return nil
}

// ensureGroupGrants creates the group if missing and adds the grants it
// lacks, never removing what an operator granted.
func ensureGroupGrants(ctx context.Context, db bun.IDB, name string, grants []string) error {
	g := &Group{Name: name}
	if _, err := db.NewInsert().Model(g).On("CONFLICT (name) DO NOTHING").Exec(ctx); err != nil {
		return dbErr(err)
	}
	if err := db.NewSelect().Model(g).Where("name = ?", name).Scan(ctx); err != nil {
		return dbErr(err)
	}
	ps, err := permissionsByCodename(ctx, db, grants)
	if err != nil {
		return err
	}
	for _, p := range ps {
		_, err := db.NewInsert().Model(&GroupPermission{GroupID: g.ID, PermissionID: p.ID}).
			On("CONFLICT (group_id, permission_id) DO NOTHING").Exec(ctx)
		if err != nil {
			return dbErr(err)
		}
	}
	return nil
}

// PermissionsQuery selects permissions into dest.
func PermissionsQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("p.id")
}

// GetPermission loads one permission.
func GetPermission(ctx context.Context, db bun.IDB, id int64) (*Permission, error) {
	p := new(Permission)
	err := db.NewSelect().Model(p).Where("id = ?", id).Scan(ctx)
	return p, dbErr(err)
}

func permissionsByCodename(ctx context.Context, db bun.IDB, codenames []string) ([]Permission, error) {
	var ps []Permission
	if len(codenames) == 0 {
		return ps, nil
	}
	if err := db.NewSelect().Model(&ps).Where("codename IN (?)", bun.In(codenames)).Order("id").Scan(ctx); err != nil {
		return nil, dbErr(err)
	}
	if missing := missingNames(codenames, ps, func(p Permission) string { return p.Codename }); missing != "" {
		return nil, fmt.Errorf("%w: permission %q", ErrNotFound, missing)
	}
	return ps, nil
}

// UserPermissions returns the permissions a user holds through its groups
// and directly; a superuser holds every permission.
func UserPermissions(ctx context.Context, db bun.IDB, u *User) (group, direct []Permission, err error) {
	if u.IsSuperuser {
		err = PermissionsQuery(db, &group).Scan(ctx)
		return group, nil, dbErr(err)
	}
	err = db.NewSelect().Model(&group).Distinct().
		Join("JOIN group_permissions AS gp ON gp.permission_id = p.id").
		Join("JOIN user_groups AS ug ON ug.group_id = gp.group_id").
		Where("ug.user_id = ?", u.ID).Order("p.id").Scan(ctx)
	if err != nil {
		return nil, nil, dbErr(err)
	}
	err = db.NewSelect().Model(&direct).
		Join("JOIN user_permissions AS up ON up.permission_id = p.id").
		Where("up.user_id = ?", u.ID).Order("p.id").Scan(ctx)
	return group, direct, dbErr(err)
}

// PermissionSet returns the codenames a user holds, in one query of
// codenames alone (it runs on every authenticated request).
func PermissionSet(ctx context.Context, db bun.IDB, u *User) (map[string]bool, error) {
	var codenames []string
	q := db.NewSelect().Model((*Permission)(nil)).Column("p.codename")
	if !u.IsSuperuser {
		q.Where("p.id IN (SELECT gp.permission_id FROM group_permissions AS gp JOIN user_groups AS ug ON ug.group_id = gp.group_id WHERE ug.user_id = ?)", u.ID).
			WhereOr("p.id IN (SELECT up.permission_id FROM user_permissions AS up WHERE up.user_id = ?)", u.ID)
	}
	if err := q.Scan(ctx, &codenames); err != nil {
		return nil, dbErr(err)
	}
	set := make(map[string]bool, len(codenames))
	for _, c := range codenames {
		set[c] = true
	}
	return set, nil
}

// Generations are numbers that database triggers move, whoever writes:
// Auth whenever a user, group, permission or client key changes (an
// authenticated caller cached at one generation is still valid while it
// stays the same), Sites whenever a site, its links to spaces or their
// names change (the sites list rendered at one generation is still what
// it shows). Snapshot, on PostgreSQL only, is the statement's snapshot
// (pg_current_snapshot), the same text for two reads only when no
// transaction ended between them, in which case they saw the same rows of
// every table. Jobs names what the jobs and tasks lists read as of the
// same statement: on sqlite a number triggers move at any change of jobs,
// tasks or queues (migration 20261127120000), on PostgreSQL the snapshot.
// Owners moves whenever a job is inserted or deleted or its owner changes
// (migration 20261127140000), not with a job's progress.
type Generations struct {
	Auth, Sites, Owners int64
	Jobs, Snapshot      string
}

// ReadGenerations reads the generations in one statement.
func ReadGenerations(ctx context.Context, db bun.IDB) (Generations, error) {
	var g Generations
	q := db.NewSelect().Table("auth_generation").Column("n", "sites").
		ColumnExpr("(SELECT n FROM job_owners_generation WHERE id = 1)").Where("id = 1")
	if IsPostgres(db) {
		err := q.ColumnExpr("pg_current_snapshot()::text").Scan(ctx, &g.Auth, &g.Sites, &g.Owners, &g.Snapshot)
		g.Jobs = g.Snapshot
		return g, dbErr(err)
	}
	err := q.ColumnExpr("CAST(jobs AS TEXT)").Scan(ctx, &g.Auth, &g.Sites, &g.Owners, &g.Jobs)
	return g, dbErr(err)
}

// GroupsPermissionSet returns the codenames the groups named (or, with ids,
// the groups of those ids) grant.
func GroupsPermissionSet(ctx context.Context, db bun.IDB, names []string, ids []int64) (map[string]bool, error) {
	set := map[string]bool{}
	if len(names) == 0 && len(ids) == 0 {
		return set, nil
	}
	var codenames []string
	q := db.NewSelect().Model((*Permission)(nil)).Column("p.codename").Distinct().
		Join("JOIN group_permissions AS gp ON gp.permission_id = p.id").
		Join("JOIN groups AS g ON g.id = gp.group_id")
	if len(names) > 0 {
		q.Where("g.name IN (?)", bun.In(names))
	} else {
		q.Where("g.id IN (?)", bun.In(ids))
	}
	if err := q.Scan(ctx, &codenames); err != nil {
		return nil, dbErr(err)
	}
	for _, c := range codenames {
		set[c] = true
	}
	return set, nil
}
