package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchIndexFiles is the size of the benchmark's index.
var benchIndexFiles = benchSize(1_000_000, 10_000)

// benchFileIndex opens a file index of 1,000,000 entries, built once
// through the index's own write path (put, as a scan writes) and cached
// under the user's cache folder (HUB_BENCH_CACHE overrides), since
// building it takes a minute. The tree is generated: 1,000 folders of
// 1,000 files, names f0000000.bin .. f0999999.log in four extensions.
func benchFileIndex(b *testing.B) *FileIndex {
	b.Helper()
	dir := benchCache()
	file := filepath.Join(dir, fmt.Sprintf("files-%d.db", benchIndexFiles))
	root := newRoot(b, b.TempDir(), false)
	ready := file + ".ready"
	if _, err := os.Stat(ready); err != nil {
		_ = os.Remove(file)
		x, err := OpenFileIndex(root, file)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		exts := []string{".bin", ".txt", ".log", ".dat"}
		now := time.Now().UnixNano()
		rows := make([]IndexedFile, 0, 10000)
		for i := 0; i < benchIndexFiles; i++ {
			p := fmt.Sprintf("/d%03d/f%07d%s", i/1000, i, exts[i%4])
			rows = append(rows, IndexedFile{Path: p, Name: filepath.Base(p), Type: TypeFile, Size: int64(i % 100000),
				Mtime: now - int64(i)*1e9, Atime: now, Ctime: now, State: Resident})
			if len(rows) == cap(rows) {
				if err := x.put(ctx, 1, rows, false); err != nil {
					b.Fatal(err)
				}
				rows = rows[:0]
			}
		}
		if _, err := x.db.Exec(`INSERT INTO scans (id, started, finished, entries) VALUES (1, ?, ?, ?)`, now, now, benchIndexFiles); err != nil {
			b.Fatal(err)
		}
		if _, err := x.db.Exec(`ANALYZE`); err != nil {
			b.Fatal(err)
		}
		_ = x.Close()
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	x, err := OpenFileIndex(root, file)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.Close() })
	return x
}

// BenchmarkFileIndexSearch1M: the first page (1,000 entries, what a
// SearchWorkflow asks a site for) of name searches over 1,000,000 indexed
// files, through FileIndex.Query, beside the raw sqlite query that counts
// the same matches (a full pass over the names: what any search without
// an index on the pattern must pay). Reported as ms/op of each.
func BenchmarkFileIndexSearch1M(b *testing.B) {
	x := benchFileIndex(b)
	ctx := context.Background()
	for _, c := range []struct{ name, glob string }{
		{"common", "*7*.txt"},      // many matches: the first page fills early
		{"rare", "f09999[0-9]9.*"}, // 10 matches spread to the end: a full pass
		{"none", "*.pdf"},          // no match: a full pass
		{"exact", "f0500000.bin"},  // an exact name: the name index
	} {
		b.Run("query-"+c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, _, err := x.Query(ctx, IndexQuery{Path: "/", Recursive: true, Filters: SearchFilters{Name: c.glob}, Limit: 1000})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("baseline-raw-count-"+c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var n int
				if err := x.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM files WHERE name GLOB ?`, c.glob).Scan(&n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
