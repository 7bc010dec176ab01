package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// clientJob is what the client reads of a job (GET /api/jobs/{id}/).
type clientJob struct {
	ID                int64    `json:"id"`
	Workflow          string   `json:"workflow"`
	Site              string   `json:"site"`
	State             string   `json:"state"`
	HasFailures       bool     `json:"has_failures"`
	Error             string   `json:"error"`
	Created           string   `json:"created"`
	Runtime           *float64 `json:"runtime"`
	Progress          float64  `json:"progress"`
	Paths             []string `json:"paths"`
	Run               int      `json:"run"`
	NumFiles          int64    `json:"numfiles"`
	NumProcessedFiles int64    `json:"numprocessedfiles"`
	NumFailedFiles    int64    `json:"numfailedfiles"`
	NumSkippedFiles   int64    `json:"numskippedfiles"`
	NumAbortedFiles   int64    `json:"numabortedfiles"`
	NumCancelledFiles int64    `json:"numcancelledfiles"`
}

// clientProgress is GET /api/jobs/{id}/progress/.
type clientProgress struct {
	ID                int64   `json:"id"`
	State             string  `json:"state"`
	Progress          float64 `json:"progress"`
	DirWalkComplete   bool    `json:"dir_walk_complete"`
	NumFiles          int64   `json:"numfiles"`
	NumProcessedFiles int64   `json:"numprocessedfiles"`
	NumFailedFiles    int64   `json:"numfailedfiles"`
	NumSkippedFiles   int64   `json:"numskippedfiles"`
	Live              *struct {
		Paused          bool  `json:"paused"`
		FilesDone       int64 `json:"files_done"`
		FilesUnrecorded int64 `json:"files_unrecorded"`
		BytesDone       int64 `json:"bytes_done"`
		Steps           []struct {
			Step      string `json:"step"`
			Bytes     int64  `json:"bytes"`
			BytesDone int64  `json:"bytes_done"`
		} `json:"steps"`
	} `json:"live"`
}

// done is how many of the job's files have an outcome, counting those
// finished inside the batches in flight.
func (p *clientProgress) done() int64 {
	n := p.NumProcessedFiles + p.NumFailedFiles + p.NumSkippedFiles
	if p.Live != nil {
		n += p.Live.FilesDone + p.Live.FilesUnrecorded
	}
	if p.NumFiles > 0 {
		n = min(n, p.NumFiles)
	}
	return n
}

// inFlightBytes sums the bytes done and to do of the steps running.
func (p *clientProgress) inFlightBytes() (done, total int64) {
	if p.Live == nil {
		return 0, 0
	}
	for _, s := range p.Live.Steps {
		done += s.BytesDone
		total += s.Bytes
	}
	return done, total
}

func finished(state string) bool {
	switch state {
	case "SUCCESS", "FAILURE", "CANCELLED":
		return true
	}
	return false
}

func clientJobsCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Submit, watch, list and control jobs", Args: cobra.NoArgs}
	cmd.AddCommand(jobsSubmitCmd(o), jobsWatchCmd(o), jobsListCmd(o), jobsShowCmd(o),
		jobsControlCmd(o, "pause", "Stop dispatching the job's batches (those running finish)"),
		jobsControlCmd(o, "resume", "Dispatch the paused job's batches again"),
		jobsControlCmd(o, "cancel", "Cancel the job: running steps stop, what is left can be resubmitted"),
		jobsControlCmd(o, "resubmit", "Run again what the finished job failed, aborted or had cancelled"))
	return cmd
}

func jobsSubmitCmd(o *clientOptions) *cobra.Command {
	var site, workflow string
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "submit --site S --workflow W PATH...",
		Short: "Start a workflow on paths of a site (a job); --watch follows it to its end",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			if site == "" || workflow == "" {
				return fmt.Errorf("--site and --workflow are required")
			}
			c, err := newAPIClient(o, true)
			if err != nil {
				return err
			}
			var out struct {
				Job int64 `json:"job"`
			}
			body := map[string]any{"site": site, "workflow": workflow, "paths": paths}
			if err := c.do(cmd.Context(), http.MethodPost, "/api/file/workflow/", body, &out); err != nil {
				return err
			}
			if !watch {
				if o.JSON {
					return printJSON(cmd.OutOrStdout(), out)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Job %d submitted: hub client jobs watch %d\n", out.Job, out.Job)
				return nil
			}
			if !o.JSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "Job %d submitted.\n", out.Job)
			}
			return watchJob(cmd, o, c, out.Job, interval)
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the site whose paths these are")
	cmd.Flags().StringVar(&workflow, "workflow", "", "the workflow to run (premigrate, migrate, recall, …)")
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the job with a progress bar until it ends; the exit code tells how it ended")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often --watch asks for progress")
	return cmd
}

