// Package vocab is the vocabulary the hub and its sites share: job, task
// and path states, batch references, queue names, the type names of
// workflow and activity errors, and the cipher that seals credentials on
// their way to a site. It imports nothing of the project, so that
// workflows and site activities can use it without the hub database.
package vocab
