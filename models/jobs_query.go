package models

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// JobStates are the stored job states, in the order lists show them.
var JobStates = []string{vocab.JobPending, vocab.JobStarted, vocab.JobPausing, vocab.JobPaused, vocab.JobCancelling, vocab.JobCancelled, vocab.JobSuccess, vocab.JobFailure}

// TaskStates are the states a task can have.
var TaskStates = []string{vocab.TaskPending, vocab.TaskStarted, vocab.TaskSuccess, vocab.TaskFailure, vocab.TaskError, vocab.TaskSkipped, vocab.TaskCancelled}

// PathStates are the states a path outcome (job stat) can have.
var PathStates = []string{vocab.TaskPending, vocab.TaskStarted, vocab.TaskSuccess, vocab.TaskFailure, vocab.TaskError, vocab.TaskSkipped, vocab.TaskCancelled, vocab.PathAborted}

// TaskDiscovery is the tasktype of the task the hub records for paths
// that failed during discovery; it is no step of the workflow definition.
const TaskDiscovery = "discovery"

// JobFilter selects jobs for the jobs list, stats and recent endpoints.
// Zero values select everything.
type JobFilter struct {
	Created, Completed TimeRange
	Workflow           []string // exact names; all must match (jobtype and workflow)
	States             []string // stored states, or vocab.JobHasFailures
	OwnerIDs           []int64  // user ids, OwnerUnknownID, OwnerSystemID
	ClientKeyIDs       []int64
	ScheduleIDs        []int64
	SiteID             *int64
	Site               string // a site's name, now or when the job was created (see ResolveSite)
	InputPathsPrefix   string
	SearchKeyword      string
	HideNoop           bool
	Queue              string
	QueueID            *int64

	site *siteNow // the site Site names now, once ResolveSite looked
}

// IsZero tells whether f filters nothing: it matches every job.
func (f JobFilter) IsZero() bool { return reflect.ValueOf(f).IsZero() }

// siteNow is what ResolveSite found: the id of the site called Site now,
// if any.
type siteNow struct {
	id    int64
	found bool
}

// ResolveSite looks up, once, the site f.Site names now, so that the
// statements that follow name its id by value rather than by a subquery:
// PostgreSQL plans a condition on a subquery's value without knowing the
// value (a small site's jobs are then read as if the site had half of
// them, every owner's jobs scanned to find none), on a value from its
// statistics.
func (f *JobFilter) ResolveSite(ctx context.Context, db bun.IDB) error {
	if f.Site == "" {
		return nil
	}
	var ids []int64
	if err := db.NewSelect().Table("sites").Column("id").Where("name = ?", f.Site).Scan(ctx, &ids); err != nil {
		return dbErr(err)
	}
	f.site = &siteNow{}
	if len(ids) > 0 {
		f.site.id, f.site.found = ids[0], true
	}
	return nil
}

// siteNowCond is the condition, on jobs aliased alias, that a job's site
// is called f.Site now (a job keeps its site by id across a rename), with
// its arguments.
func (f *JobFilter) siteNowCond(alias string) (string, []any) {
	switch {
	case f.site == nil:
		return alias + ".site_id = (SELECT s.id FROM sites AS s WHERE s.name = ?)", []any{f.Site}
	case f.site.found:
		return alias + ".site_id = ?", []any{f.site.id}
	}
	return alias + ".site_id IS NULL", nil // none: site_id is never NULL
}

// TimeRange bounds a timestamp column; nil bounds are open. To is
// inclusive unless ToExclusive (a date-only bound means "before the next
// day").
type TimeRange struct {
	From, To    *time.Time
	ToExclusive bool
}

func (r TimeRange) apply(q *bun.SelectQuery, col string) {
	if r.From != nil {
		q.Where(col+" >= ?", r.From.UTC())
	}
	switch {
	case r.To != nil && r.ToExclusive:
		q.Where(col+" < ?", r.To.UTC())
	case r.To != nil:
		q.Where(col+" <= ?", r.To.UTC())
	}
}

