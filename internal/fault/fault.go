// Package fault holds the fault points at which tests kill the process.
package fault

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Point marks an instant between two operations of a write (on files or
// in the database) where a crash must leave nothing behind that a retry
// does not finish or clean up. Tests kill the process there: with
// HUB_FAULT_POINT=<name>@<n> the process sends itself SIGKILL at the n-th
// Point of that name, and with HUB_FAULT_TRACE=<file> it appends
// "<name>@<n>" for each one reached. In production neither is set and
// Point does nothing.
func Point(name string) {
	if faults.point == "" && faults.trace == "" {
		return
	}
	faults.mu.Lock()
	defer faults.mu.Unlock()
	faults.seen[name]++
	hit := fmt.Sprintf("%s@%d", name, faults.seen[name])
	if faults.trace != "" {
		if f, err := os.OpenFile(faults.trace, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			_, _ = f.WriteString(hit + "\n")
			_ = f.Close()
		}
	}
	if hit == faults.point {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// Enabled tells whether this process reaches fault points at all
// (HUB_FAULT_POINT or HUB_FAULT_TRACE is set), for callers that would
// otherwise do work to name one.
func Enabled() bool { return faults.point != "" || faults.trace != "" }

// faults is set once from the environment, which does not change while a
// worker runs; only tests set it.
var faults = struct {
	point, trace string
	mu           sync.Mutex
	seen         map[string]int
}{point: os.Getenv("HUB_FAULT_POINT"), trace: os.Getenv("HUB_FAULT_TRACE"), seen: map[string]int{}}
