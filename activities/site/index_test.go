package site

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The index is shared by every node of a site: separate processes, each
// with its own index value, on one root. newIndex makes such a value
// without the per-process sharing of sharedIndex.

func indexRecord(i int, state State, pending string) Record {
	return Record{
		State: state, Size: int64(1000 + i), Mtime: int64(i) * 1e9, StubSize: 10,
		Target: "t", Key: fmt.Sprintf("objects/%064d", i), Checksum: fmt.Sprintf("%064x", i),
		Ino: uint64(i + 1), Pending: pending, Sig: "sig",
	}
}

// lifecycle writes the records a Migrate writes for one file:
// premigrated, being released, migrated.
func lifecycle(set func(string, Record) error, rel string, i int) (Record, error) {
	final := indexRecord(i, Migrated, "")
	for _, rec := range []Record{indexRecord(i, Premigrated, ""), indexRecord(i, Migrated, pendingRelease), final} {
		if err := set(rel, rec); err != nil {
			return final, err
		}
	}
	return final, nil
}

func requireRecord(t testing.TB, ix *index, rel string, want *Record) {
	t.Helper()
	got, err := ix.get(rel)
	require.NoError(t, err, rel)
	if want == nil {
		require.Nil(t, got, "%s: record not removed", rel)
		return
	}
	require.NotNil(t, got, "%s: record lost", rel)
	require.Equal(t, *want, *got, rel)
}

// requireNoTemp checks nothing was left half-written under dir.
func requireNoTemp(t testing.TB, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		require.NoError(t, err)
		require.False(t, strings.HasPrefix(e.Name(), tmpPrefix), "left behind: %s", p)
		return nil
	}))
}

// writeLegacyLog writes an old .hub/state.jsonl.
func writeLegacyLog(t testing.TB, dir string, lines []indexLine, tail string) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, l := range lines {
		require.NoError(t, enc.Encode(l))
	}
	buf.WriteString(tail)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, hubDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, hubDir, legacyIndexFile), buf.Bytes(), 0o644))
}

// indexWorkload is what one node does in the concurrency tests: the
// whole migration of its files, in folders shared with the other nodes,
// with one in ten files recalled (its record removed) at the end. It
// returns the records expected (nil: none).
func indexWorkload(t testing.TB, ix *index, node string, files, workers int) map[string]*Record {
	t.Helper()
	want := make(map[string]*Record, files)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < files; i += workers {
				rel := fmt.Sprintf("d%02d/e%d/%s-%04d", i%7, i%3, node, i)
				rec, err := lifecycle(ix.set, rel, i)
				if !assert.NoError(t, err, rel) {
					return
				}
				got := &rec
				if i%10 == 0 {
					if !assert.NoError(t, ix.remove(rel), rel) {
						return
					}
					got = nil
				}
				mu.Lock()
				want[rel] = got
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return want
}

// indexFiles is enough files for a node to write more than 4096 changes,
// past which the single-process log of earlier versions was rewritten from
// the writer's memory, dropping every other process's records.
const indexFiles = 1400

// Two index values of one root (two processes of a site), each with
// several goroutines, write the records of different files into the same
// folders; a third reads every one back.
func TestIndexConcurrentInstances(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodes := map[string]*index{"a": newIndex(dir), "b": newIndex(dir)}
	wants := map[string]map[string]*Record{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, ix := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := indexWorkload(t, ix, name, indexFiles, 4)
			mu.Lock()
			wants[name] = want
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, ix := range nodes {
		require.NoError(t, ix.sync())
	}
	reader := newIndex(dir)
	for _, want := range wants {
		for rel, rec := range want {
			requireRecord(t, reader, rel, rec)
		}
	}
	requireNoTemp(t, dir)
}

// Records come and go in one folder from two processes at once: a
// process removing the folder's last record removes the folder, while
// another is about to write in it. Every write still lands.
func TestIndexFolderChurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodes := []*index{newIndex(dir), newIndex(dir)}
	const workers, rounds = 6, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix := nodes[w%2]
			rel := fmt.Sprintf("hot/deeper/f%d", w)
			for i := range rounds {
				if !assert.NoError(t, ix.set(rel, indexRecord(i, Premigrated, ""))) || !assert.NoError(t, ix.removeTree(rel)) {
					return
				}
			}
			assert.NoError(t, ix.set(rel, indexRecord(w, Migrated, "")))
		}()
	}
	wg.Wait()
	for w := range workers {
		rec := indexRecord(w, Migrated, "")
		requireRecord(t, newIndex(dir), fmt.Sprintf("hot/deeper/f%d", w), &rec)
	}
	requireNoTemp(t, dir)
}

