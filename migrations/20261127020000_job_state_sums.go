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
		// grouped sums the columns of from's jobs in finished states by
		// state, each value after sign ("-", or an expression and "*").
		grouped := func(from, sign string) string {
			v := []string{"SUM(CASE WHEN has_failures THEN " + sign + "1 ELSE 0 END)"}
			for _, c := range summedColumns[1:] {
				v = append(v, "SUM("+sign+c+")")
			}
			return `SELECT state, ` + strings.Join(v, ", ") + ` FROM ` + from + ` WHERE state IN ` + finishedStates + ` GROUP BY state`
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
			for _, t := range []struct{ name, event, moved string }{
				{"jobs_state_sums_insert", "INSERT ON jobs REFERENCING NEW TABLE AS changed FOR EACH STATEMENT", move(grouped("changed", ""))},
				{"jobs_state_sums_delete", "DELETE ON jobs REFERENCING OLD TABLE AS changed FOR EACH STATEMENT", move(grouped("changed", "-"))},
				// A statement trigger, unlike the state counts': a row
				// trigger moving one sums row a million times in one
				// transaction (an update of every job) took minutes. It
				// fires on every update of jobs (transition tables cannot
				// be limited to some columns) and moves the sums only when
				// a finished job is among the rows.
				{"jobs_state_sums_update", "UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT",
					`IF EXISTS (SELECT 1 FROM old_rows WHERE state IN ` + finishedStates + `)
		OR EXISTS (SELECT 1 FROM new_rows WHERE state IN ` + finishedStates + `) THEN
		` + move(grouped(`(SELECT state, `+cols+`, -1 FROM old_rows UNION ALL SELECT state, `+cols+`, 1 FROM new_rows) AS d (state, `+cols+`, sign)`,
						"sign * ")+` ORDER BY state`) + `;
	END IF`},
				{"jobs_state_sums_truncate", "TRUNCATE ON jobs FOR EACH STATEMENT", `DELETE FROM job_state_sums`},
			} {
				stmts = append(stmts, pgTrigger(t.name, t.event, t.moved)...)
			}
		} else {
			// values is the summed columns of one job (OLD or NEW), signed.
			values := func(row, sign string) string {
				v := []string{sign + "(CASE WHEN " + row + ".has_failures THEN 1 ELSE 0 END)"}
				for _, c := range summedColumns[1:] {
					v = append(v, sign+row+"."+c)
				}
				return strings.Join(v, ", ")
			}
			add := strings.Replace(upsert, "%s", `SELECT NEW.state, `+values("NEW", "")+` WHERE NEW.state IN `+finishedStates, 1) + ";"
			sub := strings.Replace(upsert, "%s", `SELECT OLD.state, `+values("OLD", "-")+` WHERE OLD.state IN `+finishedStates, 1) + ";"
			stmts = append(stmts,
				`CREATE TRIGGER jobs_state_sums_insert AFTER INSERT ON jobs WHEN NEW.state IN `+finishedStates+` BEGIN `+add+` END`,
				`CREATE TRIGGER jobs_state_sums_delete AFTER DELETE ON jobs WHEN OLD.state IN `+finishedStates+` BEGIN `+sub+` END`,
				`CREATE TRIGGER jobs_state_sums_update AFTER UPDATE OF state, `+cols+` ON jobs
					WHEN OLD.state IN `+finishedStates+` OR NEW.state IN `+finishedStates+` BEGIN `+sub+` `+add+` END`)
		}
		return exec(ctx, db, append(stmts, strings.Replace(upsert, "%s", grouped("jobs", ""), 1)))
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
