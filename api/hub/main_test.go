package hub_test

import (
	"os"
	"testing"

	"github.com/thehub/hub/api/hub/apitest"
)

func TestMain(m *testing.M) {
	apitest.RunWorkerProcessIfAsked()
	os.Exit(apitest.CheckResponses(m))
}