func jobsWatchCmd(o *clientOptions) *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a job with a progress bar until it ends; the exit code tells how it ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := jobID(args[0])
			if err != nil {
				return err
			}
			c, err := newAPIClient(o, true)
			if err != nil {
				return err
			}
			return watchJob(cmd, o, c, id, interval)
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often to ask for progress")
	return cmd
}

// watchJob polls the job's progress until it ends, drawing a bar on a
// terminal, a line per change elsewhere (JSON lines with --json), then
// prints a summary and returns the exit status of the job's outcome.
func watchJob(cmd *cobra.Command, o *clientOptions, c *apiClient, id int64, interval time.Duration) error {
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	view := newWatchView(w, o.JSON)
	var p clientProgress
	for {
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/jobs/%d/progress/", id), nil, &p); err != nil {
			view.stop()
			return err
		}
		view.show(&p)
		if finished(p.State) {
			break
		}
		select {
		case <-ctx.Done():
			view.stop()
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	view.stop()
	var j clientJob
	if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil, &j); err != nil {
		return err
	}
	var st struct {
		Bytes int64 `json:"bytes"`
	}
	_ = c.do(ctx, http.MethodGet, fmt.Sprintf("/api/jobs/%d/statistics/", id), nil, &st) // the summary goes without bytes otherwise
	if o.JSON {
		if err := printJSON(w, map[string]any{"job": j, "bytes": st.Bytes}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w, summary(&j, st.Bytes))
	}
	switch {
	case j.State != "SUCCESS":
		return &exitError{code: exitJobFailed, msg: fmt.Sprintf("job %d ended %s", j.ID, j.State)}
	case j.HasFailures || j.NumFailedFiles > 0 || j.NumAbortedFiles > 0:
		return &exitError{code: exitJobHasFailures, msg: fmt.Sprintf("job %d had failures", j.ID)}
	}
	return nil
}

// summary is the line a watch ends with.
func summary(j *clientJob, bytes int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %d %s", j.ID, j.State)
	if j.Runtime != nil {
		fmt.Fprintf(&b, " in %s", (time.Duration(*j.Runtime*1000) * time.Millisecond).Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, ": %d files, %d succeeded, %d failed, %d skipped, %d aborted, %d cancelled; %s",
		j.NumFiles, j.NumProcessedFiles, j.NumFailedFiles, j.NumSkippedFiles, j.NumAbortedFiles, j.NumCancelledFiles,
		progressbarBytes(bytes))
	if j.Error != "" {
		fmt.Fprintf(&b, "\nError: %s", j.Error)
	}
	if j.NumFailedFiles > 0 {
		fmt.Fprintf(&b, "\nFailed paths: GET /api/jobs/%d/files/?category=failure", j.ID)
	}
	return b.String()
}

// watchView draws a job's progress: a bar on a terminal, lines otherwise.
type watchView struct {
	w     io.Writer
	json  bool
	bar   *progressbar.ProgressBar
	last  string
	start time.Time
	// most is the highest count shown: the hub's live count may exceed the
	// truth for an instant while a batch's outcomes are recorded
	// (docs/jobs.md, "Live progress"), and a bar does not go back.
	most int64
}

func newWatchView(w io.Writer, asJSON bool) *watchView {
	v := &watchView{w: w, json: asJSON, start: time.Now()}
	if f, ok := w.(*os.File); ok && !asJSON && term.IsTerminal(int(f.Fd())) {
		v.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("files"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetRenderBlankState(true), progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSpinnerType(14))
	}
	return v
}

func (v *watchView) show(p *clientProgress) {
	done := max(p.done(), v.most)
	v.most = done
	bd, bt := p.inFlightBytes()
	desc := p.State
	if p.Live != nil && p.Live.Paused {
		desc += " (paused)"
	}
	if failed := p.NumFailedFiles; failed > 0 {
		desc += fmt.Sprintf(", %d failed", failed)
	}
	if bt > 0 {
		desc += fmt.Sprintf(", %s of %s in flight", progressbarBytes(bd), progressbarBytes(bt))
	}
	switch {
	case v.json:
		line, _ := json.Marshal(p)
		if string(line) != v.last {
			fmt.Fprintln(v.w, string(line))
			v.last = string(line)
		}
	case v.bar != nil:
		if p.DirWalkComplete && p.NumFiles > 0 && v.bar.GetMax64() != p.NumFiles {
			v.bar.ChangeMax64(p.NumFiles)
		}
		v.bar.Describe(desc)
		_ = v.bar.Set64(done)
	default:
		total := "?"
		if p.DirWalkComplete {
			total = strconv.FormatInt(p.NumFiles, 10)
		}
		line := fmt.Sprintf("job %d %s %.2f%% %d/%s files", p.ID, desc, p.Progress, done, total)
		if line != v.last {
			fmt.Fprintf(v.w, "%s [%s]\n", line, time.Since(v.start).Round(time.Second))
			v.last = line
		}
	}
}

func (v *watchView) stop() {
	if v.bar != nil {
		_ = v.bar.Exit()
		fmt.Fprintln(v.w)
	}
}

// progressbarBytes renders a byte count for people.
func progressbarBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// checkLimit refuses page sizes the API would silently change (it serves
// 20 to 100 a page).
func checkLimit(n int) error {
	if n < 20 || n > 100 {
		return fmt.Errorf("--limit %d: the hub serves 20 to 100 entries a page", n)
	}
	return nil
}

func jobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not a job id", s)
	}
	return id, nil
}

