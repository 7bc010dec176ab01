package site

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAnalyzeTreePartial: a walk that reaches its deadline answers with
// what it counted, marked incomplete; a cancelled one fails.
func TestAnalyzeTreePartial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	makeTree(t, dir, 200, func(i int) int { return i })
	root := newRoot(t, dir, false)
	e, _, err := root.Stat("/")
	require.NoError(t, err)

	out, err := AnalyzeTree(context.Background(), root, e, 0, nil)
	require.NoError(t, err)
	require.True(t, out.Complete)
	require.Equal(t, int64(200), out.Files)

	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	out, err = AnalyzeTree(ctx, root, e, 0, nil)
	require.NoError(t, err)
	require.False(t, out.Complete)
	require.Less(t, out.Files, int64(200))

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = AnalyzeTree(ctx, root, e, 0, nil)
	require.ErrorIs(t, err, context.Canceled)
}

// TestAnalyticsBands: the band of an age or a size, at and around each
// bound, and the type of a name.
func TestAnalyticsBands(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ns := func(ago time.Duration) int64 { return now.Add(-ago).UnixNano() }
	for ago, want := range map[time.Duration]string{-time.Hour: "<1d", 0: "<1d", 24*time.Hour - time.Second: "<1d",
		24 * time.Hour: "1d-7d", 30 * 24 * time.Hour: "30d-90d", 400 * 24 * time.Hour: "1y-3y", 5 * 365 * 24 * time.Hour: ">3y"} {
		require.Equal(t, want, analyticsAges[ageBand(now, ns(ago))].key, ago)
	}
	for n, want := range map[int64]string{0: "0", 1: "<4KiB", 4095: "<4KiB", 4096: "4KiB-1MiB", 1 << 20: "1MiB-100MiB",
		1<<30 - 1: "100MiB-1GiB", 10 << 30: ">=10GiB"} {
		require.Equal(t, want, analyticsSizes[sizeBand(n)].key, n)
	}
	for name, want := range map[string]string{"a.TXT": "txt", "archive.tar.gz": "gz", "README": "(none)", ".bashrc": "(none)",
		"x.averyveryverylongextension": "(none)"} {
		require.Equal(t, want, fileType(name), name)
	}
}

// benchAnalyticsFiles is the size of the analytics benchmark's tree.
var benchAnalyticsFiles = benchSize(100_000, 2_000)

// benchAnalyticsTree is a tree of 100,000 files (100 folders of 10
// folders of 100 files, 0 to 8 KiB) built once and kept under the user's
// cache folder (HUB_BENCH_CACHE overrides).
func benchAnalyticsTree(b *testing.B) string {
	b.Helper()
	dir := benchCache()
	tree := filepath.Join(dir, fmt.Sprintf("analytics-%d", benchAnalyticsFiles))
	ready := tree + ".ready"
	if _, err := os.Stat(ready); err == nil {
		return tree
	}
	_ = os.RemoveAll(tree)
	buf := make([]byte, 8192)
	exts := []string{".bin", ".txt", ".log", ".dat", ""}
	for i := range benchAnalyticsFiles {
		d := filepath.Join(tree, fmt.Sprintf("d%02d", i/1000), fmt.Sprintf("e%d", i/100%10))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%06d%s", i, exts[i%5])), buf[:i*37%8193], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return tree
}

// BenchmarkAnalytics100k: the analytics answer of a 100,000-file tree
// (a parallel walk reading each file's state) beside `du -s` of the same
// tree, both with the tree in the page cache. Reports the answer's time
// per op, du's, and their ratio (analytics/du).
func BenchmarkAnalytics100k(b *testing.B) {
	tree := benchAnalyticsTree(b)
	root := newRoot(b, tree, false)
	e, _, err := root.Stat("/")
	if err != nil {
		b.Fatal(err)
	}
	du := func() time.Duration {
		start := time.Now()
		if out, err := exec.Command("du", "-s", tree).CombinedOutput(); err != nil {
			b.Fatalf("du: %v: %s", err, out)
		}
		return time.Since(start)
	}
	du() // warm the caches for both
	var duTotal, anTotal time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		out, err := AnalyzeTree(context.Background(), root, e, 0, nil)
		anTotal += time.Since(start)
		if err != nil || !out.Complete || out.Files != int64(benchAnalyticsFiles) {
			b.Fatalf("analytics: %v %+v", err, out)
		}
		b.StopTimer()
		duTotal += du()
		b.StartTimer()
	}
	b.ReportMetric(float64(duTotal.Milliseconds())/float64(b.N), "du-ms/op")
	b.ReportMetric(float64(anTotal.Milliseconds())/float64(b.N), "analytics-ms/op")
	b.ReportMetric(float64(anTotal)/float64(duTotal), "analytics/du")
}
