package site

// withSizes gives each outcome the logical size its batch entry recorded
// at discovery (a migrated file's original size; 0 for folders and
// links), for the job's statistics; the hub adds them up.
func withSizes(outs []Outcome, entries []batchEntry) []Outcome {
	size := make(map[string]int64, len(entries))
	for _, e := range entries {
		size[e.Path] = e.Size
	}
	for i := range outs {
		outs[i].Size = size[outs[i].Path]
	}
	return outs
}
