package site

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/thehub/hub/activities/targets"
)

// The benchmarks compare the hub's implementations with the classic
// tools on the same tree of 2,000 files of 4 KiB in nested directories:
//
//	go test ./activities/site -run '^$' -bench . -benchtime 5x
//
// BenchmarkPremigrateSmallFiles / BenchmarkCpR is the copy overhead of a
// premigration (hash, copy, verify, flush, record state) over a plain
// copy; BenchmarkWalk / BenchmarkFind the cost of a discovery (lstat and
// state lookup of every entry) over a name-only listing.
var benchFiles = benchSize(2000, 200)

const benchFileSize = 4 << 10

// benchQuick is HUB_BENCH_QUICK=1: `make test` runs every benchmark once
// at a small size (seconds), so that they never rot; `make bench` runs
// them at the sizes the issue notes report.
var benchQuick = os.Getenv("HUB_BENCH_QUICK") == "1"

// benchSize is full, or quick in quick mode.
func benchSize(full, quick int) int {
	if benchQuick {
		return quick
	}
	return full
}

func benchTree(b *testing.B) (string, []string) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "src")
	require.NoError(b, os.Mkdir(dir, 0o755))
	files := makeTree(b, dir, benchFiles, func(int) int { return benchFileSize })
	return dir, sortedPaths(files)
}

func BenchmarkPremigrateSmallFiles(b *testing.B) {
	dir, paths := benchTree(b)
	root := newRoot(b, dir, false)
	ctx := context.Background()
	// Overwrite makes every iteration upload everything again, each into
	// an empty target folder like cp -r below.
	opts := StepOptions{Overwrite: true}
	b.SetBytes(int64(benchFiles) * benchFileSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tdir := filepath.Join(b.TempDir(), "target")
		target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
		require.NoError(b, err)
		b.StartTimer()
		res, err := Premigrate(ctx, root, paths, target, "bench", opts)
		require.NoError(b, err)
		require.Equal(b, CodeOK, res[len(res)-1].Code)
	}
}

func BenchmarkCpR(b *testing.B) {
	dir, _ := benchTree(b)
	b.SetBytes(int64(benchFiles) * benchFileSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dst := filepath.Join(b.TempDir(), "target")
		b.StartTimer()
		out, err := exec.Command("cp", "-r", dir, dst).CombinedOutput()
		require.NoError(b, err, string(out))
	}
}

func BenchmarkWalk(b *testing.B) {
	dir, _ := benchTree(b)
	root := newRoot(b, dir, false)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		err := Walk(ctx, root, []string{"/"}, WalkOptions{}, func(batch []Entry) error {
			n += len(batch)
			return nil
		})
		require.NoError(b, err)
		require.Greater(b, n, benchFiles)
	}
}

func BenchmarkFind(b *testing.B) {
	dir, _ := benchTree(b)
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(b, err)
	defer devNull.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command("find", dir)
		cmd.Stdout = devNull
		require.NoError(b, cmd.Run())
	}
}