// apply adds f's conditions to q, a query over jobs aliased j.
func (f *JobFilter) apply(db bun.IDB, q *bun.SelectQuery) *bun.SelectQuery {
	f.Created.apply(q, "j.created")
	f.Completed.apply(q, "j.completed")
	for _, w := range f.Workflow {
		q.Where("j.workflow = ?", w)
	}
	if len(f.States) > 0 {
		var plain []string
		hasFailures := false
		for _, s := range f.States {
			if s == vocab.JobHasFailures {
				hasFailures = true
			} else {
				plain = append(plain, s)
			}
		}
		q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			if len(plain) > 0 {
				q.WhereOr("j.state IN (?)", bun.In(plain))
			}
			if hasFailures {
				q.WhereOr("(j.state = ? AND j.has_failures = ?)", vocab.JobSuccess, true)
			}
			return q
		})
	}
	if len(f.OwnerIDs) > 0 {
		var users []int64
		var system, unknown bool
		for _, id := range f.OwnerIDs {
			switch id {
			case OwnerSystemID:
				system = true
			case OwnerUnknownID:
				unknown = true
			default:
				users = append(users, id)
			}
		}
		q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			if len(users) > 0 {
				q.WhereOr("(j.owner_type = ? AND j.owner_id IN (?))", OwnerUser, bun.In(users))
			}
			if system {
				q.WhereOr("j.owner_type = ?", OwnerSystem)
			}
			if unknown {
				q.WhereOr("j.owner_type = ?", OwnerUnknown)
			}
			return q
		})
	}
	if len(f.ClientKeyIDs) > 0 {
		q.Where("j.clientkey_id IN (?)", bun.In(f.ClientKeyIDs))
	}
	if len(f.ScheduleIDs) > 0 {
		q.Where("j.schedule_id IN (?)", bun.In(f.ScheduleIDs))
	}
	if f.SiteID != nil {
		q.Where("j.site_id = ?", *f.SiteID)
	}
	if f.Site != "" {
		cond, args := f.siteNowCond("j")
		q.Where("("+cond+" OR j.site = ?)", append(args, f.Site)...)
	}
	if f.InputPathsPrefix != "" {
		// Compare a prefix of each element of the JSON array exactly: LIKE
		// would need escaping, and sqlite's LIKE ignores ASCII case.
		n := utf8.RuneCountInString(f.InputPathsPrefix)
		if IsPostgres(db) {
			q.Where(`EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(j.paths) = 'array' THEN j.paths ELSE '[]'::jsonb END) AS ip(v)
				WHERE substr(ip.v, 1, ?) = ?)`, n, f.InputPathsPrefix)
		} else {
			q.Where(`EXISTS (SELECT 1 FROM json_each(CASE WHEN json_type(j.paths) = 'array' THEN j.paths ELSE '[]' END) AS ip
				WHERE substr(ip.value, 1, ?) = ?)`, n, f.InputPathsPrefix)
		}
	}
	if f.SearchKeyword != "" {
		// A position search instead of LIKE needs no escaping of % and _.
		pos := "instr(lower(%s), lower(?)) > 0"
		if IsPostgres(db) {
			pos = "strpos(lower(%s), lower(?)) > 0"
		}
		kw := f.SearchKeyword
		q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			for _, col := range []string{"j.workflow", "j.site", "j.friendly_name", "j.owner_name"} {
				q.WhereOr(fmt.Sprintf(pos, col), kw)
			}
			return q
		})
	}
	if f.HideNoop {
		q.Where("NOT (j.state = ? AND j.numfiles = 0)", vocab.JobSuccess)
	}
	if f.Queue != "" {
		q.Where("j.queue = ?", f.Queue)
	}
	if f.QueueID != nil {
		// A queue is a name within a site: match both.
		q.Where("EXISTS (SELECT 1 FROM queues AS qu WHERE qu.id = ? AND qu.name = j.queue AND qu.site_id = j.site_id)", *f.QueueID)
	}
	return q
}

// siteNamed is the condition, on jobs aliased alias, that a job's site is
// called name (two arguments: name twice): now, as the job keeps its site
// by id across a rename, or when the job was created.
func siteNamed(alias string) string {
	return "(" + alias + ".site_id IN (SELECT s.id FROM sites AS s WHERE s.name = ?) OR " + alias + ".site = ?)"
}

// JobsQuery selects the jobs matching f into dest, newest first.
func JobsQuery(db bun.IDB, dest any, f JobFilter) *bun.SelectQuery {
	q := db.NewSelect().Model(dest)
	return f.apply(db, q).Order("j.created DESC", "j.id DESC")
}

// Window is one page of a list in its order: Limit rows (0: every row)
// after the first Offset, or, FromEnd, the Limit rows before the last
// Offset. A page past the middle of a list is read from its end, so that
// the last page skips no more rows than the first.
type Window struct {
	Limit, Offset int
	FromEnd       bool
}

