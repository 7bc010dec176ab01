package targets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkFilesystemPut times Put of 2,000 new objects of 4 KiB (an
// unnamed file linked under its key) against the same objects written
// through temporary names (putNamed), each round into an empty target
// folder, the two in turn so that both see the same disk. On a disk whose
// inode allocation dominates (the journal-less ext4 of the dev machines)
// the two differ by less than its noise; TMPDIR=/dev/shm shows what the
// code itself costs.
func BenchmarkFilesystemPut(b *testing.B) {
	ctx := context.Background()
	objects := 2000
	if os.Getenv("HUB_BENCH_QUICK") == "1" { // make test: that it works
		objects = 100
	}
	data := make([]byte, 4096)
	type object struct {
		key, sum string
		data     []byte
	}
	objs := make([]object, objects)
	for i := range objs {
		binary.LittleEndian.PutUint64(data, uint64(i))
		s := sha256.Sum256(data)
		sum := hex.EncodeToString(s[:])
		objs[i] = object{key: "objects/" + sum[:2] + "/" + sum, sum: sum, data: bytes.Clone(data)}
	}
	var unnamed, named time.Duration
	run := func(useNamed bool) {
		d, err := NewFilesystem(Config{MigrationTargetFolder: filepath.Join(b.TempDir(), "target")})
		require.NoError(b, err)
		start := time.Now()
		for _, o := range objs {
			r := &ChecksummedReader{ReadSeeker: bytes.NewReader(o.data), Sum: o.sum}
			if useNamed {
				dst, err := d.path(o.key)
				require.NoError(b, err)
				err = d.putNamed(ctx, o.key, dst, r, int64(len(o.data)))
				require.NoError(b, err)
			} else {
				require.NoError(b, d.Put(ctx, o.key, r, int64(len(o.data))))
			}
		}
		if useNamed {
			named += time.Since(start)
		} else {
			unnamed += time.Since(start)
		}
	}
	// Each iteration runs the two twice, in the order A B B A, and
	// deletes nothing: on a journal-less ext4, files deleted in the last
	// minute make every create slower (recently_deleted), so run it with
	// -test.benchtime 1x after a minute or two of quiet (a count of more
	// than one runs it once first, and the tree that run deletes slows
	// the next).
	for i := 0; i < b.N; i++ {
		for _, n := range []bool{false, true, true, false} {
			run(n)
		}
	}
	b.ReportMetric(float64(unnamed.Microseconds())/1000/float64(2*b.N), "put-ms/op")
	b.ReportMetric(float64(named.Microseconds())/1000/float64(2*b.N), "named-ms/op")
}
