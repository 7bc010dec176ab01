package workflows

// Limits of the job workflow, for the external tests.
const (
	JobBatchesPerRun   = jobBatchesPerRun
	JobParallelBatches = jobParallelBatches
)
