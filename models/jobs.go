package models

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/thehub/hub/internal/fault"
	"github.com/thehub/hub/workflows/vocab"
)

// Owner kinds and the ids the API uses for the non-user owners.
const (
	OwnerUser      = "user"
	OwnerSystem    = "system"
	OwnerUnknown   = "unknown"
	OwnerSystemID  = -2
	OwnerUnknownID = -1
)

// Job is one application of a workflow definition to paths on a site.
type Job struct {
	bun.BaseModel `bun:"table:jobs,alias:j"`

	ID                 int64          `bun:"id,pk,autoincrement"`
	Workflow           string         `bun:"workflow"`
	Definition         JobDefinition  `bun:"definition,type:jsonb"`
	Site               string         `bun:"site"`
	SiteID             int64          `bun:"site_id"`
	Queue              string         `bun:"queue"`
	Discovery          *string        `bun:"discovery"`
	Fields             map[string]any `bun:"fields,type:jsonb"`
	Paths              []string       `bun:"paths,type:jsonb"`
	Include            []string       `bun:"include,type:jsonb"`
	Exclude            []string       `bun:"exclude,type:jsonb"`
	IgnoreSiteIncludes bool           `bun:"ignore_site_includes"`
	IgnoreSiteExcludes bool           `bun:"ignore_site_excludes"`
	State              string         `bun:"state"`
	HasFailures        bool           `bun:"has_failures"`
	Created            time.Time      `bun:"created"`
	Started            *time.Time     `bun:"started"`
	Completed          *time.Time     `bun:"completed"`
	Updated            time.Time      `bun:"updated"`
	OwnerType          string         `bun:"owner_type"`
	OwnerID            *int64         `bun:"owner_id"`
	// IdempotencyKey is the client's name for the request that created
	// the job (the Idempotency-Key header): the same owner sending it
	// again gets this job, not a second one.
	IdempotencyKey  *string `bun:"idempotency_key"`
	OwnerName       string  `bun:"owner_name"`
	ClientKeyID     *int64  `bun:"clientkey_id"`
	ClientKeyName   string  `bun:"clientkey_name"`
	ScheduleID      *int64  `bun:"schedule_id"`
	ScheduleName    string  `bun:"schedule_name"`
	PolicyID        *int64  `bun:"policy_id"` // the policy whose run this is
	DirWalkComplete bool    `bun:"dir_walk_complete"`
	SignalSeq       int64   `bun:"signal_seq,notnull"` // the last pause or resume's number (NextSignal)
	// SnapdiffPending is the pending manifest of a snapdiff run that ended
	// with failures: a resubmit that succeeds commits it.
	SnapdiffPending   string `bun:"snapdiff_pending,notnull"`
	IsSettingsJob     bool   `bun:"is_settings_job"`
	FriendlyName      string `bun:"friendly_name"`
	NumFiles          int64  `bun:"numfiles"`
	NumProcessedFiles int64  `bun:"numprocessedfiles"`
	NumFailedFiles    int64  `bun:"numfailedfiles"`
	NumSkippedFiles   int64  `bun:"numskippedfiles"`
	NumAbortedFiles   int64  `bun:"numabortedfiles"`
	NumCancelledFiles int64  `bun:"numcancelledfiles"`
	// NumStats is the number of its job_stats rows (paths with an outcome).
	NumStats int64            `bun:"numstats"`
	Progress float64          `bun:"progress"`
	Run      int              `bun:"run"`
	Leftover []vocab.BatchRef `bun:"leftover,type:jsonb"`
	// Error says why a FAILURE job ended so (nothing could run, or every
	// path failed); empty otherwise.
	Error string `bun:"error"`
	// Version moves on every update of the row (a database trigger; never
	// written by the hub), see RowKey.
	Version int64 `bun:"version,scanonly"`
}

// JobDefinition is the snapshot of a workflow definition a job runs, so
// later edits of the definition never change a running job.
type JobDefinition struct {
	Name             string         `json:"name"`
	Discovery        string         `json:"discovery"`
	DiscoveryOptions map[string]any `json:"discovery_options,omitempty"`
	Fields           map[string]any `json:"fields,omitempty"`
	FilterRules      []FilterRule   `json:"filter_rules"`
	PreferredQueue   string         `json:"preferred_queue,omitempty"`
	// DestSites are the ids of the sites its send and site_sync steps
	// name, by the names given when the job was made: a destination
	// renamed since is still found.
	DestSites map[string]int64 `json:"dest_sites,omitempty"`
	// Policy is the selection a policy's run asks its site for
	// (discovery "policy").
	Policy *PolicyRun `json:"policy,omitempty"`
}

