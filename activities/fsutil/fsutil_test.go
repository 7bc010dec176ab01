package fsutil

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWriteFileReusesADeadWritersTemp(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "settings.json")
	require.NoError(t, os.WriteFile(TempName(name), []byte("half a fi"), 0o600)) // a killed writer's leftover
	require.NoError(t, WriteFile(name, []byte("{}\n"), 0o644))
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, "{}\n", string(got))
	fi, err := os.Stat(name)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
}

func TestOpenTempWaitsForTheWriterHoldingIt(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "obj")
	first, err := OpenTemp(context.Background(), dst)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = OpenTemp(ctx, dst)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a second writer waits while the first holds the file")

	done := make(chan *os.File)
	go func() {
		f, err := OpenTemp(context.Background(), dst)
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	_, err = first.WriteString("first")
	require.NoError(t, err)
	require.NoError(t, os.Rename(first.Name(), dst))
	require.NoError(t, first.Close())
	second := <-done
	defer Discard(second)
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	require.Equal(t, "first", string(got), "the second writer got a new file, not the renamed one")
	fi, err := second.Stat()
	require.NoError(t, err)
	require.Zero(t, fi.Size())
}
