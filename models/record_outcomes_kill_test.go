package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// recordProcessEnv carries, to a re-executed test binary, the outcomes it
// should record instead of running its tests.
const recordProcessEnv = "HUB_TEST_RECORD_OUTCOMES"

type recordProcess struct {
	DBURL         string
	JobID, TaskID int64
	Outcomes      []models.PathOutcome
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(recordProcessEnv); raw != "" {
		if err := recordInProcess(raw); err != nil {
			fmt.Fprintln(os.Stderr, "record process:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// recordInProcess records the outcomes a test passed in raw (JSON).
func recordInProcess(raw string) error {
	var p recordProcess
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return err
	}
	db, err := models.Open(p.DBURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return models.RecordOutcomes(context.Background(), db, p.JobID, p.TaskID, p.Outcomes)
}

// TestRecordOutcomesKilledHalfWritten: the process recording a batch of
// outcomes is killed (SIGKILL, a fault point) between writing the paths'
// rows and moving the job's counts by them (the order differs by
// database); nothing of the batch is left (the job's counters, its
// statistics and its stats are those of the batch before), and the
// batch recorded again (the activity's retry) leaves counts that equal a
// count of the rows.
func TestRecordOutcomesKilledHalfWritten(t *testing.T) {
	for _, kind := range dbtest.Dialects(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			db, url := dbtest.OpenURL(t, kind)
			job, task := jobWithTask(t, db, "killed")
			batch := func(from, to int, state string) []models.PathOutcome {
				var outs []models.PathOutcome
				for i := from; i < to; i++ {
					outs = append(outs, models.PathOutcome{Path: fmt.Sprintf("/d/f%04d", i), State: state, Code: fmt.Sprintf("c%d", i%3), Size: int64(i)})
				}
				return outs
			}
			require.NoError(t, models.RecordOutcomes(ctx, db, job.ID, task.ID, batch(0, 200, vocab.TaskSuccess)))
			counters := func() [4]int64 {
				var j models.Job
				require.NoError(t, db.NewSelect().Model(&j).Where("j.id = ?", job.ID).Scan(ctx))
				return [4]int64{j.NumProcessedFiles, j.NumFailedFiles, j.NumSkippedFiles, j.NumStats}
			}
			retry := &models.Task{JobID: job.ID, Site: job.Site, Queue: vocab.DefaultQueue, TaskType: "premigrate",
				TaskID: "killed-2", State: vocab.TaskStarted, Run: 2}
			require.NoError(t, models.CreateTask(ctx, db, retry))
			before, beforeStats := counters(), dbtest.RequireStatisticsOfRows(t, db, job.ID)
			require.Equal(t, [4]int64{200, 0, 0, 200}, before)

			second := batch(100, 300, vocab.TaskFailure) // half of it replaces earlier outcomes
			raw, err := json.Marshal(recordProcess{DBURL: url, JobID: job.ID, TaskID: retry.ID, Outcomes: second})
			require.NoError(t, err)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), recordProcessEnv+"="+string(raw), "HUB_FAULT_POINT=outcomes.half-written@1")
			cmd.Stderr = os.Stderr
			err = cmd.Run()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the record process ended by itself: %v", err)
			require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "killed at its fault point")

			require.Equal(t, before, counters(), "the killed batch moved no counter")
			require.Equal(t, beforeStats, dbtest.RequireStatisticsOfRows(t, db, job.ID), "the killed batch left no row and no count")

			require.NoError(t, models.RecordOutcomes(ctx, db, job.ID, retry.ID, second))
			require.Equal(t, [4]int64{100, 200, 0, 300}, counters())
			after := dbtest.RequireStatisticsOfRows(t, db, job.ID)
			require.Equal(t, map[string]int64{vocab.TaskSuccess: 100, vocab.TaskFailure: 200}, after.ByState)
		})
	}
}
