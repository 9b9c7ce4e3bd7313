package runner_test

import "github.com/tether-dev/tether/internal/engine"

type (
	runnerInput  = engine.Input
	runnerOutput = engine.Output
)
