package models_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// summaryOfRows is the jobs summary of every job, added up from the rows.
func summaryOfRows(t *testing.T, db bun.IDB) *models.JobSummary {
	var jobs []models.Job
	require.NoError(t, db.NewSelect().Model(&jobs).Scan(context.Background()))
	want := &models.JobSummary{ByState: map[string]int64{}}
	for _, st := range models.JobStates {
		want.ByState[st] = 0
	}
	for _, j := range jobs {
		want.Count++
		want.ByState[j.State]++
		if j.State == vocab.JobSuccess && j.HasFailures {
			want.HasFailures++
		}
		want.Files.NumFiles += j.NumFiles
		want.Files.NumProcessedFiles += j.NumProcessedFiles
		want.Files.NumFailedFiles += j.NumFailedFiles
		want.Files.NumSkippedFiles += j.NumSkippedFiles
		want.Files.NumAbortedFiles += j.NumAbortedFiles
		want.Files.NumCancelledFiles += j.NumCancelledFiles
	}
	return want
}

// stateSumsWriter makes random changes to jobs: inserts in any state,
// counters moved while running and after the end, state changes into,
// out of and between finished states, failures flagged and cleared, and
// deletes, all with plain SQL, as any writer of the database might; with
// many, also updates of many jobs in one statement (the hub updates jobs
// one at a time: writers updating many rows at once in different orders
// may deadlock on the rows themselves).
func stateSumsWriter(ctx context.Context, db bun.IDB, site *models.Site, rng *rand.Rand, steps int, many bool) error {
	at := time.Now().UTC()
	ops := 4
	if many {
		ops = 6
	}
	for range steps {
		state := models.JobStates[rng.IntN(len(models.JobStates))]
		var err error
		switch rng.IntN(ops) {
		case 0: // insert one or several jobs
			jobs := make([]models.Job, 1+rng.IntN(3))
			for i := range jobs {
				jobs[i] = models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue, State: state,
					Created: at, Updated: at, Run: 1, OwnerType: models.OwnerSystem, Fields: map[string]any{}, Paths: []string{"/data"},
					NumFiles: rng.Int64N(100), NumProcessedFiles: rng.Int64N(50), NumFailedFiles: rng.Int64N(5),
					NumAbortedFiles: rng.Int64N(3), HasFailures: rng.IntN(2) == 0}
			}
			_, err = db.NewInsert().Model(&jobs).Exec(ctx)
		case 1: // a batch's counters
			_, err = db.NewUpdate().Model((*models.Job)(nil)).Where("id = (SELECT MIN(id) FROM jobs WHERE id >= ?)", rng.Int64N(200)).
				Set("numprocessedfiles = numprocessedfiles + ?", rng.Int64N(10)).Set("numskippedfiles = numskippedfiles + 1").Exec(ctx)
		case 2: // the end of a job, or a resubmit
			_, err = db.NewUpdate().Model((*models.Job)(nil)).Where("id = (SELECT MIN(id) FROM jobs WHERE id >= ?)", rng.Int64N(200)).
				Set("state = ?", state).Set("numcancelledfiles = numcancelledfiles + ?", rng.Int64N(4)).Exec(ctx)
		case 3:
			_, err = db.NewDelete().Model((*models.Job)(nil)).Where("id = (SELECT MIN(id) FROM jobs WHERE id >= ?)", rng.Int64N(200)).Exec(ctx)
		case 4: // failures flagged or cleared on many jobs at once
			_, err = db.NewUpdate().Model((*models.Job)(nil)).Where("id % 3 = ?", rng.IntN(3)).
				Set("has_failures = ?", rng.IntN(2) == 0).Set("numfiles = numfiles + 1").Exec(ctx)
		case 5: // many jobs change state at once
			_, err = db.NewUpdate().Model((*models.Job)(nil)).Where("id % 5 = ?", rng.IntN(5)).Set("state = ?", state).Exec(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TestJobsSummaryKeptSums: the summary of every job, read from the kept
// counts and sums (with the unfinished jobs added), equals the summary
// added up from the rows after every random change to the jobs (plain SQL
// inserts, updates of one or many jobs, deletes), on both databases.
func TestJobsSummaryKeptSums(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(3, 4))
		for step := range 150 {
			require.NoError(t, stateSumsWriter(ctx, db, site, rng, 1, true))
			got, err := models.SummarizeJobs(ctx, db, models.JobFilter{})
			require.NoError(t, err)
			require.Equal(t, summaryOfRows(t, db), got, "step %d", step)
		}
	})
}

// TestJobsSummaryKeptSumsUnderConcurrentWriters: eight writers insert,
// update and delete jobs one at a time, all at once; no writer fails (no
// deadlock), and the kept summary then equals the rows'.
func TestJobsSummaryKeptSumsUnderConcurrentWriters(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, db, "east")
		require.NoError(t, err)
		var g errgroup.Group
		for w := range 8 {
			g.Go(func() error { return stateSumsWriter(ctx, db, site, rand.New(rand.NewPCG(uint64(w), 9)), 60, false) })
		}
		require.NoError(t, g.Wait())
		got, err := models.SummarizeJobs(ctx, db, models.JobFilter{})
		require.NoError(t, err)
		require.Equal(t, summaryOfRows(t, db), got)
	})
}
