package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
)

// cliSite makes a site with a filesystem target and a live site worker
// over a real folder holding n small files under /data; it returns the
// site's root.
func cliSite(t *testing.T, e *apitest.Env, name string, n, batch int) string {
	ctx := context.Background()
	s, err := models.EnsureSite(ctx, e.DB, name)
	require.NoError(t, err)
	_, err = e.DB.NewUpdate().Model((*models.Site)(nil)).Set("file_batch_size = ?", batch).Where("id = ?", s.ID).Exec(ctx)
	require.NoError(t, err)
	root := t.TempDir()
	tgt := &models.ExternalTarget{Name: name + "-fs", StorageType: "filesystem", LocalFileRegex: ".*", Enabled: true}
	tgt.MigrationTargetFolder = t.TempDir()
	require.NoError(t, models.SaveExternalTarget(ctx, e.DB, tgt, []int64{s.ID}))
	e.StartSiteWorker(worker.SiteConfig{Site: name, Queue: "default", Node: name + "-n1", Root: root, HeartbeatInterval: time.Second})
	for i := range n {
		p := filepath.Join(root, "data", fmt.Sprintf("d%d", i%5), fmt.Sprintf("f%04d", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 1000+i), 0o644))
	}
	return root
}

// hubClient runs "hub client --url <e> args…" in this process with out as
// its standard output and stdin as its input, and returns its error (the
// process's exit code is exitCode(err)).
func hubClient(e *apitest.Env, out io.Writer, stdin string, args ...string) error {
	cmd := rootCmd()
	cmd.SetArgs(append([]string{"client", "--url", e.URL}, args...))
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetIn(strings.NewReader(stdin))
	return cmd.ExecuteContext(context.Background())
}