// windowIDs orders ids (a select of one table's ids, maybe filtered) by
// cols, ascending or (desc) descending, and keeps window w of them. With
// an index on cols (after the filter's equality columns), the rows skipped
// are index entries, never whole rows, and none is sorted; from the end,
// the same index is read backwards.
func windowIDs(ids *bun.SelectQuery, w Window, desc bool, cols ...string) *bun.SelectQuery {
	dir := " ASC"
	if desc != w.FromEnd {
		dir = " DESC"
	}
	for _, c := range cols {
		ids.OrderExpr(c + dir)
	}
	return ids.Limit(int64(w.Limit)).Offset(int64(w.Offset))
}

// CountJobs is the number of jobs matching f: kept by the database for
// every job (CountAllJobs), for the jobs of one state and for those of
// one site (by id or by name), counted otherwise.
func CountJobs(ctx context.Context, db bun.IDB, f JobFilter) (int, error) {
	if f.Empty() {
		return CountAllJobs(ctx, db)
	}
	if s := f.onlyState(); s != "" {
		return keptCount(ctx, db, "jobs:state:"+s)
	}
	if f.onlySite() {
		return countJobsOfSite(ctx, db, f)
	}
	n, err := f.apply(db, db.NewSelect().TableExpr("jobs AS j")).Count(ctx)
	return int(n), dbErr(err)
}

// JobOwner is one distinct owner of a set of jobs; System and Unknown
// have the ids OwnerSystemID and OwnerUnknownID.
type JobOwner struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// JobOwners returns the distinct owners of the jobs matching f: users by
// name, then System, then Unknown. The users are read from the jobs_owner
// index by jumping from one owner to the next (a loose index scan written
// as a recursive query: a few index probes per owner, whatever the number
// of jobs), each kept when one of their jobs matches f; a user's name is
// the latest-sorting name on any of their jobs. Nothing groups or sorts
// the matching jobs, which may be millions.
func JobOwners(ctx context.Context, db bun.IDB, f JobFilter) ([]JobOwner, error) {
	// exists is "some job matching f meets cond", cond being an index
	// range of owners, read through an index of the owners, so that an
	// owner without jobs costs one probe (sqlite, without statistics,
	// would rather scan every job of a state the filter names): of all
	// jobs (jobs_owner), or, when f names a site, of its jobs by id and
	// by name (jobs_site_owner, jobs_site_name_owner), so that an owner
	// of many jobs elsewhere costs a probe too.
	jobs := func(index string) string {
		if IsPostgres(db) {
			return "jobs AS j"
		}
		return "jobs AS j INDEXED BY " + index
	}
	probe := func(f JobFilter, index, cond string, args []any) string {
		return "EXISTS (" + f.apply(db, db.NewSelect().TableExpr(jobs(index)).ColumnExpr("1").Where(cond, args...)).String() + ")"
	}
	exists := func(cond string, args ...any) bun.Safe {
		switch {
		case f.Site != "":
			rest := f.butSite()
			now, nowArgs := f.siteNowCond("j")
			return bun.Safe("(" + probe(rest, "jobs_site_owner", cond+" AND "+now, append(slices.Clone(args), nowArgs...)) + " OR " +
				probe(rest, "jobs_site_name_owner", cond+" AND j.site = ?", append(slices.Clone(args), f.Site)) + ")")
		case f.SiteID != nil:
			return bun.Safe(probe(f, "jobs_site_owner", cond, args))
		}
		return bun.Safe(probe(f, "jobs_owner", cond, args))
	}
	// One statement, one round trip: the users, then a row for the
	// system and one for the unknown when they own a matching job.
	// Anything but a user with an id or the system is unknown: the owner
	// types below, between and above the two, each an index range.
	var rows []struct {
		Kind string  `bun:"kind"`
		ID   *int64  `bun:"id"`
		Name *string `bun:"name"`
	}
	err := db.NewRaw(`WITH RECURSIVE u(id) AS (
		SELECT MIN(owner_id) FROM jobs WHERE owner_type = ?0
		UNION ALL
		SELECT (SELECT MIN(j.owner_id) FROM jobs j WHERE j.owner_type = ?0 AND j.owner_id > u.id) FROM u WHERE u.id IS NOT NULL
	)
	SELECT 'user' AS kind, u.id, (SELECT MAX(j.owner_name) FROM jobs j WHERE j.owner_type = ?0 AND j.owner_id = u.id) AS name
	FROM u WHERE u.id IS NOT NULL AND ?1
	UNION ALL SELECT 'system', NULL, NULL WHERE ?2
	UNION ALL SELECT 'unknown', NULL, NULL WHERE ?3 OR ?4 OR ?5 OR ?6`,
		OwnerUser, exists("j.owner_type = ? AND j.owner_id = u.id", OwnerUser), exists("j.owner_type = ?", OwnerSystem),
		exists("j.owner_type < ?", OwnerSystem), exists("j.owner_type > ? AND j.owner_type < ?", OwnerSystem, OwnerUser),
		exists("j.owner_type > ?", OwnerUser), exists("j.owner_type = ? AND j.owner_id IS NULL", OwnerUser)).Scan(ctx, &rows)
	if err != nil {
		return nil, dbErr(err)
	}
	var users []JobOwner
	var system, unknown bool
	for _, r := range rows {
		switch {
		case r.Kind == "system":
			system = true
		case r.Kind == "unknown":
			unknown = true
		case r.ID != nil && r.Name != nil:
			users = append(users, JobOwner{Type: OwnerUser, ID: *r.ID, Name: *r.Name})
		}
	}
	return ownersList(users, system, unknown), nil
}

