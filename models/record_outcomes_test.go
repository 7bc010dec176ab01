package models_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows/vocab"
)

// TestRecordOutcomesKeepsEveryByte: paths and messages with the characters
// a bulk write could mangle (array and CSV quoting, the word NULL, empty
// strings, newlines, non-ASCII) come back from job_stats and its history
// as they were written, on both databases, and a retried call (an
// activity's retry) leaves the same rows and counts.
func TestRecordOutcomesKeepsEveryByte(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		job, task := jobWithTask(t, db, "odd")
		outs := []models.PathOutcome{
			{Path: `/a "quoted" name`, State: vocab.TaskSuccess, Code: "ok", Message: `said "hi", then {left}`, Size: 1 << 40},
			{Path: `/back\slash\`, State: vocab.TaskFailure, Code: "failed", Message: "two\nlines\r\n", Size: 0},
			{Path: "/NULL", State: vocab.TaskSuccess, Code: "", Message: "", Size: 7},
			{Path: "/null", State: vocab.TaskSkipped, Code: "skipped", Message: "NULL", Size: 3},
			{Path: "/{a,b}", State: vocab.TaskSuccess, Code: "ok", Message: "a,b", Size: 2},
			{Path: "/ lead and trail ", State: vocab.TaskSuccess, Code: "ok", Message: " ", Size: 1},
			{Path: "/ünï/日本/é", State: vocab.TaskSuccess, Code: "ok", Message: "ça va", Size: 5},
			{Path: "/'single'", State: vocab.TaskSuccess, Code: "ok", Message: "it's", Size: 6},
		}
		for range 2 {
			require.NoError(t, models.RecordOutcomes(ctx, db, job.ID, task.ID, outs))
			var stats []models.JobStat
			require.NoError(t, db.NewSelect().Model(&stats).Where("job_id = ?", job.ID).Order("id").Scan(ctx))
			require.Len(t, stats, len(outs))
			byPath := map[string]models.JobStat{}
			for _, s := range stats {
				byPath[s.Path] = s
			}
			for _, o := range outs {
				s, ok := byPath[o.Path]
				require.True(t, ok, "%q kept", o.Path)
				require.Equal(t, []any{o.State, o.Code, o.Message, o.Size}, []any{s.State, s.Code, s.Message, *s.Size}, o.Path)
			}
			var history []models.JobStatHistory
			require.NoError(t, db.NewSelect().Model(&history).Where("job_id = ?", job.ID).Scan(ctx))
			require.Len(t, history, len(outs), "a retry replaces the task's history")
			for _, h := range history {
				require.Equal(t, byPath[h.Path].Message, h.Message, h.Path)
			}
		}
	})
}

// jobWithTask creates a premigrate job on a site called site, and a
// started task of it.
func jobWithTask(t *testing.T, db *bun.DB, site string) (*models.Job, *models.Task) {
	t.Helper()
	ctx := context.Background()
	s, err := models.EnsureSite(ctx, db, site)
	require.NoError(t, err)
	job := &models.Job{Workflow: "premigrate", Site: s.Name, SiteID: s.ID, Queue: vocab.DefaultQueue,
		Paths: []string{"/"}, Fields: map[string]any{}, Definition: models.JobDefinition{Name: "premigrate"}, OwnerType: models.OwnerSystem}
	require.NoError(t, models.CreateJob(ctx, db, job))
	task := &models.Task{JobID: job.ID, Site: s.Name, Queue: vocab.DefaultQueue, TaskType: "premigrate",
		TaskID: site + "-1", State: vocab.TaskStarted, Run: 1}
	require.NoError(t, models.CreateTask(ctx, db, task))
	return job, task
}
