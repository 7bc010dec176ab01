package site

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
)

// The benchmarks compare the hub's implementations with the classic
// tools on the same tree of 2,000 files of 4 KiB in nested directories:
//
//	go test ./activities/site -run '^$' -bench . -benchtime 5x
//
// BenchmarkPremigrateSmallFiles compares a premigration (hash, copy,
// verify, flush, record state) with a plain cp -r; BenchmarkWalk /
// BenchmarkFind the cost of a discovery (lstat and state lookup of every
// entry) over find printing each entry's size and mtime (a stat each), on
// the million-file tree of walkBenchTree with HUB_BENCH_LARGE=1.
var benchFiles = benchSize(2000, 200)

const benchFileSize = 4 << 10

// benchQuick is HUB_BENCH_QUICK=1: `make test` runs every benchmark once
// at a small size (seconds), so that they never rot; `make bench` runs
// them at the sizes the issue notes report.
var benchQuick = os.Getenv("HUB_BENCH_QUICK") == "1"

// benchCache is where benchmarks keep the trees and indexes that take
// minutes to build: the user's cache folder (HUB_BENCH_CACHE overrides).
func benchCache() string {
	if dir := os.Getenv("HUB_BENCH_CACHE"); dir != "" {
		return dir
	}
	c, err := os.UserCacheDir()
	if err != nil {
		c = os.TempDir()
	}
	return filepath.Join(c, "hub-bench")
}

// walkBenchTree is the tree BenchmarkWalk and BenchmarkFind compare on,
// and its number of files: benchTree's, or with HUB_BENCH_LARGE=1 the
// issue's million (empty files, 1,000 folders of 1,000, built once under
// benchCache).
func walkBenchTree(b *testing.B) (string, int) {
	b.Helper()
	if os.Getenv("HUB_BENCH_LARGE") != "1" {
		dir, _ := benchTree(b)
		return dir, benchFiles
	}
	const n = 1_000_000
	tree := filepath.Join(benchCache(), fmt.Sprintf("walk-%d", n))
	ready := tree + ".ready"
	if _, err := os.Stat(ready); err == nil {
		return tree, n
	}
	_ = os.RemoveAll(tree)
	for i := range n {
		d := filepath.Join(tree, fmt.Sprintf("d%03d", i/1000))
		if i%1000 == 0 {
			require.NoError(b, os.MkdirAll(d, 0o755))
		}
		f, err := os.Create(filepath.Join(d, fmt.Sprintf("f%07d", i)))
		require.NoError(b, err)
		require.NoError(b, f.Close())
	}
	require.NoError(b, os.WriteFile(ready, nil, 0o644))
	return tree, n
}

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

// BenchmarkPremigrateSmallFiles times the premigrate step and cp -r of
// the same tree in the same iterations, each iteration running them
// twice, in the order step, cp, cp, step, and reports both (step-ms/op,
// cp-ms/op, the mean of a run): on this machine's disk a file costs up
// to 17 times more to create for minutes after many deletions (ext4
// skips recently freed inodes one by one), so two benchmarks run one
// after the other do not compare, and whichever ran first in an
// iteration would pay most for the deletions just before it (those of
// the single run Go makes before a count above one). Nothing is deleted
// until the end.
func BenchmarkPremigrateSmallFiles(b *testing.B) {
	dir, paths := benchTree(b)
	root := newRoot(b, dir, false)
	ctx := context.Background()
	// Overwrite makes every iteration upload everything again, each into
	// an empty target folder like cp -r's.
	opts := StepOptions{Overwrite: true}
	var step, cp time.Duration
	runStep := func() {
		target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: filepath.Join(b.TempDir(), "target")})
		require.NoError(b, err)
		start := time.Now()
		res, err := Premigrate(ctx, root, paths, target, "bench", opts)
		step += time.Since(start)
		require.NoError(b, err)
		require.Equal(b, CodeOK, res[len(res)-1].Code)
	}
	runCp := func() {
		dst := filepath.Join(b.TempDir(), "target")
		start := time.Now()
		out, err := exec.Command("cp", "-r", dir, dst).CombinedOutput()
		cp += time.Since(start)
		require.NoError(b, err, string(out))
	}
	b.SetBytes(2 * int64(benchFiles) * benchFileSize) // the step runs twice an iteration
	for i := 0; i < b.N; i++ {
		runStep()
		runCp()
		runCp()
		runStep()
	}
	b.ReportMetric(float64(step.Microseconds())/1000/float64(2*b.N), "step-ms/op")
	b.ReportMetric(float64(cp.Microseconds())/1000/float64(2*b.N), "cp-ms/op")
}

