package apitest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the child when the test process dies
// (a test timeout, a panic), so no site worker is left running.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