// A record written by one process is seen by another at once, and so is
// its removal: no process acts on a copy of the index it read earlier.
func TestIndexSeesOtherInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := newIndex(dir), newIndex(dir)
	requireRecord(t, b, "docs/report.pdf", nil) // b has looked before a writes

	rec := indexRecord(1, Premigrated, "")
	require.NoError(t, a.set("docs/report.pdf", rec))
	requireRecord(t, b, "docs/report.pdf", &rec)

	rec = indexRecord(1, Migrated, "")
	require.NoError(t, a.set("docs/report.pdf", rec))
	requireRecord(t, b, "docs/report.pdf", &rec)

	require.NoError(t, b.remove("docs/report.pdf"))
	requireRecord(t, a, "docs/report.pdf", nil)

	require.NoError(t, a.set("docs/report.pdf", rec))
	require.NoError(t, a.set("docs/sub/deep.txt", rec))
	requireRecord(t, b, "docs/sub/deep.txt", &rec)
	require.NoError(t, b.removeTree("docs"))
	requireRecord(t, a, "docs/report.pdf", nil)
	requireRecord(t, a, "docs/sub/deep.txt", nil)
	require.NoError(t, a.sync())
	require.NoError(t, b.sync())
}

// removeTree drops the records at and below a path, and no other; names
// that look like the index's own, and names too long for its prefix, are
// kept apart.
func TestIndexRemoveTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ix := newIndex(dir)
	long := strings.Repeat("n", 255)
	paths := []string{
		"a", "a/b", "a/b/c", "a/b/c/d", "a/bc", "a/b.txt", "a/=b", "a/+b", "a/+b/x", "ab",
		long, long + "/" + long, "a/b/" + long, "x/.hub-tmp-y", "x/#1", "x/@1",
	}
	recs := map[string]Record{}
	for i, p := range paths {
		recs[p] = indexRecord(i, Premigrated, "")
		require.NoError(t, ix.set(p, recs[p]))
	}
	for _, p := range paths {
		rec := recs[p]
		requireRecord(t, newIndex(dir), p, &rec)
	}
	require.NoError(t, ix.removeTree("a/b"))
	require.NoError(t, ix.removeTree(long))
	require.NoError(t, ix.removeTree("absent/path"))
	gone := map[string]bool{"a/b": true, "a/b/c": true, "a/b/c/d": true, "a/b/" + long: true, long: true, long + "/" + long: true}
	for _, p := range paths {
		rec := recs[p]
		if gone[p] {
			requireRecord(t, ix, p, nil)
		} else {
			requireRecord(t, ix, p, &rec)
		}
	}
	// The root has no record, and forgetting it forgets everything.
	requireRecord(t, ix, "", nil)
	require.Error(t, ix.set("", recs["a"]))
	require.NoError(t, ix.removeTree(""))
	for _, p := range paths {
		requireRecord(t, ix, p, nil)
	}
	require.NoError(t, ix.sync())
	// Folders emptied by removals go too.
	for _, p := range []string{"x/#1", "x/@1"} {
		require.NoError(t, ix.set(p, recs[p]))
		require.NoError(t, ix.remove(p))
	}
	entries, err := os.ReadDir(filepath.Join(dir, hubDir, indexDir))
	require.NoError(t, err)
	require.Empty(t, entries)
	requireNoTemp(t, dir)
}

// A record file holding another path's record (moved by hand) is not
// trusted.
func TestIndexMisplacedRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ix := newIndex(dir)
	rec := indexRecord(1, Migrated, "")
	require.NoError(t, ix.set("a", rec))
	from, _, err := ix.paths("a")
	require.NoError(t, err)
	to, _, err := ix.paths("b")
	require.NoError(t, err)
	require.NoError(t, os.Rename(from, to))
	_, err = ix.get("b")
	require.ErrorIs(t, err, ErrUntrustedRecord)
	require.NoError(t, os.WriteFile(to, []byte("{torn"), 0o644))
	_, err = ix.get("b")
	require.ErrorIs(t, err, ErrUntrustedRecord)
}

