package site

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpenPastAnInstantLease: a recall's end opens the file it just wrote
// back and leased; a process forked meanwhile (another test's, a hook's
// exec) holds the leased descriptor until its exec closes it, and an open
// that does not block failed at once ("resource temporarily unavailable",
// seen in TestKillAtEveryFaultPoint). It waits such a lease out.
func TestOpenPastAnInstantLease(t *testing.T) {
	t.Parallel()
	abs := filepath.Join(t.TempDir(), "f.bin")
	require.NoError(t, os.WriteFile(abs, []byte("leased an instant"), 0o644))
	holder, err := os.OpenFile(abs, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, writeLease(holder))
	require.True(t, leaseHeld(holder))
	go func() {
		time.Sleep(10 * time.Millisecond)
		holder.Close()
	}()
	f, err := openPastLeases(abs, os.O_WRONLY)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
