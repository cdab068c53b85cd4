package testenv

import (
	"os"
	"testing"
)

// FullEnv is the environment variable that, set to 1 (as .ci/run does),
// runs the crash and fault campaigns with every fault they have. Without
// it, go test ./... injects fewer, so that on two cores no package comes
// near go test's default 10-minute limit: the full campaigns are what CI
// runs.
const FullEnv = "FLOE_TEST_FULL"

// Faults returns how many faults of one kind a campaign injects: short
// under -short, full under FLOE_TEST_FULL=1, normal otherwise.
func Faults(short, normal, full int) int {
	switch {
	case testing.Short():
		return short
	case os.Getenv(FullEnv) == "1":
		return full
	}
	return normal
}
