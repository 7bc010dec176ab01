package vocab

// Job states. Transitions are documented in docs/jobs.md.
const (
	JobPending    = "PENDING"
	JobStarted    = "STARTED"
	JobPausing    = "PAUSING"
	JobPaused     = "PAUSED"
	JobCancelling = "CANCELLING"
	JobCancelled  = "CANCELLED"
	JobSuccess    = "SUCCESS"
	JobFailure    = "FAILURE"
	// JobHasFailures is a filter value, not a stored state: a SUCCESS job
	// with has_failures set (some paths failed, the job ran to its end).
	JobHasFailures = "HAS_FAILURES"
)

// JobFinished reports whether state is final.
func JobFinished(state string) bool {
	return state == JobSuccess || state == JobFailure || state == JobCancelled
}

// Task and per-path states.
const (
	TaskPending   = "PENDING"
	TaskStarted   = "STARTED"
	TaskSuccess   = "SUCCESS"
	TaskFailure   = "FAILURE"
	TaskError     = "ERROR"
	TaskSkipped   = "SKIPPED"
	TaskCancelled = "CANCELLED"
	// PathAborted is a path whose task died or was invalidated.
	PathAborted = "ABORTED"
)

// Action states (alert actions and operator actions).
const (
	ActionPending = "PENDING"
	ActionStarted = "STARTED"
	ActionSuccess = "SUCCESS"
	ActionFailure = "FAILURE"
)

// States of a space's folder on one of its sites.
const (
	SpaceSitePending = "pending" // the SpaceWorkflow has not created it yet
	SpaceSiteReady   = "ready"
	SpaceSiteError   = "error"
)

// BatchRef names a batch written at the site: batch Index of run Run,
// holding N paths under filter rule Rule.
type BatchRef struct {
	Run   int `json:"run"`
	Index int `json:"index"`
	Rule  int `json:"rule"`
	N     int `json:"n"`
	// Attempt is the discovery attempt that wrote the batch file, when
	// its name carries it (see site.batchFile); 0 for the plain name.
	Attempt int `json:"attempt,omitempty"`
}