// The log of earlier versions is imported on first use, then set aside:
// the last line of a path wins, removals and a torn last line count for
// nothing, and later changes are not undone by a second import.
func TestIndexImportsLegacyLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r1, r1b, r2, r3 := indexRecord(1, Premigrated, ""), indexRecord(1, Migrated, ""), indexRecord(2, Migrated, ""), indexRecord(3, Migrated, "")
	writeLegacyLog(t, dir, []indexLine{
		{Path: "a/one", Record: &r1},
		{Path: "two", Record: &r2},
		{Path: "a/one", Record: &r1b},
		{Path: "three", Record: &r3},
		{Path: "three"},
	}, `{"p":"four","r":{"state":"mig`)

	ix := newIndex(dir)
	requireRecord(t, ix, "a/one", &r1b)
	requireRecord(t, ix, "two", &r2)
	requireRecord(t, ix, "three", nil)
	requireRecord(t, ix, "four", nil)
	_, err := os.Stat(filepath.Join(dir, hubDir, legacyIndexFile))
	require.ErrorIs(t, err, os.ErrNotExist, "the old log is still in use")
	_, err = os.Stat(filepath.Join(dir, hubDir, legacyImported))
	require.NoError(t, err)

	// Another process reads the records from the index itself.
	other := newIndex(dir)
	requireRecord(t, other, "a/one", &r1b)
	require.NoError(t, other.remove("a/one"))
	requireRecord(t, newIndex(dir), "a/one", nil)
	requireRecord(t, ix, "two", &r2)
	requireNoTemp(t, dir)
}

// Several processes opening a root with an old log at once: one imports,
// the others wait for it, and what each then writes stays. Where the
// filesystem has no locks the imports race, and still none of the old
// records nor of the new ones is lost.
func TestIndexConcurrentImport(t *testing.T) {
	for _, locks := range []bool{true, false} {
		t.Run(map[bool]string{true: "locked", false: "without locks"}[locks], func(t *testing.T) {
			if !locks {
				saved := lockIndex
				lockIndex = func(string) (func(), error) { return func() {}, nil }
				t.Cleanup(func() { lockIndex = saved })
			}
			dir := t.TempDir()
			// Enough changes that the log of earlier versions would have been
			// rewritten by whichever process wrote next.
			const old = 2100
			var lines []indexLine
			want := map[string]*Record{}
			for i := range old {
				first, last := indexRecord(i, Premigrated, ""), indexRecord(i, Migrated, "")
				rel := fmt.Sprintf("old/%02d/f%04d", i%10, i)
				lines = append(lines, indexLine{Path: rel, Record: &first}, indexLine{Path: rel, Record: &last})
				want[rel] = &last
			}
			writeLegacyLog(t, dir, lines, "")

			const nodes = 4
			start := make(chan struct{})
			var mu sync.Mutex
			var wg sync.WaitGroup
			for n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ix := newIndex(dir)
					<-start
					_, err := ix.get("old/00/f0000")
					if !assert.NoError(t, err) {
						return
					}
					for i := range 30 {
						rel := fmt.Sprintf("new/n%d-%d", n, i)
						rec := indexRecord(10000+100*n+i, Premigrated, "")
						if !assert.NoError(t, ix.set(rel, rec)) {
							return
						}
						mu.Lock()
						want[rel] = &rec
						mu.Unlock()
						if !locks {
							continue // an import without locks may still be writing old records
						}
						// Each node changes and removes old records of its own.
						changed := fmt.Sprintf("old/%02d/f%04d", (nodes*i+n)%10, nodes*i+n)
						removed := fmt.Sprintf("old/%02d/f%04d", (nodes*(i+100)+n)%10, nodes*(i+100)+n)
						if !assert.NoError(t, ix.set(changed, rec)) || !assert.NoError(t, ix.remove(removed)) {
							return
						}
						mu.Lock()
						want[changed], want[removed] = &rec, nil
						mu.Unlock()
					}
				}()
			}
			close(start)
			wg.Wait()
			reader := newIndex(dir)
			for rel, rec := range want {
				requireRecord(t, reader, rel, rec)
			}
			_, err := os.Stat(filepath.Join(dir, hubDir, legacyIndexFile))
			require.ErrorIs(t, err, os.ErrNotExist)
			requireNoTemp(t, dir)
		})
	}
}

// TestIndexChild is one node of TestIndexProcesses or a worker killed by
// TestIndexImportKilled; on its own it does nothing.
func TestIndexChild(t *testing.T) {
	dir, node := os.Getenv("HUB_INDEX_CHILD_ROOT"), os.Getenv("HUB_INDEX_CHILD_NODE")
	if dir == "" {
		return
	}
	// As a worker does: the process's shared index, through the state
	// store, which signs the records.
	s := openStateStore(dir, false)
	if node == "" { // TestIndexImportKilled: open the root, nothing more
		_, err := s.get("", "old/0000")
		require.NoError(t, err)
		return
	}
	set := func(rel string, rec Record) error { return s.set("", rel, rec) }
	for i := range indexFiles {
		rel := fmt.Sprintf("d%02d/e%d/%s-%04d", i%7, i%3, node, i)
		_, err := lifecycle(set, rel, i)
		require.NoError(t, err)
		if i%10 == 0 {
			require.NoError(t, s.clear("", rel))
		}
	}
	// Each node changes one half of the old records.
	for i := range 200 {
		rel := fmt.Sprintf("old/%04d", i)
		switch {
		case node == "a" && i%2 == 0:
			require.NoError(t, s.clear("", rel))
		case node == "b" && i%2 == 1:
			require.NoError(t, set(rel, indexRecord(5000+i, Migrated, "")))
		}
	}
	require.NoError(t, s.sync())
}