// BenchmarkMigrateSmallFiles times the migrate step (premigrate, then
// release: the reference checked, the write lease, the truncation, the
// record), the same step with no lease, and cp -r of the same tree, in
// the same iterations, rotating which goes first (see
// BenchmarkPremigrateSmallFiles). Each migrate gets a fresh copy of the
// tree (made untimed with cp -r) and an empty target folder; nothing is
// deleted until the end.
func BenchmarkMigrateSmallFiles(b *testing.B) {
	src, paths := benchTree(b)
	ctx := context.Background()
	var migrate, noLease, cp time.Duration
	copyTree := func() string {
		dst := filepath.Join(b.TempDir(), "tree")
		out, err := exec.Command("cp", "-r", src, dst).CombinedOutput()
		require.NoError(b, err, string(out))
		return dst
	}
	runMigrate := func(lease bool) {
		root := newRoot(b, copyTree(), false)
		target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: filepath.Join(b.TempDir(), "target")})
		require.NoError(b, err)
		if !lease {
			saved := exclusiveLease
			exclusiveLease = func(*os.File) error { return nil }
			defer func() { exclusiveLease = saved }()
		}
		start := time.Now()
		res, err := Migrate(ctx, root, paths, target, "bench", StepOptions{})
		took := time.Since(start)
		require.NoError(b, err)
		requireAll(b, res, CodeOK, paths)
		if lease {
			migrate += took
		} else {
			noLease += took
		}
	}
	runCp := func() {
		dst := filepath.Join(b.TempDir(), "target")
		start := time.Now()
		out, err := exec.Command("cp", "-r", src, dst).CombinedOutput()
		cp += time.Since(start)
		require.NoError(b, err, string(out))
	}
	runs := []func(){func() { runMigrate(true) }, func() { runMigrate(false) }, runCp}
	b.SetBytes(int64(benchFiles) * benchFileSize)
	for i := 0; i < b.N; i++ {
		for k := range runs {
			runs[(i+k)%len(runs)]()
		}
	}
	b.ReportMetric(float64(migrate.Microseconds())/1000/float64(b.N), "migrate-ms/op")
	b.ReportMetric(float64(noLease.Microseconds())/1000/float64(b.N), "nolease-ms/op")
	b.ReportMetric(float64(cp.Microseconds())/1000/float64(b.N), "cp-ms/op")
}

