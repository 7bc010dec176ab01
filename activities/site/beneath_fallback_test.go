package site

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fallbackEnv makes a test process open every path the way kernels
// without openat2 do (openBeneathFallback), from its first open on.
const fallbackEnv = "HUB_TEST_NO_OPENAT2"

func init() {
	if os.Getenv(fallbackEnv) == "1" {
		noOpenat2.Store(true)
	}
}

// fallbackTests are the containment and symlink-swap race tests, run a
// second time through the fallback by TestBeneathFallback.
var fallbackTests = []string{
	"TestFallbackInUse", "TestResolve", "TestOpenBeneathFallback", "TestSymlinkSwapRace",
	"TestSpaceRemovalSwapRace", "TestRemoveSpaceDirSwapRace", "TestListDirSwapRace",
	"TestExposerCheckSwapRace", "TestShareCheckSwapRace", "TestConfigWriteSwapRace",
	"TestCJSpaceStaysInside", "TestCJSnapshotNeverCopiesFromOutside", "TestCJCopyFileRefusesASwappedLink",
	"TestSpaceDirs", "TestWalkErrors", "TestLifecycle", "TestCopyInAndRemovePath", "TestTamperedRecordsAreRefused", "TestXattrReadsFollowTheFolder",
	"TestWalkKeepsFolderAccessTimes", "TestStepsLeaveTimesAlone", "TestCJCopyFileCopiesOthersFiles",
}

// TestBeneathFallback runs the containment and race tests again in a
// child process that opens paths without openat2, so the code used on
// older kernels (and other systems) runs in every test run.
func TestBeneathFallback(t *testing.T) {
	if os.Getenv(fallbackEnv) == "1" {
		return // the child itself
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^("+strings.Join(fallbackTests, "|")+")$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fallbackEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the tests through the fallback:\n%s", out)
	for _, name := range []string{"TestFallbackInUse", "TestSymlinkSwapRace", "TestConfigWriteSwapRace"} {
		require.Contains(t, string(out), "--- PASS: "+name+" ", "ran through the fallback")
	}
}

// TestFallbackInUse: in the fallback's child process, openat2 is never
// called.
func TestFallbackInUse(t *testing.T) {
	if os.Getenv(fallbackEnv) != "1" {
		return
	}
	require.True(t, noOpenat2.Load())
}