// PolicyRun is what a policy's job asks the site to select: its
// condition groups, order and triggers, and the migration states a file
// may be in to be selected.
type PolicyRun struct {
	ID       int64            `json:"id"`
	Groups   []ConditionGroup `json:"groups"`
	OrderBy  string           `json:"order_by"`
	Reverse  bool             `json:"reverse"`
	Threads  int              `json:"threads"`
	Triggers []PolicyTrigger  `json:"triggers,omitempty"`
	States   []string         `json:"states"`
}

// FilterRule selects entries by type and migration state and names the
// chain of steps applied to them.
type FilterRule struct {
	Type   string     `json:"type"`  // all|file|directory|symlink
	State  string     `json:"state"` // any|resident|premigrated|migrated
	Action []StepSpec `json:"action"`
}

// StepSpec is one step of a rule's action chain.
type StepSpec struct {
	Name   string         `json:"name"`
	Params map[string]any `json:"params,omitempty"`
}

// Task is one batch × step executed at a site.
type Task struct {
	bun.BaseModel `bun:"table:tasks,alias:t"`

	ID           int64          `bun:"id,pk,autoincrement"`
	JobID        int64          `bun:"job_id"`
	Site         string         `bun:"site"`
	Queue        string         `bun:"queue"`
	TaskType     string         `bun:"tasktype"`
	TaskID       string         `bun:"task_id"`
	State        string         `bun:"state"`
	Run          int            `bun:"run"`
	Batch        int            `bun:"batch"`
	Step         int            `bun:"step"`
	NumPaths     int64          `bun:"numpaths"`
	Created      time.Time      `bun:"created"`
	Started      *time.Time     `bun:"started"`
	Completed    *time.Time     `bun:"completed"`
	Result       map[string]any `bun:"result,type:jsonb"`
	FriendlyName string         `bun:"friendly_name"`
	// Version moves on every update of the row (a database trigger; never
	// written by the hub), see RowKey.
	Version int64 `bun:"version,scanonly"`
}

// JobStat is the latest outcome of one path of a job.
type JobStat struct {
	bun.BaseModel `bun:"table:job_stats,alias:js"`

	ID      int64     `bun:"id,pk,autoincrement"`
	JobID   int64     `bun:"job_id"`
	TaskID  *int64    `bun:"task_id"`
	Path    string    `bun:"path"`
	State   string    `bun:"state"`
	Code    string    `bun:"code"`
	Message string    `bun:"message"`
	Updated time.Time `bun:"updated"`
	// Size is the path's logical size in bytes as the site found it
	// (null for outcomes recorded before sizes were).
	Size *int64 `bun:"size"`
	// Version moves on every update of the row (a database trigger; never
	// written by the hub), see RowKey.
	Version int64 `bun:"version,scanonly"`
}

// JobStatCount is the number of a job's latest path outcomes of one
// state and code, and their bytes; kept by RecordOutcomes and
// RefreshJobCounts.
type JobStatCount struct {
	bun.BaseModel `bun:"table:job_stat_counts,alias:jsc"`

	JobID int64  `bun:"job_id,pk"`
	State string `bun:"state,pk"`
	Code  string `bun:"code,pk"`
	N     int64  `bun:"n"`
	Bytes int64  `bun:"bytes"`
}

// JobStatHistory is every outcome a path had, one row per task.
type JobStatHistory struct {
	bun.BaseModel `bun:"table:job_stat_history,alias:jh"`

	ID      int64     `bun:"id,pk,autoincrement"`
	JobID   int64     `bun:"job_id"`
	TaskID  *int64    `bun:"task_id"`
	Path    string    `bun:"path"`
	State   string    `bun:"state"`
	Code    string    `bun:"code"`
	Message string    `bun:"message"`
	Created time.Time `bun:"created"`
}