// BenchmarkSnapshot times a C+J snapshot of a space of benchFiles small
// files, a tenth of them migrated (copied as stubs of their own: record
// and reference), and cp -r of the same space, in the same iterations,
// alternating which goes first (see BenchmarkPremigrateSmallFiles); each
// iteration takes a new snapshot, nothing is deleted until the end.
func BenchmarkSnapshot(b *testing.B) {
	dir := b.TempDir()
	space := filepath.Join(dir, cjSpacesDir, "bench")
	require.NoError(b, os.MkdirAll(space, 0o755))
	paths := sortedPaths(makeTree(b, space, benchFiles, func(int) int { return benchFileSize }))
	a := &Activities{Root: newRoot(b, dir, false), Site: "s", ConfigDir: filepath.Join(dir, hubDir, "config")}
	b.Cleanup(func() { _ = cjRemoveTree(filepath.Join(dir, cjSnapshotsDir)) })
	tdir := b.TempDir()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(b, err)
	var stubs []string
	for i, p := range paths {
		if i%10 == 0 {
			stubs = append(stubs, "/"+cjSpacesDir+"/bench"+p)
		}
	}
	ctx := context.Background()
	res, err := Migrate(ctx, a.Root, stubs, target, "archive", StepOptions{})
	require.NoError(b, err)
	requireAll(b, res, CodeOK, stubs)
	specs := []TargetSpec{{Name: "archive", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}}

	var snap, cp time.Duration
	runSnapshot := func(i int) {
		start := time.Now()
		msg, err := a.cjSnapshot(ctx, &CJSnapshot{Space: "bench", Name: fmt.Sprintf("s%d", i), Targets: specs}, false)
		snap += time.Since(start)
		require.NoError(b, err)
		require.Contains(b, msg, fmt.Sprintf("%d migrated files kept as stubs", len(stubs)))
	}
	runCp := func() {
		dst := filepath.Join(b.TempDir(), "copy")
		start := time.Now()
		out, err := exec.Command("cp", "-r", space, dst).CombinedOutput()
		cp += time.Since(start)
		require.NoError(b, err, string(out))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			runSnapshot(i)
			runCp()
		} else {
			runCp()
			runSnapshot(i)
		}
	}
	b.ReportMetric(float64(snap.Microseconds())/1000/float64(b.N), "snapshot-ms/op")
	b.ReportMetric(float64(cp.Microseconds())/1000/float64(b.N), "cp-ms/op")
}

func BenchmarkWalk(b *testing.B) {
	dir, files := walkBenchTree(b)
	root := newRoot(b, dir, false)
	ctx := context.Background()
	// Discovery's steady state: a tree unchanged for longer than the clean
	// stamps' margin and walked once before, which stamped its folders
	// (the first walk reads every file's attribute, as before stamps).
	time.Sleep(cleanMargin)
	require.NoError(b, Walk(ctx, root, []string{"/"}, WalkOptions{}, func([]Entry) error { return nil }))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		err := Walk(ctx, root, []string{"/"}, WalkOptions{}, func(batch []Entry) error {
			n += len(batch)
			return nil
		})
		require.NoError(b, err)
		require.Greater(b, n, files)
	}
}

func BenchmarkFind(b *testing.B) {
	dir, _ := walkBenchTree(b)
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(b, err)
	defer devNull.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// What the issue compares a discovery with: each entry's size and
		// mtime, which need a stat as the walk's do.
		cmd := exec.Command("find", dir, "-printf", "%s %T@\n")
		cmd.Stdout = devNull
		require.NoError(b, cmd.Run())
	}
}

// BenchmarkCollect is a collection of a filesystem target whose every
// content has a marker (the daily steady state: nothing moves) beside find
// listing the same files with their size and mtime. HUB_BENCH_COLLECT sets
// the number of contents (default 100,000; 2,000 in quick mode).
func BenchmarkCollect(b *testing.B) {
	n := benchSize(100_000, 2_000)
	if v := os.Getenv("HUB_BENCH_COLLECT"); v != "" {
		_, err := fmt.Sscan(v, &n)
		require.NoError(b, err)
	}
	dir := filepath.Join(b.TempDir(), "target")
	for i := range n {
		sum := sha([]byte(strconv.Itoa(i)))
		for _, key := range []string{contentKey(sum), refKey(sum, "r")} {
			p := filepath.Join(dir, filepath.FromSlash(key))
			err := os.WriteFile(p, nil, 0o644)
			if os.IsNotExist(err) {
				require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
				err = os.WriteFile(p, nil, 0o644)
			}
			require.NoError(b, err)
		}
	}
	b.Run("hub", func(b *testing.B) {
		target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: dir})
		require.NoError(b, err)
		for i := 0; i < b.N; i++ {
			res, err := Collect(context.Background(), target, CollectOptions{})
			require.NoError(b, err)
			require.Equal(b, CollectResult{Objects: n}, res)
		}
	})
	b.Run("find", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("find", dir, "-type", "f", "-printf", "%s %T@ %P\n")
			cmd.Stdout = io.Discard
			require.NoError(b, cmd.Run())
		}
	})
}

