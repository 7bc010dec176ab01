package workflows

import (
	"encoding/json"
	"time"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// The payloads of the hub activities (activities/hub) that workflows call.
// They live here, with the workflows, so that a workflow never imports the
// hub's database code.

// SiteInventoryInput is a site's inventory to record.
type SiteInventoryInput struct {
	SiteID    int64
	Inventory site.Inventory
}

// SpaceSiteState is the outcome of creating a space's directory on a site.
type SpaceSiteState struct {
	SpaceID int64
	Site    string
	State   string // vocab.SpaceSiteReady or vocab.SpaceSiteError
	Message string
}

// RemoteListInput asks for one page of an external target's content.
type RemoteListInput struct {
	TargetID int64
	Path     string
	MaxItems int
	Marker   string
}

// ShareRef names a share (site.ShareNFS or site.ShareSMB, and its id) and
// the site whose copy of its file is brought up to date.
type ShareRef struct {
	Kind string
	ID   int64
	Site string
}

// ShareOnSite says what the site should hold for a share: its file
// (Write) or none.
type ShareOnSite struct {
	Write  bool
	Config site.ShareConfig
}

// SettingsTaskOutcome is the final state and results of one settings task.
type SettingsTaskOutcome struct {
	TaskID  int64
	State   string // SUCCESS or FAILURE
	Results json.RawMessage
}

// ImportSiteSettingsInput is what a site reported applying.
type ImportSiteSettingsInput struct {
	Site    string
	Applied map[string]json.RawMessage
}

// ImportSiteSettingsResult lists the keys created in the hub and the
// malformed keys left out.
type ImportSiteSettingsResult struct {
	Created []string `json:"created"`
	Skipped []string `json:"skipped"`
}

// ActionState is an action's new state and, once it ends, what it did.
type ActionState struct {
	ID      int64
	State   string
	Results string
}

// SiteRef names a site.
type SiteRef struct {
	ID   int64
	Name string
}

// NASUsers is what a NAS users sync sends: the active users that have a
// NAS identity, to every site.
type NASUsers struct {
	Sites []string
	Users []site.NASUser
}

// MaintenanceResult says what a maintenance pass did.
type MaintenanceResult struct {
	Purged        int
	NotStarted    int
	NotProgressed int
	// PairedSpaces counts C+J spaces given their hub API space.
	PairedSpaces int
	// Cleanups are the purged jobs' batch files to remove, per site queue.
	Cleanups []JobCleanup
}

// JobCleanup names jobs whose records are gone by the site queue whose
// worker keeps their batch files.
type JobCleanup struct {
	Site, Queue string
	JobIDs      []int64
}

// CJPlan is the newest change of a C+J item, as the job engine must apply
// it. Found is false when the item no longer exists (its deletion was
// applied by an earlier run).
type CJPlan struct {
	Found      bool
	ItemID     int64
	Generation int64
	Delete     bool
	// SiteWork is false for items without an effect at the site
	// (templates): the change completes at once.
	SiteWork bool
	Change   site.CJChange
}

// CJOutcome is the result of applying a plan.
type CJOutcome struct {
	ItemID     int64
	Generation int64
	Delete     bool
	// Error is the cause of a failure; empty on success.
	Error   string
	Message string
}

// CJDatastores are the storage pools a site reported.
type CJDatastores struct {
	Site  string
	Pools []site.CJPool
}

// Heartbeat is what a site worker node reports about itself.
type Heartbeat struct {
	Site             string
	Queue            string
	Node             string
	WorkerVersion    string
	EngineVersion    string
	AnalyticsVersion string
	SearchVersion    string
}

// StepPlan is one step of a rule's chain with its parameters resolved
// against the job's runtime fields.
type StepPlan struct {
	Name   string
	Params map[string]any
	// Destination of send and site_sync, and the targets both sites reach
	// (the one used first).
	DestSite  string
	DestQueue string
	Shared    []site.TargetSpec
}

// JobPlan is everything the job workflow needs to run a job: small, so it
// can ride along across continue-as-new.
type JobPlan struct {
	JobID    int64
	Workflow string
	// Site is the site's current name (the job keeps its site by id), which
	// names its task queues.
	Site      string
	Queue     string
	Run       int
	Resubmit  bool // this run reruns what an earlier run left undone
	Discovery string
	// Policy is the selection of a policy's run (Discovery "policy").
	Policy *site.PolicySelect `json:",omitempty"`
	// Paths are the job's paths, filled only by hubs before paged
	// discovery (histories recorded then); now discovery reads them from
	// the database a page at a time (JobPathsPage), since a job may name
	// more of them than a Temporal payload holds.
	Paths       []string
	Include     []string
	Exclude     []string
	Rules       []site.RuleFilter
	Chains      [][]StepPlan // per rule
	BatchSize   int
	BatchBytes  int64
	AutoBatch   bool
	Targets     []site.TargetSpec
	StepTimeout time.Duration // task_invalidation_timeout
	Leftover    []vocab.BatchRef
	// Snapdiff is the pending manifest of the snapdiff run whose failures
	// this resubmit retries, to commit if it succeeds.
	Snapdiff string `json:",omitempty"`
	// State is the job's state when the plan was read: a start delivered
	// again finds its run no longer PENDING and ends without work.
	State string
}

// JobPathsRequest asks for the next page of a job's paths for discovery.
type JobPathsRequest struct {
	JobID int64
	// Next is the index, in the job's list of distinct paths, of the first
	// path wanted.
	Next int
	// Limit and MaxBytes bound the page: at most Limit paths of at most
	// MaxBytes bytes together (at least one path, whatever its length).
	Limit    int
	MaxBytes int
}

// JobPathsPage is one page of a job's paths: each path once (a recursive
// job also drops a path inside another given path, which the walk of the
// outer one covers), in the order given.
type JobPathsPage struct {
	Paths []string
	Next  int  // Next of the following page
	Done  bool // no path follows this page
	// Site is the site's current name.
	Site string
}

// JobStateChange moves a job to a state.
type JobStateChange struct {
	JobID int64
	// Run is the run whose state this is (0: unknown, from before runs
	// were passed): a job in another run is left as it is.
	Run       int
	State     string
	Started   bool
	Completed bool
}

// DiscoveryDone records what discovery found: the file count and the
// explicitly given paths that could not be found.
type DiscoveryDone struct {
	JobID  int64
	Run    int
	Files  int64
	Failed []site.Outcome
	Final  bool // the whole job is discovered (dir_walk_complete)
	// Page numbers discovery pages from 1, one task each; 0 is a job's
	// single discovery (before paged discovery).
	Page int
	// Paged: Found is every entry and failed path discovered by this run so
	// far (the job's numfiles), not only this page's.
	Paged bool
	Found int64
}

// TaskStart describes a task about to run.
type TaskStart struct {
	JobID            int64
	Site, Queue      string
	Run, Batch, Step int
	BatchRun         int // run whose batch file the task reads
	Name             string
	NumPaths         int
}

// TaskEnd is a task's final state with its per-path outcomes.
type TaskEnd struct {
	JobID    int64
	TaskID   int64
	State    string
	Error    string
	Outcomes []site.Outcome
}

// TaskCounts summarises a task's outcomes.
type TaskCounts struct{ Succeeded, Failed, Skipped int }

// JobEnd closes a run: final state, batches left undone (for resubmit) and
// the cancelled/aborted path counts they hold.
type JobEnd struct {
	JobID int64
	// Run is the run that ends (0: unknown, from before runs were passed):
	// a job resubmitted since is left as it is (JobOutcome.Superseded).
	Run       int
	State     string // SUCCESS, FAILURE or CANCELLED; SUCCESS becomes has-failures when paths failed
	Cancelled []vocab.BatchRef
	Aborted   []vocab.BatchRef
	// Error is why a FAILURE run failed; FinishJob composes one when it
	// turns a SUCCESS whose every path failed into FAILURE.
	Error string
	// Snapdiff is the run's pending snapdiff manifest, kept for a
	// resubmit (JobPlan.Snapdiff).
	Snapdiff string `json:",omitempty"`
}

// JobOutcome is what FinishJob decided.
type JobOutcome struct {
	State       string
	HasFailures bool
	// Superseded: the job has moved on to another run (resubmitted after
	// this run's end was recorded once, or after the hub ended it); nothing
	// was recorded, and nothing of the run is to be cleaned up.
	Superseded bool
}

// CollectTarget names a target to collect and the site that runs the
// collection (one the target is available on, so a folder target is
// mounted there and the site can open its credentials).
type CollectTarget struct {
	Site   string
	Target site.TargetSpec
}