// ownersList orders the owners as the API lists them: users by name,
// then System, then Unknown.
func ownersList(users []JobOwner, system, unknown bool) []JobOwner {
	sort.Slice(users, func(a, b int) bool {
		if users[a].Name != users[b].Name {
			return users[a].Name < users[b].Name
		}
		return users[a].ID < users[b].ID
	})
	out := append([]JobOwner{}, users...)
	if system {
		out = append(out, JobOwner{Type: OwnerSystem, ID: OwnerSystemID, Name: "System"})
	}
	if unknown {
		out = append(out, JobOwner{Type: OwnerUnknown, ID: OwnerUnknownID, Name: "Unknown"})
	}
	return out
}

// JobFileCounts sums the per-file counters of jobs.
type JobFileCounts struct {
	NumFiles          int64 `json:"numfiles" bun:"numfiles"`
	NumProcessedFiles int64 `json:"numprocessedfiles" bun:"numprocessedfiles"`
	NumFailedFiles    int64 `json:"numfailedfiles" bun:"numfailedfiles"`
	NumSkippedFiles   int64 `json:"numskippedfiles" bun:"numskippedfiles"`
	NumAbortedFiles   int64 `json:"numabortedfiles" bun:"numabortedfiles"`
	NumCancelledFiles int64 `json:"numcancelledfiles" bun:"numcancelledfiles"`
}

// JobSummary aggregates the jobs matching a filter.
type JobSummary struct {
	Count       int64            `json:"count"`
	ByState     map[string]int64 `json:"by_state"`     // every stored state, zeros included
	HasFailures int64            `json:"has_failures"` // SUCCESS jobs with failed paths
	Files       JobFileCounts    `json:"files"`
}

// jobCounterColumns are the jobs' file counters the summary adds up.
var jobCounterColumns = []string{"numfiles", "numprocessedfiles", "numfailedfiles", "numskippedfiles", "numabortedfiles", "numcancelledfiles"}

// summaryColumns is, for jobs j grouped by state, each state's number of
// jobs, of SUCCESS jobs with failed paths and the sums of their counters.
var summaryColumns = func() string {
	// SUM of BIGINT is NUMERIC on PostgreSQL: cast back so both dialects scan alike.
	cols := []string{"j.state, COUNT(*) AS n", "CAST(COALESCE(SUM(CASE WHEN j.has_failures THEN 1 ELSE 0 END), 0) AS BIGINT) AS has_failures"}
	for _, col := range jobCounterColumns {
		cols = append(cols, fmt.Sprintf("CAST(COALESCE(SUM(j.%[1]s), 0) AS BIGINT) AS %[1]s", col))
	}
	return strings.Join(cols, ", ")
}()