// TestClientEndToEnd drives the client against a hub with a hub worker
// and a site worker, on each database: login (tokens kept in the user's
// config dir, refreshed when the hub refuses the access token), submit
// with --watch to the end (summary and exit code 0), a job whose paths
// fail (exit code 3, the failures in the summary), list, show, controls
// and browsing, as tables and as JSON.
func TestClientEndToEnd(t *testing.T) {
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		t.Setenv("XDG_CONFIG_HOME", t.TempDir())
		e.StartHubWorker()
		const n = 300
		root := cliSite(t, e, "cli", n, 100)
		var out bytes.Buffer

		err := hubClient(e, &out, "", "jobs", "list")
		require.ErrorContains(t, err, "not logged in to "+e.URL+": run hub client login")
		require.Error(t, hubClient(e, &out, "wrong-password\n", "login", "--username", "admin", "--password-stdin"))
		require.NoError(t, hubClient(e, &out, apitest.AdminPassword+"\n", "login", "--username", "admin", "--password-stdin"))
		cfgDir, err := os.UserConfigDir()
		require.NoError(t, err)
		credPath := filepath.Join(cfgDir, "hub", "credentials.json")
		fi, err := os.Stat(credPath)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "tokens are the user's alone")
		creds, err := loadCredentials()
		require.NoError(t, err)
		require.NotEmpty(t, creds[e.URL].Refresh)

		// An access token the hub refuses (as an expired one) is renewed
		// with the refresh token, and the new one is kept.
		stale := creds[e.URL]
		stale.Access = "expired." + stale.Access
		require.NoError(t, saveCredentials(e.URL, &stale))

		out.Reset()
		err = hubClient(e, &out, "", "jobs", "submit", "--site", "cli", "--workflow", "premigrate", "--watch", "--interval", "100ms", "/data")
		require.NoError(t, err, out.String())
		text := out.String()
		require.Regexp(t, `(?m)^Job 1 SUCCESS in [0-9.]+m?s: 300 files, 300 succeeded, 0 failed, 0 skipped, 0 aborted, 0 cancelled; [0-9.]+ KiB$`, text)
		require.Contains(t, text, "job 1 STARTED", "a line per change of progress off a terminal")
		creds, err = loadCredentials()
		require.NoError(t, err)
		require.NotEqual(t, stale.Access, creds[e.URL].Access, "the refreshed access token is kept")
		require.Equal(t, stale.Refresh, creds[e.URL].Refresh)

		// Paths that do not exist fail: the job ends with failures, exit 3.
		for i := range 10 {
			require.NoError(t, os.MkdirAll(filepath.Join(root, "more"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "more", fmt.Sprintf("m%d", i)), []byte("more"), 0o644))
		}
		out.Reset()
		err = hubClient(e, &out, "", "jobs", "submit", "--site", "cli", "--workflow", "premigrate", "--watch", "--interval", "100ms",
			"/more", "/missing-one", "/missing-two")
		require.Error(t, err, out.String())
		require.Equal(t, exitJobHasFailures, exitCode(err), "%v\n%s", err, out.String())
		require.Regexp(t, `(?m)^Job 2 SUCCESS in .*: 12 files, 10 succeeded, 2 failed, `, out.String())
		require.Contains(t, out.String(), "Failed paths: GET /api/jobs/2/files/?category=failure")

		// Only paths that fail: the job fails, exit 2.
		out.Reset()
		err = hubClient(e, &out, "", "jobs", "submit", "--site", "cli", "--workflow", "premigrate", "--watch", "--interval", "100ms", "/missing")
		require.Equal(t, exitJobFailed, exitCode(err), "%v\n%s", err, out.String())
		require.ErrorContains(t, err, "job 3 ended FAILURE")
		require.Regexp(t, `(?m)^Job 3 FAILURE in .*: 1 files, 0 succeeded, 1 failed, `, out.String())
		require.Contains(t, out.String(), "\nError: every path failed")

		// The same watch as JSON: progress lines, then the job.
		out.Reset()
		err = hubClient(e, &out, "", "--json", "jobs", "watch", "2")
		require.Equal(t, exitJobHasFailures, exitCode(err))
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var progress map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &progress), lines[0])
		require.Equal(t, "SUCCESS", progress["state"])
		var final struct {
			Job   clientJob `json:"job"`
			Bytes int64     `json:"bytes"`
		}
		require.NoError(t, json.Unmarshal([]byte(strings.Join(lines[1:], "\n")), &final))
		require.Equal(t, int64(2), final.Job.NumFailedFiles)
		require.Positive(t, final.Bytes)

		out.Reset()
		require.NoError(t, hubClient(e, &out, "", "jobs", "list"))
		require.Regexp(t, `(?m)^ID\s+STATE\s+WORKFLOW\s+SITE\s+PROGRESS\s+FILES\s+FAILED\s+CREATED$`, out.String())
		require.Regexp(t, `(?m)^2\s+SUCCESS\*\s+premigrate\s+cli\s+100%\s+12\s+2\s`, out.String())
		require.Regexp(t, `(?m)^1\s+SUCCESS\s+premigrate\s+cli\s+100%\s+300\s+0\s`, out.String())
		out.Reset()
		require.NoError(t, hubClient(e, &out, "", "--json", "jobs", "list", "--state", "HAS_FAILURES"))
		var page struct {
			Count   int         `json:"count"`
			Results []clientJob `json:"results"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &page))
		require.Equal(t, 1, page.Count)
		require.Equal(t, int64(2), page.Results[0].ID)

		out.Reset()
		require.NoError(t, hubClient(e, &out, "", "jobs", "show", "1"))
		require.Regexp(t, `(?m)^Progress\s+100.00% \(300 of 300 files\)$`, out.String())

		// Controls: a finished job cannot be paused (the API's 409, exit
		// 1); a resubmit runs the failed paths again.
		err = hubClient(e, &out, "", "jobs", "pause", "1")
		require.ErrorContains(t, err, "409 Conflict")
		require.Equal(t, 1, exitCode(err))
		out.Reset()
		require.NoError(t, hubClient(e, &out, "", "jobs", "resubmit", "2"))
		require.Regexp(t, `^Job 2: resubmit requested; it is (PENDING|STARTED|SUCCESS)\.`, out.String())
		out.Reset()
		err = hubClient(e, &out, "", "jobs", "watch", "2")
		require.Equal(t, exitJobHasFailures, exitCode(err), "the missing paths fail again")
		err = hubClient(e, &out, "", "jobs", "show", "x")
		require.ErrorContains(t, err, `"x" is not a job id`)

		out.Reset()
		require.NoError(t, hubClient(e, &out, "", "files", "ls", "--site", "cli", "/data/d1", "--limit", "20"))
		require.Regexp(t, `(?m)^NAME\s+TYPE\s+SIZE\s+MODIFIED\s+STATUS$`, out.String())
		require.Regexp(t, `(?m)^f0001\s+file\s+1001\s`, out.String())
		require.Equal(t, 21, strings.Count(out.String(), "\n"), "a page of 20 of the folder's 60 files under the header")
		require.ErrorContains(t, hubClient(e, &out, "", "files", "ls", "--site", "cli", "/", "--limit", "5"), "20 to 100")
		out.Reset()
		require.NoError(t, hubClient(e, &out, "", "files", "ls", "--site", "cli"))
		require.Regexp(t, `(?m)^data/\s+directory\s`, out.String())
		err = hubClient(e, &out, "", "files", "ls", "--site", "nowhere", "/")
		require.ErrorContains(t, err, "400 Bad Request: site: ")

		require.NoError(t, hubClient(e, &out, "", "logout"))
		require.ErrorContains(t, hubClient(e, &out, "", "jobs", "list"), "not logged in")
	})
}

// TestClientWatchOnTerminal runs a watch whose output is a pseudo-
// terminal: it draws a progress bar (files done of total, rate, time
// left) that moves through intermediate counts, then the summary; a
// cancelled job exits 2.
func TestClientWatchOnTerminal(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	e := apitest.New(t, "sqlite")
	e.StartHubWorker()
	const n = 600
	cliSite(t, e, "tty", n, 20) // 30 batches: several seconds of progress
	require.NoError(t, hubClient(e, io.Discard, apitest.AdminPassword+"\n", "login", "--username", "admin", "--password-stdin"))

	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ptmx.Close(); _ = tty.Close() })
	require.NoError(t, pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 160}))
	var mu sync.Mutex
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			k, err := ptmx.Read(buf)
			mu.Lock()
			screen.Write(buf[:k])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	err = hubClient(e, tty, "", "jobs", "submit", "--site", "tty", "--workflow", "premigrate", "--watch", "--interval", "100ms", "/data")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(screen.String(), "Job 1 SUCCESS")
	}, 10*time.Second, 20*time.Millisecond)
	mu.Lock()
	text := screen.String()
	mu.Unlock()

	require.Contains(t, text, "\r", "the bar redraws its line")
	require.Regexp(t, `files/s`, text, "the bar shows the rate")
	require.Regexp(t, `\[[0-9smh]+:[0-9smh]+\]`, text, "the bar shows elapsed and left")
	var mid []int
	for _, m := range regexp.MustCompile(`\((\d+)/600,`).FindAllStringSubmatch(text, -1) {
		if k, _ := strconv.Atoi(m[1]); k > 0 && k < n {
			mid = append(mid, k)
		}
	}
	require.NotEmpty(t, mid, "the bar showed counts between 0 and %d:\n%q", n, text)
	require.IsNonDecreasing(t, mid, "the bar never goes back")
	if os.Getenv("HUB_TEST_SHOW_TTY") != "" {
		t.Logf("%q", text)
	}
	require.Regexp(t, `Job 1 SUCCESS in .*: 600 files, 600 succeeded, 0 failed`, text)
	t.Logf("intermediate counts drawn: %v", mid)

	// A job cancelled while it runs: its watch ends with exit code 2.
	var out bytes.Buffer
	require.NoError(t, hubClient(e, &out, "", "jobs", "submit", "--site", "tty", "--workflow", "migrate", "/data"))
	require.Equal(t, "Job 2 submitted: hub client jobs watch 2\n", out.String())
	out.Reset()
	require.NoError(t, hubClient(e, &out, "", "jobs", "cancel", "2"))
	require.Regexp(t, `^Job 2: cancel requested; it is (CANCELLING|CANCELLED)\.`, out.String())
	out.Reset()
	err = hubClient(e, &out, "", "jobs", "watch", "2", "--interval", "100ms")
	require.Equal(t, exitJobFailed, exitCode(err), "%v\n%s", err, out.String())
	require.ErrorContains(t, err, "job 2 ended CANCELLED")
	require.Regexp(t, `(?m)^Job 2 CANCELLED`, out.String())
}
