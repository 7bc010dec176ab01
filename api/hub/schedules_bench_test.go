package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/workflows"
)

// BenchmarkScheduleFiringToJobStarted times a schedule's firing (the
// Temporal Schedule triggered, as on its cron) until its job has started,
// beside the same job submitted with POST /file/workflow/ until started:
// the difference is what the schedule machinery costs.
func BenchmarkScheduleFiringToJobStarted(b *testing.B) {
	e := apitest.New(b, "sqlite")
	e.StartHubWorker()
	s := newJobSiteB(b, e, "bench")
	if err := os.MkdirAll(filepath.Join(s.root, "data"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.root, "data", "f"), []byte("data"), 0o644); err != nil {
		b.Fatal(err)
	}
	r := e.AsAdmin(http.MethodPost, "/api/schedules/", map[string]any{"name": "bench", "site": "bench",
		"managed_paths": map[string]any{"/data": map[string]any{}}})
	if r.Status != http.StatusCreated {
		b.Fatal(string(r.Body))
	}
	id := int64(r.Map()["id"].(float64))
	if r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/schedules/%d/workflows/", id), map[string]any{"workflow": "premigrate"}); r.Status != http.StatusCreated {
		b.Fatal(string(r.Body))
	}
	started := func(job int64) {
		for {
			if j := jobState(e, job); j["started"] != nil {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	lastJob := func() int64 {
		list := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobs/?schedule_ids=%d&page_size=1", id), nil).Map()
		if list["count"] == float64(0) {
			return 0
		}
		return int64(list["results"].([]any)[0].(map[string]any)["id"].(float64))
	}
	waitDone := func(job int64) {
		for {
			if j := jobState(e, job); j["completed"] != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	b.Run("schedule-firing", func(b *testing.B) {
		h := e.Temporal.ScheduleClient().GetHandle(context.Background(), workflows.ScheduleTemporalID(id))
		for i := 0; i < b.N; i++ {
			// A firing's workflow ID carries its time to the second: two
			// firings in one second would be one.
			b.StopTimer()
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
			b.StartTimer()
			before := lastJob()
			if err := h.Trigger(context.Background(), client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}); err != nil {
				b.Fatal(err)
			}
			var job int64
			for job = lastJob(); job == before; job = lastJob() {
				time.Sleep(2 * time.Millisecond)
			}
			started(job)
			b.StopTimer()
			waitDone(job)
			b.StartTimer()
		}
	})
	b.Run("post-file-workflow", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r := e.AsAdmin(http.MethodPost, "/api/file/workflow/", map[string]any{"site": "bench", "workflow": "premigrate", "paths": []string{"/data"}})
			if r.Status != http.StatusCreated {
				b.Fatal(string(r.Body))
			}
			job := int64(r.Map()["job"].(float64))
			started(job)
			b.StopTimer()
			waitDone(job)
			b.StartTimer()
		}
	})
}