func indexChild(dir, node string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestIndexChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(env, "HUB_INDEX_CHILD_ROOT="+dir, "HUB_INDEX_CHILD_NODE="+node)...)
	return cmd
}

// Two worker processes on one root, as two nodes of a site: they import
// the old log once between them and lose none of each other's records.
func TestIndexProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var lines []indexLine
	for i := range 200 {
		rec := indexRecord(i, Migrated, "")
		lines = append(lines, indexLine{Path: fmt.Sprintf("old/%04d", i), Record: &rec})
	}
	writeLegacyLog(t, dir, lines, "")

	var outs [2]bytes.Buffer
	var cmds []*exec.Cmd
	for n, node := range []string{"a", "b"} {
		cmd := indexChild(dir, node)
		cmd.Stdout, cmd.Stderr = &outs[n], &outs[n]
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	for n, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "%s", outs[n].String())
	}

	s := openStateStore(dir, false)
	check := func(rel string, want *Record) {
		t.Helper()
		got, err := s.get("", rel)
		require.NoError(t, err)
		if want == nil {
			require.Nil(t, got, "%s: record not removed", rel)
			return
		}
		require.NotNil(t, got, "%s: record lost", rel)
		require.NoError(t, s.signer.check(*got), rel)
		got.Sig = want.Sig
		require.Equal(t, *want, *got, rel)
	}
	for _, node := range []string{"a", "b"} {
		for i := range indexFiles {
			rel := fmt.Sprintf("d%02d/e%d/%s-%04d", i%7, i%3, node, i)
			if i%10 == 0 {
				check(rel, nil)
			} else {
				rec := indexRecord(i, Migrated, "")
				check(rel, &rec)
			}
		}
	}
	for i := range 200 {
		rel := fmt.Sprintf("old/%04d", i)
		if i%2 == 0 {
			check(rel, nil)
		} else {
			rec := indexRecord(5000+i, Migrated, "")
			check(rel, &rec)
		}
	}
	_, err := os.Stat(filepath.Join(dir, hubDir, legacyIndexFile))
	require.ErrorIs(t, err, os.ErrNotExist)
	requireNoTemp(t, dir)
}

// A worker killed while it imports the old log (at every instant between
// two filesystem operations of the import) leaves the log in place, and
// the next one imports it whole.
func TestIndexImportKilled(t *testing.T) {
	t.Parallel()
	const old = 20
	var lines []indexLine
	for i := range old {
		rec := indexRecord(i, Migrated, "")
		lines = append(lines, indexLine{Path: fmt.Sprintf("old/%04d", i), Record: &rec})
	}
	points := []string{"index.imported@1"}
	for _, p := range []string{"temp.created", "temp.marked", "commit.before-rename", "commit.renamed"} {
		points = append(points, p+"@1", p+fmt.Sprintf("@%d", old/2), p+fmt.Sprintf("@%d", old))
	}
	for _, point := range points {
		dir := t.TempDir()
		writeLegacyLog(t, dir, lines, "")
		out, err := indexChild(dir, "", "HUB_FAULT_POINT="+point).CombinedOutput()
		require.Error(t, err, "not killed at %s: %s", point, out)
		ix := newIndex(dir)
		for i := range old {
			rec := indexRecord(i, Migrated, "")
			requireRecord(t, ix, fmt.Sprintf("old/%04d", i), &rec)
		}
		_, err = os.Stat(filepath.Join(dir, hubDir, legacyImported))
		require.NoError(t, err, "after a kill at %s", point)
		requireNoTemp(t, dir)
	}
}

// The index's cost per file: a lookup where most files have no record
// (a walk), a lookup of a record, and a change (one small file written
// and flushed).
func BenchmarkIndex(b *testing.B) {
	dir := b.TempDir()
	ix := newIndex(dir)
	rec := indexRecord(1, Migrated, "")
	require.NoError(b, ix.set("d00/e00/present.bin", rec))
	b.Run("get-missing", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if r, err := ix.get(fmt.Sprintf("d%02d/e%02d/f%04d.bin", i%10, i%7, i%2000)); err != nil || r != nil {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if r, err := ix.get("d00/e00/present.bin"); err != nil || r == nil {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("set", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			require.NoError(b, ix.set(fmt.Sprintf("d%02d/e%02d/f%04d.bin", i%10, i%7, i%2000), rec))
		}
	})
	b.Run("remove-missing", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, ix.remove("d99/none.bin"))
		}
	})
}
