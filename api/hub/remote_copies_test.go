package hub_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/hub/apitest"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// targetObject is where a filesystem target keeps the copy of data.
func targetObject(targetDir string, data []byte) string {
	return filepath.Join(targetDir, filepath.FromSlash(site.ContentKey(sha256Hex(data))))
}

// TestCollectRemoteCopies: a file premigrated, changed and premigrated
// again leaves its first version unreferenced on the target. The
// collect_remote_copies action moves it to the target's trash (the current
// version stays), where it waits out the grace period before deletion.
func TestCollectRemoteCopies(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	s := newJobSite(t, e, "gc")
	abs := filepath.Join(s.root, "data", "a.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
	for _, v := range []string{"first version", "second version"} {
		require.NoError(t, os.WriteFile(abs, []byte(v), 0o644))
		job := runJob(t, e, "gc", "premigrate", []string{"/data"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
	}
	first, second := targetObject(s.targetDir, []byte("first version")), targetObject(s.targetDir, []byte("second version"))
	require.FileExists(t, first)
	require.FileExists(t, second)

	r := e.AsAdmin(http.MethodPost, "/api/actions/", map[string]any{"action": "collect_remote_copies"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	var a map[string]any
	require.Eventually(t, func() bool {
		a = e.AsAdmin(http.MethodGet, "/api/actions/"+catID(r.Map()["id"])+"/", nil).Map()
		return a["state"] == "SUCCESS" || a["state"] == "FAILURE"
	}, time.Minute, 50*time.Millisecond)
	require.Equal(t, "SUCCESS", a["state"], a)
	require.Equal(t, "target gc-fs: 2 copies, 1 moved to the trash, 0 restored, 0 deleted", a["results"])
	require.NoFileExists(t, first)
	require.FileExists(t, filepath.Join(s.targetDir, "trash", sha256Hex([]byte("first version"))))
	require.FileExists(t, second)
	apitest.RecordHistories(t, e.Temporal)
}
