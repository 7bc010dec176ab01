package vocab

// Type names of the application errors that activities raise and that
// workflows and the API match. Each is raised as a non-retryable
// temporal.ApplicationError whose Type() is the name.
const (
	// ErrBadInput: the request cannot be carried out as given (an unknown
	// step or discovery, a send to the job's own site).
	ErrBadInput = "BadInput"
	// ErrBadPath: a path given by the user is not a usable path of the
	// site (missing, outside the root, through a symlink).
	ErrBadPath = "BadPath"
	// ErrNotFound: the record the activity needs is gone.
	ErrNotFound = "NotFound"
	// ErrMissingBatch: a job's batch file is gone from the site.
	ErrMissingBatch = "MissingBatch"
	// ErrTargetList: a target could not be listed.
	ErrTargetList = "TargetList"
	// ErrBadListPath: the path asked of a target listing is not valid.
	ErrBadListPath = "BadListPath"
	// ErrBucketConfig: a bucket's configuration could not be applied.
	ErrBucketConfig = "BucketConfig"
	// ErrSpaceDir: a space or share folder could not be made as asked.
	ErrSpaceDir = "SpaceDir"
	// ErrCJ: a storage-management change failed for good.
	ErrCJ = "CJFailure"
)