// CreateJob inserts a PENDING job.
func CreateJob(ctx context.Context, db bun.IDB, j *Job) error {
	now := time.Now().UTC()
	j.Created, j.Updated, j.State = now, now, vocab.JobPending
	if j.Run == 0 {
		j.Run = 1
	}
	_, err := db.NewInsert().Model(j).Exec(ctx)
	return dbErr(err)
}

// FiringStarted tells whether a firing (a Temporal Schedule's workflow ID,
// key) already created a system job: keyed key, or key/… for one of
// several.
func FiringStarted(ctx context.Context, db bun.IDB, key string) (bool, error) {
	// A range rather than LIKE, so that the system keys' index serves it
	// on both databases ("0" follows "/").
	ok, err := db.NewSelect().Model((*Job)(nil)).Where("owner_id IS NULL AND owner_type = ?", OwnerSystem).
		Where("(idempotency_key = ? OR (idempotency_key >= ? AND idempotency_key < ?))", key, key+"/", key+"0").Exists(ctx)
	return ok, dbErr(err)
}

// GetJobByKey loads the job owner created with idempotency key.
func GetJobByKey(ctx context.Context, db bun.IDB, ownerID *int64, key string) (*Job, error) {
	j := new(Job)
	q := db.NewSelect().Model(j).Where("j.idempotency_key = ?", key)
	if ownerID != nil {
		q.Where("j.owner_id = ?", *ownerID)
	} else {
		// The system's jobs (a schedule's or a policy's firings) have
		// no owner id; their keys name the firing.
		q.Where("j.owner_id IS NULL AND j.owner_type = ?", OwnerSystem)
	}
	return j, dbErr(q.Limit(1).Scan(ctx))
}

// GetJob loads a job.
func GetJob(ctx context.Context, db bun.IDB, id int64) (*Job, error) {
	j := new(Job)
	err := db.NewSelect().Model(j).Where("j.id = ?", id).Scan(ctx)
	return j, dbErr(err)
}

// GetJobSite loads the site job j runs on, by id: a site keeps its jobs
// when it is renamed.
func GetJobSite(ctx context.Context, db bun.IDB, j *Job) (*Site, error) {
	s := new(Site)
	err := db.NewSelect().Model(s).Where("s.id = ?", j.SiteID).Scan(ctx)
	return s, dbErr(err)
}

// DeleteJob removes a job with its tasks and stats.
func DeleteJob(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*Job)(nil)).Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}

// MarkCancelling records that a cancel was asked, unless the job has
// already finished (its workflow may have just recorded the final state).
func MarkCancelling(ctx context.Context, db bun.IDB, id int64) error {
	_, err := db.NewUpdate().Model((*Job)(nil)).Where("id = ? AND state NOT IN (?)", id,
		bun.In([]string{vocab.JobSuccess, vocab.JobFailure, vocab.JobCancelled})).Set("state = ?", vocab.JobCancelling).
		Set("updated = ?", time.Now().UTC()).Exec(ctx)
	return dbErr(err)
}

// SetRunningState records state (STARTED, PAUSING or PAUSED), as a job's
// workflow sees it, unless the job is CANCELLING or has ended: a cancel
// recorded by the API while the workflow was starting, pausing or
// resuming is not undone by it (the workflow receives the cancel next).
// A job in such a state, or (run not 0) in another run, is left as it
// is, without an error.
func SetRunningState(ctx context.Context, db bun.IDB, id int64, run int, state string, started bool) error {
	now := time.Now().UTC()
	q := db.NewUpdate().Model((*Job)(nil)).Where("id = ? AND state NOT IN (?)", id,
		bun.In([]string{vocab.JobCancelling, vocab.JobSuccess, vocab.JobFailure, vocab.JobCancelled})).
		Set("state = ?", state).Set("updated = ?", now)
	if run != 0 {
		q.Where("run = ?", run)
	}
	if started {
		q.Set("started = COALESCE(started, ?)", now)
	}
	_, err := q.Exec(ctx)
	return dbErr(err)
}

// JobUpdate is a partial update of a job's state and timestamps.
type JobUpdate struct {
	State           string
	Started         bool // set started to now when unset
	Completed       bool // set completed to now
	DirWalkComplete *bool
	NumFiles        *int64
	HasFailures     *bool
	Run             *int
	Leftover        *[]vocab.BatchRef
	SnapdiffPending *string
	Cancelled       *int64
	Aborted         *int64
	// InRun, when set, applies the update only while the job is in that
	// run (ErrNotFound otherwise).
	InRun int
	// Error records why the job failed ("" clears it). A new run (Run)
	// clears it too.
	Error *string
}

