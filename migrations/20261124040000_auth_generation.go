package migrations

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// authTables are the tables whose rows decide who a caller is and what
// they may do. Any change to them moves auth_generation.n, so a process
// that caches authenticated callers (api/auth) drops its cache at the
// next request, whichever process made the change.
var authTables = []string{"users", "groups", "permissions", "group_permissions", "user_groups", "user_permissions", "client_keys"}

// usersAuthColumns are the users columns a change of which moves the
// generation: all but last_login, which every login writes.
var usersAuthColumns = "username, password, email, first_name, last_name, is_active, is_superuser, date_joined, " +
	"nas_allow_ssh, nas_primary_group, nas_uid, profile, idp_issuer, idp_subject"

func registerAuthGeneration(ms *migrate.Migrations) {
	ms.MustRegister(authGenerationUp, authGenerationDown)
}

func authGenerationUp(ctx context.Context, db *bun.DB) error {
	stmts := []string{
		`CREATE TABLE auth_generation (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)`,
		`INSERT INTO auth_generation (id, n) VALUES (1, 1)`,
	}
	pg := db.Dialect().Name() == dialect.PG
	if pg {
		stmts = append(stmts, `CREATE FUNCTION auth_generation_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE auth_generation SET n = n + 1 WHERE id = 1;
	RETURN NULL;
END $$`)
	}
	for _, t := range authTables {
		for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
			event := op
			if t == "users" && op == "UPDATE" {
				event = "UPDATE OF " + usersAuthColumns
			}
			name := fmt.Sprintf("%s_auth_%s", t, strings.ToLower(op))
			if pg {
				stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %s FOR EACH STATEMENT EXECUTE FUNCTION auth_generation_bump()`, name, event, t))
			} else {
				stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %s BEGIN UPDATE auth_generation SET n = n + 1 WHERE id = 1; END`, name, event, t))
			}
		}
	}
	return exec(ctx, db, stmts)
}

func authGenerationDown(ctx context.Context, db *bun.DB) error {
	var stmts []string
	for _, t := range authTables {
		for _, op := range []string{"insert", "update", "delete"} {
			on := ""
			if db.Dialect().Name() == dialect.PG {
				on = " ON " + t
			}
			stmts = append(stmts, fmt.Sprintf("DROP TRIGGER IF EXISTS %s_auth_%s%s", t, op, on))
		}
	}
	if db.Dialect().Name() == dialect.PG {
		stmts = append(stmts, "DROP FUNCTION IF EXISTS auth_generation_bump()")
	}
	return exec(ctx, db, append(stmts, "DROP TABLE IF EXISTS auth_generation"))
}

// exec runs stmts in one transaction.
func exec(ctx context.Context, db *bun.DB, stmts []string) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%.60s: %w", s, err)
			}
		}
		return nil
	})
}