// keptSummary is the summary of every job in one statement: the finished
// states' numbers of jobs (row_counts) and sums (job_state_sums), and the
// unfinished jobs grouped by state.
var keptSummary = func() string {
	var finished, unfinished []string
	for _, st := range JobStates {
		if vocab.JobFinished(st) {
			finished = append(finished, "'jobs:state:"+st+"'")
		} else {
			unfinished = append(unfinished, "'"+st+"'")
		}
	}
	zeros := ", 0 AS has_failures"
	for _, col := range jobCounterColumns {
		zeros += ", 0 AS " + col
	}
	return `SELECT substr(name, ` + fmt.Sprint(len("jobs:state:")+1) + `) AS state, n` + zeros + ` FROM row_counts
		WHERE name IN (` + strings.Join(finished, ", ") + `)
		UNION ALL SELECT state, 0, has_failures, ` + strings.Join(jobCounterColumns, ", ") + ` FROM job_state_sums
		UNION ALL SELECT ` + summaryColumns + ` FROM jobs AS j WHERE j.state IN (` + strings.Join(unfinished, ", ") + `) GROUP BY j.state`
}()

// SummarizeJobs counts the jobs matching f by state and sums their file
// counters, in one statement. Of every job (no filter) it reads the
// numbers kept by the database: each state's number of jobs (row_counts)
// and the sums of the finished jobs' counters (job_state_sums), and adds
// the unfinished jobs' counters, read through the state index.
func SummarizeJobs(ctx context.Context, db bun.IDB, f JobFilter) (*JobSummary, error) {
	var rows []struct {
		State       string `bun:"state"`
		N           int64  `bun:"n"`
		HasFailures int64  `bun:"has_failures"`
		JobFileCounts
	}
	var err error
	if f.Empty() {
		err = db.NewRaw(keptSummary).Scan(ctx, &rows)
	} else {
		err = f.apply(db, db.NewSelect().Model((*Job)(nil)).ColumnExpr(summaryColumns)).Group("j.state").Scan(ctx, &rows)
	}
	if err != nil {
		return nil, dbErr(err)
	}
	s := &JobSummary{ByState: map[string]int64{}}
	for _, st := range JobStates {
		s.ByState[st] = 0
	}
	for _, r := range rows {
		s.Count += r.N
		s.ByState[r.State] += r.N
		if r.State == vocab.JobSuccess {
			s.HasFailures += r.HasFailures
		}
		s.Files.NumFiles += r.NumFiles
		s.Files.NumProcessedFiles += r.NumProcessedFiles
		s.Files.NumFailedFiles += r.NumFailedFiles
		s.Files.NumSkippedFiles += r.NumSkippedFiles
		s.Files.NumAbortedFiles += r.NumAbortedFiles
		s.Files.NumCancelledFiles += r.NumCancelledFiles
	}
	return s, nil
}

// JobStatistics counts a job's latest path outcomes and its tasks.
type JobStatistics struct {
	Files       int64 // paths with an outcome
	ByState     map[string]int64
	ByCode      map[string]int64
	Tasks       int64
	TaskByState map[string]int64
	TaskByType  map[string]int64
	// Bytes adds up the logical sizes of those paths; BytesByState by
	// their latest state.
	Bytes        int64
	BytesByState map[string]int64
}

type groupCount struct {
	Key string `bun:"k"`
	N   int64  `bun:"n"`
}

func countBy(ctx context.Context, db bun.IDB, model any, col string, jobID int64) (map[string]int64, int64, error) {
	var rows []groupCount
	err := db.NewSelect().Model(model).ColumnExpr("? AS k, COUNT(*) AS n", bun.Ident(col)).
		Where("job_id = ?", jobID).GroupExpr("?", bun.Ident(col)).Scan(ctx, &rows)
	if err != nil {
		return nil, 0, dbErr(err)
	}
	out := map[string]int64{}
	var total int64
	for _, r := range rows {
		out[r.Key] = r.N
		total += r.N
	}
	return out, total, nil
}

// GetJobStatistics counts job jobID's latest path outcomes by state and by
// code, and its tasks by state and by type.
func GetJobStatistics(ctx context.Context, db bun.IDB, jobID int64) (*JobStatistics, error) {
	// The paths' counts by state and code, kept as outcomes are recorded.
	groups, err := JobStatCounts(ctx, db, jobID)
	if err != nil {
		return nil, err
	}
	s := &JobStatistics{ByState: map[string]int64{}, ByCode: map[string]int64{}, BytesByState: map[string]int64{}}
	for _, g := range groups {
		s.ByState[g.State] += g.N
		s.ByCode[g.Code] += g.N
		s.BytesByState[g.State] += g.Bytes
		s.Files += g.N
		s.Bytes += g.Bytes
	}
	if s.TaskByState, s.Tasks, err = countBy(ctx, db, (*Task)(nil), "state", jobID); err != nil {
		return nil, err
	}
	if s.TaskByType, _, err = countBy(ctx, db, (*Task)(nil), "tasktype", jobID); err != nil {
		return nil, err
	}
	return s, nil
}

