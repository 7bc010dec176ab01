package migrations

import (
	"context"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"github.com/uptrace/bun/migrate"
)

// The jobs summary (GET /api/jobs/stats/ without filters) adds up the file
// counters of every job. A finished job's counters seldom move, so their
// sums for each finished state are kept in job_state_sums, moved by
// triggers when a job is inserted or deleted in a finished state, enters
// or leaves one, or has its counters changed while in one; the summary
// adds the unfinished jobs (few, read through the state index) to them.
// The update of a running job's counters, one per batch of its paths,
// moves nothing.
func registerJobStateSums(ms *migrate.Migrations) {
	ms.MustRegister(func(ctx context.Context, db *bun.DB) error {
		cols := strings.Join(summedColumns, ", ")
		var summed []string // SUM(c) of each
		for _, c := range summedColumns {
			summed = append(summed, "SUM("+c+")")
		}
		sums := strings.Join(summed, ", ")
		// values is the summed columns of one job (OLD or NEW), signed.
		values := func(row, sign string) string {
			v := []string{sign + "(CASE WHEN " + row + ".has_failures THEN 1 ELSE 0 END)"}
			for _, c := range summedColumns[1:] {
				v = append(v, sign+row+"."+c)
			}
			return strings.Join(v, ", ")
		}
		var added []string
		for _, c := range summedColumns {
			added = append(added, c+" = job_state_sums."+c+" + EXCLUDED."+c)
		}
		upsert := `INSERT INTO job_state_sums (state, ` + cols + `) %s ON CONFLICT (state) DO UPDATE SET ` + strings.Join(added, ", ")
		stmts := []string{`CREATE TABLE job_state_sums (state TEXT PRIMARY KEY, has_failures BIGINT NOT NULL,
			numfiles BIGINT NOT NULL, numprocessedfiles BIGINT NOT NULL, numfailedfiles BIGINT NOT NULL,
			numskippedfiles BIGINT NOT NULL, numabortedfiles BIGINT NOT NULL, numcancelledfiles BIGINT NOT NULL)`}
		if db.Dialect().Name() == dialect.PG {
			// move adds sums (a select of state and the summed columns)
			// after locking the jobs' own count, as the state counts'
			// triggers do (20261126020000), so that writers of several
			// states' sums never wait for one another holding one of them.
			move := func(sums string) string {
				return `PERFORM 1 FROM row_counts WHERE name = 'jobs' FOR UPDATE;
	` + strings.Replace(upsert, "%s", sums, 1)
			}
			grouped := func(sign string) string {
				v := []string{"SUM(CASE WHEN has_failures THEN " + sign + "1 ELSE 0 END)"}
				for _, c := range summedColumns[1:] {
					v = append(v, "SUM("+sign+c+")")
				}
				return `SELECT state, ` + strings.Join(v, ", ") + ` FROM changed WHERE state IN ` + finishedStates + ` GROUP BY state`
			}
			var changed []string
			for _, c := range append([]string{"state"}, summedColumns...) {
				changed = append(changed, "OLD."+c+" IS DISTINCT FROM NEW."+c)
			}
			for _, t := range []struct{ name, event, moved string }{
				{"jobs_state_sums_insert", "INSERT ON jobs REFERENCING NEW TABLE AS changed FOR EACH STATEMENT", move(grouped(""))},
				{"jobs_state_sums_delete", "DELETE ON jobs REFERENCING OLD TABLE AS changed FOR EACH STATEMENT", move(grouped("-"))},
				{"jobs_state_sums_update", "UPDATE OF state, " + cols + " ON jobs FOR EACH ROW WHEN ((OLD.state IN " + finishedStates +
					" OR NEW.state IN " + finishedStates + ") AND (" + strings.Join(changed, " OR ") + "))",
					move(`SELECT state, ` + sums + ` FROM (SELECT OLD.state, ` + values("OLD", "-") + ` WHERE OLD.state IN ` + finishedStates +
						` UNION ALL SELECT NEW.state, ` + values("NEW", "") + ` WHERE NEW.state IN ` + finishedStates + `) AS d (state, ` + cols +
						`) GROUP BY state ORDER BY state`)},
				{"jobs_state_sums_truncate", "TRUNCATE ON jobs FOR EACH STATEMENT", `DELETE FROM job_state_sums`},
			} {
				stmts = append(stmts, pgTrigger(t.name, t.event, t.moved)...)
			}
		} else {
			add := strings.Replace(upsert, "%s", `SELECT NEW.state, `+values("NEW", "")+` WHERE NEW.state IN `+finishedStates, 1) + ";"
			sub := strings.Replace(upsert, "%s", `SELECT OLD.state, `+values("OLD", "-")+` WHERE OLD.state IN `+finishedStates, 1) + ";"
			stmts = append(stmts,
				`CREATE TRIGGER jobs_state_sums_insert AFTER INSERT ON jobs WHEN NEW.state IN `+finishedStates+` BEGIN `+add+` END`,
				`CREATE TRIGGER jobs_state_sums_delete AFTER DELETE ON jobs WHEN OLD.state IN `+finishedStates+` BEGIN `+sub+` END`,
				`CREATE TRIGGER jobs_state_sums_update AFTER UPDATE OF state, `+cols+` ON jobs
					WHEN OLD.state IN `+finishedStates+` OR NEW.state IN `+finishedStates+` BEGIN `+sub+` `+add+` END`)
		}
		return exec(ctx, db, append(stmts, `INSERT INTO job_state_sums (state, `+cols+`)
			SELECT state, SUM(CASE WHEN has_failures THEN 1 ELSE 0 END), `+strings.Join(summed[1:], ", ")+`
			FROM jobs WHERE state IN `+finishedStates+` GROUP BY state`))
	}, func(ctx context.Context, db *bun.DB) error {
		return exec(ctx, db, append(dropTriggers(db, "jobs", "jobs_state_sums", "insert", "delete", "update", "truncate"),
			`DROP TABLE job_state_sums`))
	})
}

// summedColumns are the job_state_sums columns: the number of jobs with
// failed paths, then the jobs' file counters of the same names.
var summedColumns = []string{"has_failures", "numfiles", "numprocessedfiles", "numfailedfiles", "numskippedfiles",
	"numabortedfiles", "numcancelledfiles"}

// finishedStates are the states a job ends in (vocab.JobFinished).
const finishedStates = `('SUCCESS', 'FAILURE', 'CANCELLED')`
