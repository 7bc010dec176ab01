package migrations

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// The jobs list filtered by a site (?site=NAME: the jobs of the site
// called NAME now, by id, and those created while a site was called NAME,
// by the name a job keeps) reads each half from an index in the list's
// order, finds their owners through an index of each half's owners, and
// counts its jobs from job_site_counts, which keeps the number
// of jobs of each (site_id, site) pair, moved by triggers as row_counts
// is. A pair's row stays, at 0, after its last job goes: a site's few
// names, never read again once its id is gone (ids are not reused).
func registerJobSiteCounts(ms *migrate.Migrations) {
	ms.MustRegister(func(ctx context.Context, db *bun.DB) error {
		stmts := []string{
			`DROP INDEX jobs_site_created`,
			`CREATE INDEX jobs_site_created_id ON jobs (site_id, created, id, version)`,
			`CREATE INDEX jobs_site_name_created_id ON jobs (site, created, id, version)`,
			`CREATE INDEX jobs_site_owner ON jobs (site_id, owner_type, owner_id)`,
			`CREATE INDEX jobs_site_name_owner ON jobs (site, owner_type, owner_id)`,
			`CREATE TABLE job_site_counts (site_id BIGINT NOT NULL, site TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (site_id, site))`,
			`CREATE INDEX job_site_counts_site ON job_site_counts (site)`,
		}
		if db.Dialect().Name() == dialect.PG {
			// move adds counts (a select of site_id, site and n) to the
			// pairs' rows after locking the jobs' own count, as the state
			// counts do (20261126020000): writers of many pairs wait for
			// one another there, never holding one pair while waiting for
			// another. Made before the rows are counted, so none is missed.
			move := func(counts string) string {
				return `PERFORM 1 FROM row_counts WHERE name = 'jobs' FOR UPDATE;
	INSERT INTO job_site_counts (site_id, site, n) ` + counts + `
		ON CONFLICT (site_id, site) DO UPDATE SET n = job_site_counts.n + EXCLUDED.n`
			}
			for _, t := range []struct{ name, event, moved string }{
				{"jobs_site_count_insert", "INSERT ON jobs REFERENCING NEW TABLE AS changed FOR EACH STATEMENT",
					move(`SELECT site_id, site, COUNT(*) FROM changed GROUP BY site_id, site`)},
				{"jobs_site_count_delete", "DELETE ON jobs REFERENCING OLD TABLE AS changed FOR EACH STATEMENT",
					move(`SELECT site_id, site, -COUNT(*) FROM changed GROUP BY site_id, site`)},
				{"jobs_site_count_update", "UPDATE OF site_id, site ON jobs FOR EACH ROW WHEN (OLD.site_id IS DISTINCT FROM NEW.site_id OR OLD.site IS DISTINCT FROM NEW.site)",
					move(`VALUES (OLD.site_id, OLD.site, -1), (NEW.site_id, NEW.site, 1)`)},
				{"jobs_site_count_truncate", "TRUNCATE ON jobs FOR EACH STATEMENT", `DELETE FROM job_site_counts`},
			} {
				stmts = append(stmts, pgTrigger(t.name, t.event, t.moved)...)
			}
		} else {
			add := `INSERT INTO job_site_counts (site_id, site, n) VALUES (NEW.site_id, NEW.site, 1) ON CONFLICT (site_id, site) DO UPDATE SET n = n + 1;`
			sub := `UPDATE job_site_counts SET n = n - 1 WHERE site_id = OLD.site_id AND site = OLD.site;`
			stmts = append(stmts,
				`CREATE TRIGGER jobs_site_count_insert AFTER INSERT ON jobs BEGIN `+add+` END`,
				`CREATE TRIGGER jobs_site_count_delete AFTER DELETE ON jobs BEGIN `+sub+` END`,
				`CREATE TRIGGER jobs_site_count_update AFTER UPDATE OF site_id, site ON jobs
					WHEN OLD.site_id IS NOT NEW.site_id OR OLD.site IS NOT NEW.site BEGIN `+sub+` `+add+` END`)
		}
		return exec(ctx, db, append(stmts, `INSERT INTO job_site_counts (site_id, site, n) SELECT site_id, site, COUNT(*) FROM jobs GROUP BY site_id, site`))
	}, func(ctx context.Context, db *bun.DB) error {
		stmts := dropTriggers(db, "jobs", "jobs_site_count", "insert", "delete", "update", "truncate")
		return exec(ctx, db, append(stmts, `DROP TABLE job_site_counts`,
			`DROP INDEX jobs_site_name_owner`,
			`DROP INDEX jobs_site_owner`,
			`DROP INDEX jobs_site_name_created_id`,
			`DROP INDEX jobs_site_created_id`,
			`CREATE INDEX jobs_site_created ON jobs (site_id, created)`))
	})
}