// BenchmarkScrub reads and hashes every content object of a filesystem
// target (benchFiles objects of 64 KiB, named by their SHA-256) beside
// sha256sum of the same files, the baseline for reading and hashing them.
func BenchmarkScrub(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "target")
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: dir})
	require.NoError(b, err)
	ctx := context.Background()
	data := make([]byte, 64<<10)
	for i := range benchFiles {
		copy(data, strconv.Itoa(i)+" ")
		require.NoError(b, target.Put(ctx, contentKey(sha(data)), bytes.NewReader(data), int64(len(data))))
	}
	b.Run("hub", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			res, err := Scrub(ctx, target, ScrubOptions{})
			require.NoError(b, err)
			require.Equal(b, benchFiles, res.Objects)
			require.Empty(b, res.Bad)
		}
	})
	b.Run("sha256sum", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("sh", "-c", `find "$1" -type f -print0 | xargs -0 sha256sum`, "sh", filepath.Join(dir, "objects"))
			cmd.Stdout = io.Discard
			require.NoError(b, cmd.Run())
		}
	})
}

// BenchmarkReceive times the destination half of a hydrating send: the
// receive of benchFiles files of 4 KiB from a filesystem target (read,
// checked against their SHA-256, written through temporary names, one
// flush of the filesystem), beside `cp -r` of the target's objects and
// `sync -f`, and the receive without its flush, in the same iterations,
// in turn (see BenchmarkPremigrateSmallFiles). Nothing is deleted until
// the end.
func BenchmarkReceive(b *testing.B) {
	tdir := filepath.Join(b.TempDir(), "target")
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(b, err)
	ctx := context.Background()
	var files []SentFile
	data := make([]byte, benchFileSize)
	for i := range benchFiles {
		copy(data, strconv.Itoa(i)+" ")
		sum := sha(data)
		require.NoError(b, target.Put(ctx, contentKey(sum), bytes.NewReader(data), int64(len(data))))
		files = append(files, SentFile{Path: fmt.Sprintf("/d%02d/f%05d", i%20, i), Type: TypeFile, Target: "t",
			Key: contentKey(sum), Checksum: sum, Size: int64(len(data)), Mtime: time.Now().UnixNano()})
	}
	dir := b.TempDir()
	a := &Activities{Root: newRoot(b, dir, false), Site: "dst"}
	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	defer func() { flushSite = fsutil.SyncFSOf }()
	var recv, noFlush, cp time.Duration
	n := 0
	receiveInto := func(total *time.Duration, flush func(*os.File) error) {
		flushSite = flush
		n++
		in := ReceiveInput{JobID: 1, Step: "send", Hydrate: true, Targets: []TargetSpec{spec}, Files: files,
			DestPath: fmt.Sprintf("/r%d", n)}
		var out StepOutput
		start := time.Now()
		err := runActivity(a, a.Receive, in, &out)
		*total += time.Since(start)
		require.NoError(b, err)
		require.Len(b, out.Outcomes, len(files))
		require.Equal(b, OutcomeSuccess, out.Outcomes[len(files)-1].State, out.Outcomes[len(files)-1].Message)
	}
	runCp := func() {
		dst := filepath.Join(b.TempDir(), "copy")
		start := time.Now()
		out, err := exec.Command("sh", "-c", `cp -r "$1" "$2" && sync -f "$2"`, "sh", filepath.Join(tdir, "objects"), dst).CombinedOutput()
		cp += time.Since(start)
		require.NoError(b, err, string(out))
	}
	runs := []func(){
		func() { receiveInto(&recv, fsutil.SyncFSOf) },
		func() { receiveInto(&noFlush, func(*os.File) error { return nil }) },
		runCp,
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range runs {
			runs[(i+k)%len(runs)]()
		}
	}
	b.ReportMetric(float64(recv.Microseconds())/1000/float64(b.N), "receive-ms/op")
	b.ReportMetric(float64(noFlush.Microseconds())/1000/float64(b.N), "noflush-ms/op")
	b.ReportMetric(float64(cp.Microseconds())/1000/float64(b.N), "cp-ms/op")
}
