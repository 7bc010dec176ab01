// Package workflows holds the hub's Temporal workflows: deterministic
// orchestration only; every side effect is an activity.
package workflows

// HubTaskQueue is the task queue of every workflow and of the activities
// that touch the hub database.
const HubTaskQueue = "hub"

// SiteTaskQueue is the task queue a site's worker pool polls for queue.
func SiteTaskQueue(site, queue string) string { return "site." + site + "." + queue }