// UpdateJob applies u to job id and touches updated.
func UpdateJob(ctx context.Context, db bun.IDB, id int64, u JobUpdate) error {
	now := time.Now().UTC()
	q := db.NewUpdate().Model((*Job)(nil)).Where("id = ?", id).Set("updated = ?", now)
	if u.InRun != 0 {
		q.Where("run = ?", u.InRun)
	}
	if u.State != "" {
		q.Set("state = ?", u.State)
	}
	if u.Started {
		q.Set("started = COALESCE(started, ?)", now)
	}
	if u.Completed {
		q.Set("completed = ?", now)
	}
	if u.DirWalkComplete != nil {
		q.Set("dir_walk_complete = ?", *u.DirWalkComplete)
	}
	if u.NumFiles != nil {
		q.Set("numfiles = ?", *u.NumFiles)
	}
	if u.HasFailures != nil {
		q.Set("has_failures = ?", *u.HasFailures)
	}
	if u.Run != nil {
		q.Set("run = ?", *u.Run).Set("completed = NULL")
		if u.Error == nil {
			q.Set("error = ''")
		}
	}
	if u.Error != nil {
		q.Set("error = ?", *u.Error)
	}
	if u.Leftover != nil {
		q.Set("leftover = ?", jsonText(*u.Leftover))
	}
	if u.SnapdiffPending != nil {
		q.Set("snapdiff_pending = ?", *u.SnapdiffPending)
	}
	if u.Cancelled != nil {
		q.Set("numcancelledfiles = ?", *u.Cancelled)
	}
	if u.Aborted != nil {
		q.Set("numabortedfiles = ?", *u.Aborted)
	}
	res, err := q.Exec(ctx)
	return affected(res, err)
}

// CreateTask records a task, idempotently by its task_id (the Temporal
// activity id), and returns its row.
func CreateTask(ctx context.Context, db bun.IDB, t *Task) error {
	t.Created = time.Now().UTC()
	if _, err := db.NewInsert().Model(t).On("CONFLICT (task_id) DO NOTHING").Exec(ctx); err != nil {
		return dbErr(err)
	}
	return dbErr(db.NewSelect().Model(t).Where("task_id = ?", t.TaskID).Scan(ctx))
}

// FinishTask sets a task's final state and result.
func FinishTask(ctx context.Context, db bun.IDB, id int64, state string, result map[string]any) error {
	now := time.Now().UTC()
	_, err := db.NewUpdate().Model((*Task)(nil)).Where("id = ?", id).
		Set("state = ?", state).Set("completed = ?", now).Set("started = COALESCE(started, ?)", now).
		Set("result = ?", jsonText(result)).Exec(ctx)
	return dbErr(err)
}

// CancelOpenTasks marks a job's pending and started tasks CANCELLED.
func CancelOpenTasks(ctx context.Context, db bun.IDB, jobID int64) error {
	_, err := db.NewUpdate().Model((*Task)(nil)).Where("job_id = ? AND state IN (?)", jobID, bun.In([]string{vocab.TaskPending, vocab.TaskStarted})).
		Set("state = ?", vocab.TaskCancelled).Set("completed = ?", time.Now().UTC()).Exec(ctx)
	return dbErr(err)
}

// PathOutcome is the outcome of one path in one task.
type PathOutcome struct {
	Path    string
	State   string
	Code    string
	Message string
	Size    int64 // logical bytes of the path (0 for folders, links and unknown)
}

// RecordOutcomes upserts the latest outcome of each path into job_stats and
// appends each to the history, and moves the job's counters and its
// counts by state and code by what these rows changed, in the same
// transaction (so a batch costs its own rows, not a recount of the whole
// job; FinishJob recounts once at the end). It is idempotent per task: a
// retried call leaves the same rows and counts.
// On PostgreSQL rows travel as five arrays into a temporary table (one
// statement), then one upsert.
func RecordOutcomes(ctx context.Context, db *bun.DB, jobID, taskID int64, outs []PathOutcome) error {
	outs = lastPerPath(outs)
	if len(outs) == 0 {
		return nil
	}
	var err error
	if IsPostgres(db) {
		err = recordOutcomesBulk(ctx, db, jobID, taskID, outs)
	} else {
		err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			return recordOutcomesInsert(ctx, tx, jobID, taskID, outs)
		})
	}
	if err != nil {
		return fmt.Errorf("record outcomes of task %d: %w", taskID, err)
	}
	return nil
}

