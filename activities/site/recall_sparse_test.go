package site

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// scratchBlocks is the allocated size (512-byte blocks) of the unnamed
// files (O_TMPFILE: "#<inode> (deleted)") in dir this process has open:
// a recall's scratch file.
func scratchBlocks(t *testing.T, dir string) (files int, blocks int64) {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range ents {
		fd := "/proc/self/fd/" + e.Name()
		to, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(to, dir+"/#") || !strings.HasSuffix(to, " (deleted)") {
			continue
		}
		if fi, err := os.Stat(fd); err == nil {
			files++
			blocks += fi.Sys().(*syscall.Stat_t).Blocks
		}
	}
	return files, blocks
}

// TestARecallKeepsHoles checks that a recall brings a sparse file back
// sparse, in its scratch file and in place: it wrote every byte, zeros
// included, so a sparse file (a disk image, `truncate -s 1T`) came back
// allocated whole, and a migrate and recall could fill the volume (a
// reviewer's finding). The data read back is the data exactly, with a
// stub of bytes (some of them zeros), zeros at odd offsets, and zeros at
// the end (the file extended to its size) or not.
func TestARecallKeepsHoles(t *testing.T) {
	for _, zeroEnd := range []bool{false, true} {
		t.Run("zeros at the end "+strconv.FormatBool(zeroEnd), func(t *testing.T) {
			dir := t.TempDir()
			abs := filepath.Join(dir, "sparse")
			const size = 64 << 20
			f, err := os.Create(abs)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(size))
			for _, at := range []int64{0, 200, 5<<20 + 7, 30<<20 - 3, 40 << 20} {
				_, err = f.WriteAt([]byte("data, amid zeros"), at)
				require.NoError(t, err)
			}
			if !zeroEnd {
				_, err = f.WriteAt([]byte("end"), size-3)
				require.NoError(t, err)
			}
			require.NoError(t, f.Close())
			data, err := os.ReadFile(abs)
			require.NoError(t, err)
			before := blocks(t, abs)
			root := newRoot(t, dir, false)
			target := fsTarget(t)
			res, err := Migrate(context.Background(), root, []string{"/sparse"}, target, "t", StepOptions{StubSize: 300})
			require.NoError(t, err)
			require.Equal(t, CodeOK, res[0].Code, res[0].Message)
			files, inScratch := 0, int64(-1)
			recallWriting = func(string) { files, inScratch = scratchBlocks(t, dir) }
			t.Cleanup(func() { recallWriting = nil })
			res, err = Recall(context.Background(), root, []string{"/sparse"}, only("t", target), StepOptions{})
			recallWriting = nil
			require.NoError(t, err)
			require.Equal(t, CodeOK, res[0].Code, res[0].Message)
			got, err := os.ReadFile(abs)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got), "the recalled file is not the data")
			after := blocks(t, abs)
			t.Logf("blocks (512 B) of %d MiB: before %d, after the recall %d; the scratch file (%d) %d", size>>20, before, after, files, inScratch)
			require.Equal(t, 1, files, "the scratch file was not found")
			require.LessOrEqual(t, inScratch, int64(4<<10), "the scratch file allocated the holes")
			require.LessOrEqual(t, after, int64(4<<10), "the recall allocated the holes")
		})
	}
}
