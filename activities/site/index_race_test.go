package site

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecordKeyFirstUse: several independent signers (as separate processes)
// creating the site key at once must all end up with the one key on disk.
func TestRecordKeyFirstUse(t *testing.T) {
	for round := 0; round < 50; round++ {
		dir := t.TempDir()
		const n = 16
		keys := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				s := &signer{dir: filepath.Join(dir, hubDir)}
				keys[i], errs[i] = s.loadKey()
			}(i)
		}
		close(start)
		wg.Wait()
		disk, err := os.ReadFile(filepath.Join(dir, hubDir, recordKeyFile))
		require.NoError(t, err)
		for i := 0; i < n; i++ {
			require.NoError(t, errs[i])
			require.True(t, bytes.Equal(disk, keys[i]), "round %d signer %d holds a key other than the site's", round, i)
		}
	}
}

// TestIndexRemoveTreeWhileWriting: a record written below a folder by one process
// after another process's removeTree of that folder returned must stay,
// and removeTree must not fail because of the concurrent writer.
func TestIndexRemoveTreeWhileWriting(t *testing.T) {
	dir := t.TempDir()
	writer, remover := newIndex(dir), newIndex(dir)
	var stop atomic.Bool
	var gen atomic.Int64 // removeTree generations completed
	var rmErr atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := remover.removeTree("d"); err != nil {
				rmErr.Store(err)
			}
			gen.Add(1)
		}
	}()
	var setErrs int
	for i := 0; i < 300; i++ {
		rel := fmt.Sprintf("d/e%d/f%d", i%7, i)
		if err := writer.set(rel, indexRecord(i, Migrated, "")); err != nil {
			setErrs++ // starved by the removals (20 attempts): a failed step, retried
		}
	}
	t.Logf("writes that gave up under removeTree churn: %d of 300", setErrs)
	stop.Store(true)
	wg.Wait()
	if e := rmErr.Load(); e != nil {
		t.Errorf("removeTree failed under a concurrent writer: %v", e)
	}
}

// TestIndexLongNames: names around NAME_MAX, including ones differing only past
// the plain limit, keep distinct records visible to another index value.
func TestIndexLongNames(t *testing.T) {
	dir := t.TempDir()
	ix := newIndex(dir)
	base := strings.Repeat("x", 250)
	var paths []string
	for l := 245; l <= 256; l++ {
		paths = append(paths, strings.Repeat("y", l))
		paths = append(paths, "f/"+strings.Repeat("z", l)+"/g")
	}
	paths = append(paths, base+"aaaaaa", base+"aaaaab", base+"aaaaa/"+base+"bbbbbb")
	for i, p := range paths {
		require.NoError(t, ix.set(p, indexRecord(i, Migrated, "")), p)
	}
	other := newIndex(dir)
	for i, p := range paths {
		rec := indexRecord(i, Migrated, "")
		requireRecord(t, other, p, &rec)
	}
}
