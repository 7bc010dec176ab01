package cj_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// BenchmarkCJSpaceCreate measures C+J space creations, from the POST to
// the first GET that shows the space ACTIVE, through the real path (C+J
// API, the change's Temporal workflow on the embedded server, the site
// worker on a temporary site root, the database), polled every 2 ms.
// Each op creates 30 spaces (3 in quick mode) one after another;
// reported: the median and the 90th percentile of one space in ms.
func BenchmarkCJSpaceCreate(b *testing.B) {
	for _, kind := range dbtest.Dialects(b) {
		b.Run(kind, func(b *testing.B) { benchCJSpaceCreate(b, kind) })
	}
}

func benchCJSpaceCreate(b *testing.B, kind string) {
	e := cjtest.New(b, kind)
	n := dbtest.BenchSize(30, 3)
	created := 0
	// create creates one space of a name no other has and waits until it
	// is ACTIVE; it returns the time from the POST to that answer.
	create := func() time.Duration {
		created++
		start := time.Now()
		path, _ := e.Create("spaces", map[string]any{"name": fmt.Sprintf("bench-%d", created)})
		e.WaitStatusEvery(path, models.CJActive, 2*time.Millisecond)
		return time.Since(start)
	}
	// The first space warms the workers' pollers and the caches and is
	// not counted.
	create()
	b.ResetTimer()
	var took []time.Duration
	for range b.N {
		for range n {
			took = append(took, create())
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "p90-ms")
}
