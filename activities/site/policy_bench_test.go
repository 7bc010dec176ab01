package site

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPolicyScan compares a policy scan (the Discover activity in
// "policy" mode: the parallel walk with an lstat and a state lookup of
// every file, the condition groups, the sort by atime and the batch files
// written) with find(1) printing each file's size and mtime, on the same
// tree of policyBenchFiles files, a tenth of them (the first ten top
// folders) premigrated, so that the scan reads their records:
//
//	go test ./activities/site -run '^$' -bench PolicyScan -benchtime 5x
//
// The ratio hub/find is the figure to watch (goal: at most 1).
var (
	policyBenchFiles = benchSize(100_000, 2_000)
	policyBenchDirs  = benchSize(100, 10) // top folders, each with 10 subfolders
)

func policyBenchTree(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "site")
	now := time.Now()
	perDir := policyBenchFiles / (policyBenchDirs * 10)
	buf := make([]byte, 4096)
	n := 0
	for d := range policyBenchDirs {
		for s := range 10 {
			sub := filepath.Join(dir, "space", fmt.Sprintf("p%03d", d), fmt.Sprintf("s%d", s))
			require.NoError(b, os.MkdirAll(sub, 0o755))
			for range perDir {
				name := filepath.Join(sub, fmt.Sprintf("f%06d.%s", n, []string{"pdf", "txt", "mov", "dat"}[n%4]))
				require.NoError(b, os.WriteFile(name, buf[:n*37%4096], 0o644))
				// Ages spread over two years, not in name order.
				age := time.Duration(n*7919%730) * 24 * time.Hour
				require.NoError(b, os.Chtimes(name, now.Add(-age), now.Add(-age/2)))
				n++
			}
		}
	}
	return dir
}

func BenchmarkPolicyScan(b *testing.B) {
	dir := policyBenchTree(b)
	a := &Activities{Root: newRoot(b, dir, false), Site: "bench"}
	premigrated := 0
	require.NoError(b, filepath.WalkDir(filepath.Join(dir, "space"), func(abs string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(filepath.Dir(abs))) >= fmt.Sprintf("p%03d", policyBenchDirs/10) {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, abs)
		premigrated++
		return a.Root.state.set(abs, rel, Record{State: Premigrated, Size: fi.Size(), Mtime: fi.ModTime().UnixNano(),
			Target: "t", Key: rel, Ino: inode(fi)})
	}))
	require.Equal(b, policyBenchFiles/10, premigrated)
	// About half the files: the old ones, and the big PDFs of any age.
	sel := &PolicySelect{OrderBy: "atime", Groups: []PolicyGroup{
		{Dates: []DateCondition{{Field: "atime", OlderOrNewer: "older", Age: "1y", Include: true}}},
		{Types: []FileTypeCondition{{FileTypes: []string{"pdf"}, Include: true}},
			Sizes: []SizeCondition{{GreaterOrLess: "greater", Size: 1024, Include: true}}},
	}}
	b.Run("hub", func(b *testing.B) {
		var files int64
		for i := 0; i < b.N; i++ {
			out, err := discover(b, a, DiscoverInput{JobID: int64(i + 1), Mode: "policy", Paths: []string{"/space"},
				BatchSize: maxBatchEntries, Policy: sel})
			require.NoError(b, err)
			files = out.Files
		}
		require.Greater(b, files, int64(policyBenchFiles/3))
		require.Less(b, files, int64(policyBenchFiles*2/3))
		b.ReportMetric(float64(files), "selected")
	})
	b.Run("find", func(b *testing.B) {
		devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		require.NoError(b, err)
		defer devNull.Close()
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("find", filepath.Join(dir, "space"), "-type", "f", "-printf", "%s %T@\n")
			cmd.Stdout = devNull
			require.NoError(b, cmd.Run())
		}
	})
}