func jobsListCmd(o *clientOptions) *cobra.Command {
	var state, site, workflow string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			c, err := newAPIClient(o, true)
			if err != nil {
				return err
			}
			q := url.Values{"page_size": {strconv.Itoa(limit)}}
			for k, v := range map[string]string{"state": state, "site": site, "workflow": workflow} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var page struct {
				Count   int64             `json:"count"`
				Results []json.RawMessage `json:"results"`
			}
			if err := c.do(cmd.Context(), http.MethodGet, "/api/jobs/?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			if o.JSON {
				return printJSON(cmd.OutOrStdout(), page)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tWORKFLOW\tSITE\tPROGRESS\tFILES\tFAILED\tCREATED")
			for _, raw := range page.Results {
				var j clientJob
				if err := json.Unmarshal(raw, &j); err != nil {
					return err
				}
				state := j.State
				if j.HasFailures && state == "SUCCESS" {
					state += "*"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.0f%%\t%d\t%d\t%s\n", j.ID, state, j.Workflow, j.Site, j.Progress,
					j.NumFiles, j.NumFailedFiles, shortTime(j.Created))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if int64(len(page.Results)) < page.Count {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d jobs (--limit).\n", len(page.Results), page.Count)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only jobs in this state (PENDING, STARTED, PAUSED, SUCCESS, FAILURE, CANCELLED, HAS_FAILURES, …)")
	cmd.Flags().StringVar(&site, "site", "", "only jobs of this site")
	cmd.Flags().StringVar(&workflow, "workflow", "", "only jobs of this workflow")
	cmd.Flags().IntVar(&limit, "limit", 20, "how many jobs at most, 20 to 100 (the API's page sizes)")
	return cmd
}

// shortTime renders an API time in local time to the second.
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func jobsShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a job and its progress",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := jobID(args[0])
			if err != nil {
				return err
			}
			c, err := newAPIClient(o, true)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.do(cmd.Context(), http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil, &raw); err != nil {
				return err
			}
			if o.JSON {
				var v any
				_ = json.Unmarshal(raw, &v)
				return printJSON(cmd.OutOrStdout(), v)
			}
			var j clientJob
			if err := json.Unmarshal(raw, &j); err != nil {
				return err
			}
			var p clientProgress
			if err := c.do(cmd.Context(), http.MethodGet, fmt.Sprintf("/api/jobs/%d/progress/", id), nil, &p); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
			row("Job", "%d", j.ID)
			row("State", "%s", j.State)
			row("Workflow", "%s", j.Workflow)
			row("Site", "%s", j.Site)
			row("Paths", "%s", strings.Join(j.Paths, " "))
			row("Created", "%s", shortTime(j.Created))
			if j.Runtime != nil {
				row("Runtime", "%s", (time.Duration(*j.Runtime*1000) * time.Millisecond).Round(100*time.Millisecond))
			}
			row("Progress", "%.2f%% (%d of %d files)", p.Progress, p.done(), p.NumFiles)
			row("Files", "%d succeeded, %d failed, %d skipped, %d aborted, %d cancelled",
				j.NumProcessedFiles, j.NumFailedFiles, j.NumSkippedFiles, j.NumAbortedFiles, j.NumCancelledFiles)
			row("Has failures", "%t", j.HasFailures)
			row("Runs", "%d", j.Run)
			if j.Error != "" {
				row("Error", "%s", j.Error)
			}
			return tw.Flush()
		},
	}
}

func jobsControlCmd(o *clientOptions, action, short string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := jobID(args[0])
			if err != nil {
				return err
			}
			c, err := newAPIClient(o, true)
			if err != nil {
				return err
			}
			var out map[string]any
			if err := c.do(cmd.Context(), http.MethodPost, fmt.Sprintf("/api/jobs/%d/%s/", id, action), nil, &out); err != nil {
				return err
			}
			if o.JSON {
				return printJSON(cmd.OutOrStdout(), out)
			}
			var j clientJob
			if err := c.do(context.WithoutCancel(cmd.Context()), http.MethodGet, fmt.Sprintf("/api/jobs/%d/", id), nil, &j); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Job %d: %s requested; it is %s.\n", id, action, j.State)
			return nil
		},
	}
}