// statGroup is one (state, code) group of a job's latest path outcomes.
type statGroup struct{ state, code string }

// countsDelta is how a batch of outcomes moves a job's counts of each
// group: the paths' new outcomes counted in, the outcomes their rows held
// before counted out.
type countsDelta map[statGroup]JobStatCount

func (d countsDelta) add(state, code string, n, bytes int64) {
	g := statGroup{state, code}
	c := d[g]
	c.N += n
	c.Bytes += bytes
	d[g] = c
}

// countOut subtracts the outcomes of the rows q's query reads (state,
// code, n and bytes).
func (d countsDelta) countOut(ctx context.Context, db bun.IDB, query string, args ...any) error {
	var rows []JobStatCount
	if err := db.NewRaw(query, args...).Scan(ctx, &rows); err != nil {
		return err
	}
	for _, r := range rows {
		d.add(r.State, r.Code, -r.N, -r.Bytes)
	}
	return nil
}

// apply moves the job's counters and progress by d, then its counts of
// each group (in one order). Writers of one job's counts take the job's
// row before its counts (RecordOutcomes on PostgreSQL and
// RefreshJobCounts lock it first; sqlite has one writer at a time).
func (d countsDelta) apply(ctx context.Context, db bun.IDB, jobID int64) error {
	byState := map[string]int64{}
	var rows int64
	groups := make([]JobStatCount, 0, len(d))
	for g, c := range d {
		byState[g.state] += c.N
		rows += c.N
		if c.N != 0 || c.Bytes != 0 {
			groups = append(groups, JobStatCount{JobID: jobID, State: g.state, Code: g.code, N: c.N, Bytes: c.Bytes})
		}
	}
	success, failure, skipped := byState[vocab.TaskSuccess], byState[vocab.TaskFailure], byState[vocab.TaskSkipped]
	_, err := db.NewUpdate().Model((*Job)(nil)).Where("id = ?", jobID).
		Set("numprocessedfiles = numprocessedfiles + ?", success).Set("numfailedfiles = numfailedfiles + ?", failure).
		Set("numskippedfiles = numskippedfiles + ?", skipped).Set("numstats = numstats + ?", rows).
		Set("updated = ?", time.Now().UTC()).
		Set("progress = CASE WHEN numfiles > 0 THEN "+least(db)+"(100.0, 100.0 * (numprocessedfiles + numfailedfiles + numskippedfiles + ?) / numfiles) ELSE progress END",
			success+failure+skipped).
		Exec(ctx)
	if err != nil || len(groups) == 0 {
		return dbErr(err)
	}
	slices.SortFunc(groups, func(a, b JobStatCount) int { return cmp.Or(cmp.Compare(a.State, b.State), cmp.Compare(a.Code, b.Code)) })
	_, err = db.NewInsert().Model(&groups).On("CONFLICT (job_id, state, code) DO UPDATE").
		Set("n = jsc.n + EXCLUDED.n, bytes = jsc.bytes + EXCLUDED.bytes").Exec(ctx)
	return dbErr(err)
}

// least is the two-argument minimum, spelled differently by the two
// databases.
func least(db bun.IDB) string {
	if IsPostgres(db) {
		return "LEAST"
	}
	return "MIN"
}

// lastPerPath keeps the last outcome of each path: one upsert may not
// touch a row twice (PostgreSQL refuses it).
func lastPerPath(outs []PathOutcome) []PathOutcome {
	last := make(map[string]int, len(outs))
	for i, o := range outs {
		last[o.Path] = i
	}
	if len(last) == len(outs) {
		return outs
	}
	kept := make([]PathOutcome, 0, len(last))
	for i, o := range outs {
		if last[o.Path] == i {
			kept = append(kept, o)
		}
	}
	return kept
}