// TaskRow is a task with the id of its parent: the task of the previous
// step of the same batch, whose output it continues.
type TaskRow struct {
	Task     `bun:",extend"`
	ParentID *int64 `bun:"parent_id,scanonly"`
}

// TaskFilter selects tasks. Internal nil selects all; true only the
// hub's discovery tasks, false only workflow steps.
type TaskFilter struct {
	TaskType string
	TaskID   string
	States   []string
	JobID    *int64
	Internal *bool
}

// parentExpr finds the parent through the task_id the engine derives
// from job, run, batch and step ("job-J-rR-bB-rBR-sS"): the parent's id
// differs only in its step suffix, which makes the match exact even when
// a resubmitted run reuses batch numbers.
const parentExpr = `(SELECT p.id FROM tasks AS p WHERE t.step > 0 AND p.job_id = t.job_id
	AND p.task_id = substr(t.task_id, 1, length(t.task_id) - length('-s' || t.step)) || '-s' || (t.step - 1)) AS parent_id`

func tasksSelect(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).ColumnExpr("t.*").ColumnExpr(parentExpr)
}

// apply adds f's conditions to q, a query over tasks aliased t.
func (f TaskFilter) apply(q *bun.SelectQuery) *bun.SelectQuery {
	if f.TaskType != "" {
		q.Where("t.tasktype = ?", f.TaskType)
	}
	if f.TaskID != "" {
		q.Where("t.task_id = ?", f.TaskID)
	}
	if len(f.States) > 0 {
		q.Where("t.state IN (?)", bun.In(f.States))
	}
	if f.JobID != nil {
		q.Where("t.job_id = ?", *f.JobID)
	}
	if f.Internal != nil {
		if *f.Internal {
			q.Where("t.tasktype = ?", TaskDiscovery)
		} else {
			q.Where("t.tasktype <> ?", TaskDiscovery)
		}
	}
	return q
}

// Empty tells whether f selects every task.
func (f TaskFilter) Empty() bool { return reflect.ValueOf(f).IsZero() }

// onlyState is the one state f selects tasks by when it selects them by
// nothing else, "" otherwise: the number of such tasks is kept.
func (f TaskFilter) onlyState() string {
	rest := f
	rest.States = nil
	if len(f.States) != 1 || !rest.Empty() {
		return ""
	}
	return f.States[0]
}

// TasksQuery selects the tasks matching f into dest, newest first.
func TasksQuery(db bun.IDB, dest *[]TaskRow, f TaskFilter) *bun.SelectQuery {
	return f.apply(tasksSelect(db, dest)).Order("t.created DESC", "t.id DESC")
}

// CountTasks is the number of tasks matching f: kept by the database for
// every task (CountAllTasks) and for the tasks of one state, counted
// otherwise.
func CountTasks(ctx context.Context, db bun.IDB, f TaskFilter) (int, error) {
	if f.Empty() {
		return CountAllTasks(ctx, db)
	}
	if s := f.onlyState(); s != "" {
		return keptCount(ctx, db, "tasks:state:"+s)
	}
	n, err := f.apply(db.NewSelect().TableExpr("tasks AS t")).Count(ctx)
	return int(n), dbErr(err)
}

// GetTask loads a task with its parent id.
func GetTask(ctx context.Context, db bun.IDB, id int64) (*TaskRow, error) {
	t := new(TaskRow)
	err := tasksSelect(db, t).Where("t.id = ?", id).Scan(ctx)
	return t, dbErr(err)
}

// FirstFailures returns up to limit of a job's paths whose latest outcome
// is FAILURE, in the order they were recorded.
func FirstFailures(ctx context.Context, db bun.IDB, jobID int64, limit int) ([]JobStat, error) {
	var out []JobStat
	err := db.NewSelect().Model(&out).Where("js.job_id = ? AND js.state = ?", jobID, vocab.TaskFailure).
		Order("js.id").Limit(int64(limit)).Scan(ctx)
	return out, dbErr(err)
}

// JobStatFilter selects job stats or their history rows.
type JobStatFilter struct {
	States []string
	JobID  *int64
	TaskID *int64
	// Path selects the path itself and everything below it.
	Path string
	// ExactPath selects that one path.
	ExactPath string
	// Site selects the stats of jobs run on the named site.
	Site string
}

