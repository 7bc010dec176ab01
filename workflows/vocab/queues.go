package vocab

import "regexp"

// HubTaskQueue is the task queue of every workflow and of the activities
// that touch the hub database.
const HubTaskQueue = "hub"

// DefaultQueue is the queue every site has.
const DefaultQueue = "default"

// SiteTaskQueue is the task queue a site's worker pool polls for queue.
func SiteTaskQueue(site, queue string) string { return "site." + site + "." + queue }

// MaxQueueLen bounds a queue name, as any name the API accepts.
const MaxQueueLen = 150

var queuePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// QueueNameOK tells whether queue is a name Temporal can serve as part of
// a task queue name.
func QueueNameOK(queue string) bool {
	return len(queue) <= MaxQueueLen && queuePattern.MatchString(queue)
}