func recordOutcomesInsert(ctx context.Context, tx bun.Tx, jobID, taskID int64, outs []PathOutcome) error {
	now := time.Now().UTC()
	if _, err := tx.NewDelete().Model((*JobStatHistory)(nil)).Where("task_id = ?", taskID).Exec(ctx); err != nil {
		return err
	}
	const chunk = 500 // stays under sqlite's bound-parameter limit
	d := countsDelta{}
	for lo := 0; lo < len(outs); lo += chunk {
		part := outs[lo:min(lo+chunk, len(outs))]
		stats := make([]JobStat, len(part))
		hist := make([]JobStatHistory, len(part))
		paths := make([]string, len(part))
		for i, o := range part {
			paths[i] = o.Path
			d.add(o.State, o.Code, 1, o.Size)
		}
		// One row per path already recorded, counted here: with GROUP BY
		// state, sqlite read the rows through the (job_id, state) index,
		// every row of the job for each chunk (quadratic over a job).
		if err := d.countOut(ctx, tx, `SELECT state, code, 1 AS n, COALESCE(size, 0) AS bytes FROM job_stats WHERE job_id = ? AND path IN (?)`,
			jobID, bun.In(paths)); err != nil {
			return err
		}
		for i, o := range part {
			size := o.Size
			stats[i] = JobStat{JobID: jobID, TaskID: &taskID, Path: o.Path, State: o.State, Code: o.Code, Message: o.Message, Updated: now, Size: &size}
			hist[i] = JobStatHistory{JobID: jobID, TaskID: &taskID, Path: o.Path, State: o.State, Code: o.Code, Message: o.Message, Created: now}
		}
		_, err := tx.NewInsert().Model(&stats).On("CONFLICT (job_id, path) DO UPDATE").
			Set("task_id = EXCLUDED.task_id, state = EXCLUDED.state, code = EXCLUDED.code").
			Set("message = EXCLUDED.message, updated = EXCLUDED.updated, size = EXCLUDED.size").Exec(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(&hist).Exec(ctx); err != nil {
			return err
		}
	}
	fault.Point("outcomes.half-written") // the rows written, not yet counted
	return d.apply(ctx, tx, jobID)
}

func recordOutcomesBulk(ctx context.Context, db *bun.DB, jobID, taskID int64, outs []PathOutcome) error {
	n := len(outs)
	paths, states, codes, messages, sizes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, o := range outs {
		paths[i], states[i], codes[i], messages[i], sizes[i] = o.Path, o.State, o.Code, o.Message, o.Size
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// The job's row first: another batch of the job recording the same
		// paths now would count out the same earlier outcomes (sqlite runs
		// one writer at a time).
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM jobs WHERE id = ? FOR UPDATE`, jobID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE outcomes (path TEXT, state TEXT, code TEXT, message TEXT, size BIGINT) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO outcomes SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[])`,
			pgdialect.Array(paths), pgdialect.Array(states), pgdialect.Array(codes), pgdialect.Array(messages), pgdialect.Array(sizes)); err != nil {
			return err
		}
		d := countsDelta{}
		for _, o := range outs {
			d.add(o.State, o.Code, 1, o.Size)
		}
		if err := d.countOut(ctx, tx, `SELECT js.state, js.code, COUNT(*) AS n, COALESCE(SUM(js.size), 0) AS bytes
			FROM job_stats AS js JOIN outcomes AS o ON o.path = js.path WHERE js.job_id = ? GROUP BY js.state, js.code`, jobID); err != nil {
			return err
		}
		if err := d.apply(ctx, tx, jobID); err != nil {
			return err
		}
		fault.Point("outcomes.half-written") // counted, the rows not yet written
		now := time.Now().UTC()
		if _, err := tx.ExecContext(ctx, `DELETE FROM job_stat_history WHERE task_id = ?`, taskID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_stats (job_id, task_id, path, state, code, message, updated, size)
			SELECT ?, ?, path, state, code, message, ?, size FROM outcomes
			ON CONFLICT (job_id, path) DO UPDATE SET task_id = EXCLUDED.task_id, state = EXCLUDED.state,
			code = EXCLUDED.code, message = EXCLUDED.message, updated = EXCLUDED.updated, size = EXCLUDED.size`, jobID, taskID, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO job_stat_history (job_id, task_id, path, state, code, message, created)
			SELECT ?, ?, path, state, code, message, ? FROM outcomes`, jobID, taskID, now)
		return err
	})
}