func (f *JobStatFilter) apply(q *bun.SelectQuery, alias string) *bun.SelectQuery {
	if len(f.States) > 0 {
		q.Where(alias+".state IN (?)", bun.In(f.States))
	}
	if f.JobID != nil {
		q.Where(alias+".job_id = ?", *f.JobID)
	}
	if f.TaskID != nil {
		q.Where(alias+".task_id = ?", *f.TaskID)
	}
	if f.Path != "" {
		base := strings.TrimRight(f.Path, "/")
		under := base + "/"
		q.Where("("+alias+".path = ? OR substr("+alias+".path, 1, ?) = ?)", base, utf8.RuneCountInString(under), under)
	}
	if f.ExactPath != "" {
		q.Where(alias+".path = ?", f.ExactPath)
	}
	if f.Site != "" {
		q.Where("EXISTS (SELECT 1 FROM jobs AS sj WHERE sj.id = "+alias+".job_id AND "+siteNamed("sj")+")", f.Site, f.Site)
	}
	return q
}

// JobStatsQuery selects the latest outcome of each path matching f into
// dest, in insertion order.
func JobStatsQuery(db bun.IDB, dest any, f JobStatFilter) *bun.SelectQuery {
	return f.apply(db.NewSelect().Model(dest), "js").Order("js.id")
}

// JobStatKeys is window w (not 0) of the stats f selects (those of one
// job, maybe in one state: f.Kept), as keys, in their list order (by id).
// The first page reads an index in that order ((job_id, id), or (job_id,
// state) and its ids) and the rows' versions; any other finds its ids
// first, from the index alone, then reads their versions.
func JobStatKeys(ctx context.Context, db bun.IDB, f JobStatFilter, w Window) ([]RowKey, error) {
	q := f.apply(db.NewSelect().TableExpr("job_stats AS js").Column("js.id", "js.version"), "js").Order("js.id")
	if w.Offset == 0 && !w.FromEnd {
		q = q.Limit(int64(w.Limit))
	} else {
		q = q.Where("js.id IN (?)", windowIDs(f.apply(db.NewSelect().TableExpr("job_stats AS js").Column("js.id"), "js"), w, false, "js.id"))
	}
	return scanKeys(ctx, q)
}

// JobStatsByID reads the job stats of ids (those that exist), in no order.
func JobStatsByID(ctx context.Context, db bun.IDB, ids []int64) ([]JobStat, error) {
	var stats []JobStat
	if len(ids) == 0 {
		return stats, nil
	}
	// js.* for the version, which bun leaves out of a model's columns (scanonly).
	return stats, dbErr(db.NewSelect().Model(&stats).ColumnExpr("js.*").Where("js.id IN (?)", bun.In(ids)).Scan(ctx))
}

// GetJobStat loads one job stat.
func GetJobStat(ctx context.Context, db bun.IDB, id int64) (*JobStat, error) {
	s := new(JobStat)
	err := db.NewSelect().Model(s).Where("js.id = ?", id).Scan(ctx)
	return s, dbErr(err)
}

// JobStatHistoryRow is a history row with the id of the job stat that
// holds its path's latest outcome.
type JobStatHistoryRow struct {
	JobStatHistory `bun:",extend"`
	JobStatID      *int64 `bun:"jobstat_id,scanonly"`
}

// JobStatHistoryQuery selects the history rows matching f into dest, oldest
// first.
func JobStatHistoryQuery(db bun.IDB, dest *[]JobStatHistoryRow, f JobStatFilter) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).ColumnExpr("jh.*").
		ColumnExpr("(SELECT ls.id FROM job_stats AS ls WHERE ls.job_id = jh.job_id AND ls.path = jh.path) AS jobstat_id")
	return f.apply(q, "jh").Order("jh.id")
}

// Empty tells whether f selects every job.
func (f JobFilter) Empty() bool { return reflect.ValueOf(f).IsZero() }

// onlyState is the one stored state f selects jobs by when it selects
// them by nothing else, "" otherwise: the number of such jobs is kept.
func (f JobFilter) onlyState() string {
	rest := f
	rest.States = nil
	if len(f.States) != 1 || f.States[0] == vocab.JobHasFailures || !rest.Empty() {
		return ""
	}
	return f.States[0]
}

// onlySite tells whether f selects jobs by their site (id, name or both)
// and nothing else: the number of such jobs is kept.
func (f JobFilter) onlySite() bool {
	rest := f.butSite()
	rest.SiteID = nil
	return rest.Empty() && !f.Empty()
}