// RefreshJobCounts recomputes a job's counts of each (state, code) group,
// its processed, failed and skipped counters and its progress from
// job_stats. Cancelled and aborted paths are counted by batch when the
// job ends (FinishJobRun), since the hub never saw the paths of batches
// that did not run.
func RefreshJobCounts(ctx context.Context, db bun.IDB, jobID int64) error {
	return dbErr(db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if IsPostgres(tx) { // the job's row first, as RecordOutcomes takes it
			if _, err := tx.ExecContext(ctx, `SELECT 1 FROM jobs WHERE id = ? FOR UPDATE`, jobID); err != nil {
				return err
			}
		}
		if _, err := tx.NewDelete().Model((*JobStatCount)(nil)).Where("job_id = ?", jobID).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_stat_counts (job_id, state, code, n, bytes)
			SELECT job_id, state, code, COUNT(*), COALESCE(SUM(size), 0) FROM job_stats WHERE job_id = ? GROUP BY job_id, state, code`, jobID); err != nil {
			return err
		}
		counts, err := JobStatCounts(ctx, tx, jobID)
		if err != nil {
			return err
		}
		c := map[string]int64{}
		var total int64
		for _, g := range counts {
			c[g.State] += g.N
			total += g.N
		}
		done := c[vocab.TaskSuccess] + c[vocab.TaskFailure] + c[vocab.TaskSkipped]
		_, err = tx.NewUpdate().Model((*Job)(nil)).Where("id = ?", jobID).
			Set("numprocessedfiles = ?", c[vocab.TaskSuccess]).Set("numfailedfiles = ?", c[vocab.TaskFailure]).
			Set("numskippedfiles = ?", c[vocab.TaskSkipped]).Set("numstats = ?", total).Set("updated = ?", time.Now().UTC()).
			Set("progress = CASE WHEN numfiles > 0 THEN "+least(tx)+"(100.0, 100.0 * ? / numfiles) ELSE progress END", done).
			Exec(ctx)
		return err
	}))
}

// JobStatCounts returns a job's kept counts of its latest path outcomes,
// one per (state, code) group that has paths.
func JobStatCounts(ctx context.Context, db bun.IDB, jobID int64) ([]JobStatCount, error) {
	var counts []JobStatCount
	err := db.NewSelect().Model(&counts).Where("job_id = ? AND n <> 0", jobID).Scan(ctx)
	return counts, dbErr(err)
}

// jsonText is v as JSON text for a jsonb column in a raw Set: an untyped
// literal that PostgreSQL casts to jsonb and sqlite stores as text.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain data reaches here
	}
	return string(b)
}

// UnfinishedPaths returns up to limit paths of a job whose latest outcome
// is not SUCCESS or SKIPPED, after the given path (keyset paging).
func UnfinishedPaths(ctx context.Context, db bun.IDB, jobID int64, after string, limit int) ([]string, error) {
	var paths []string
	err := db.NewSelect().Model((*JobStat)(nil)).Column("path").
		Where("job_id = ? AND state NOT IN (?) AND path > ?", jobID, bun.In([]string{vocab.TaskSuccess, vocab.TaskSkipped}), after).
		Order("path").Limit(int64(limit)).Scan(ctx, &paths)
	return paths, dbErr(err)
}

// CountUnfinishedJobs counts the jobs of ids that exist and have not ended.
func CountUnfinishedJobs(ctx context.Context, db bun.IDB, ids []int64) (int, error) {
	n, err := db.NewSelect().Model((*Job)(nil)).Where("id IN (?)", bun.In(ids)).
		Where("state NOT IN (?)", bun.In([]string{vocab.JobSuccess, vocab.JobFailure, vocab.JobCancelled})).Count(ctx)
	return int(n), dbErr(err)
}

// NextSignal numbers a pause or resume of job id: each takes the next
// number of its job, so its workflow can apply the last one asked for.
func NextSignal(ctx context.Context, db bun.IDB, id int64) (int64, error) {
	var seq int64
	err := db.NewRaw("UPDATE jobs SET signal_seq = signal_seq + 1 WHERE id = ? RETURNING signal_seq", id).Scan(ctx, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return seq, err
}