// butSite is f without its site name (Site).
func (f JobFilter) butSite() JobFilter {
	f.Site, f.site = "", nil
	return f
}

// CountAllJobs is the number of jobs, kept by the database (row_counts,
// moved by triggers on every insert and delete), without reading them.
func CountAllJobs(ctx context.Context, db bun.IDB) (int, error) { return keptCount(ctx, db, "jobs") }

// CountAllTasks is the number of tasks, kept like CountAllJobs.
func CountAllTasks(ctx context.Context, db bun.IDB) (int, error) { return keptCount(ctx, db, "tasks") }

// CountJobsByState is the number of jobs in each state, as row_counts
// keeps them (states no job is in any more count 0), without reading the
// jobs.
func CountJobsByState(ctx context.Context, db bun.IDB) (map[string]int64, error) {
	var rows []struct {
		Name string `bun:"name"`
		N    int64  `bun:"n"`
	}
	const prefix = "jobs:state:"
	if err := db.NewSelect().Table("row_counts").Column("name", "n").Where("name LIKE ?", prefix+"%").Scan(ctx, &rows); err != nil {
		return nil, dbErr(err)
	}
	counts := make(map[string]int64, len(rows))
	for _, r := range rows {
		counts[strings.TrimPrefix(r.Name, prefix)] = r.N
	}
	return counts, nil
}

// countJobsOfSite is the number of jobs of f's site (SiteID, Site or
// both), as job_site_counts keeps them per (site_id, site) pair
// (migration 20261127000000): a job's pair matches f exactly when the job
// does.
func countJobsOfSite(ctx context.Context, db bun.IDB, f JobFilter) (int, error) {
	q := db.NewSelect().Table("job_site_counts").ColumnExpr("COALESCE(SUM(n), 0)")
	if f.SiteID != nil {
		q.Where("site_id = ?", *f.SiteID)
	}
	if f.Site != "" {
		cond, args := f.siteNowCond("job_site_counts")
		q.Where("("+cond+" OR site = ?)", append(args, f.Site)...)
	}
	var n int
	err := q.Scan(ctx, &n)
	return n, dbErr(err)
}

// keptCount is the number row_counts keeps under name: a table's rows
// ("jobs") or its rows in one state ("jobs:state:SUCCESS", moved also by
// the updates that change a state). A state no row has had yet has no
// row in row_counts: none.
func keptCount(ctx context.Context, db bun.IDB, name string) (int, error) {
	var n []int
	err := db.NewSelect().Table("row_counts").Column("n").Where("name = ?", name).Scan(ctx, &n)
	if err != nil || len(n) == 0 {
		return 0, dbErr(err)
	}
	return n[0], nil
}

// Kept tells whether the job keeps the number of the stats f selects: all
// the stats of one job, or those in one state the job counts (JobStatsCount).
func (f *JobStatFilter) Kept() bool { return f.keptCounter() != "" }

// keptCounter is the job's column counting the stats f selects, "" when
// none does: numstats for all a job's stats; numprocessedfiles,
// numfailedfiles and numskippedfiles for its SUCCESS, FAILURE and SKIPPED
// ones (the counters each batch's outcomes move in the transaction that
// records them, and RefreshJobCounts recounts).
func (f *JobStatFilter) keptCounter() string {
	if f.JobID == nil || len(f.States) > 1 || f.TaskID != nil || f.Path != "" || f.ExactPath != "" || f.Site != "" {
		return ""
	}
	if len(f.States) == 0 {
		return "numstats"
	}
	return stateCounters[f.States[0]]
}

// stateCounters are the job's columns counting its stats in a state.
var stateCounters = map[string]string{vocab.TaskSuccess: "numprocessedfiles", vocab.TaskFailure: "numfailedfiles",
	vocab.TaskSkipped: "numskippedfiles"}

// JobStatsCount is the number of the stats f selects (f.Kept), as the job
// keeps it (0 for no such job).
func JobStatsCount(ctx context.Context, db bun.IDB, f JobStatFilter) (int, error) {
	col := f.keptCounter()
	if col == "" {
		return 0, fmt.Errorf("the job keeps no count of %+v", f)
	}
	var n []int
	err := db.NewSelect().Model((*Job)(nil)).Column(col).Where("id = ?", *f.JobID).Scan(ctx, &n)
	if err != nil || len(n) == 0 {
		return 0, dbErr(err)
	}
	return n[0], nil
}
