package tfrunner_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// TestStateOnlyCreatesAreNotRecordedAtTheirStart: with real tofu, a module whose random_pet comes
// from hashicorp/random (as its required_providers says) creates it without a CreateStarted event:
// the rule that reads the installed modules finds them through the workspace's link to its shared
// init. Were it not to, every create of every run would be recorded (a status write each) and held
// after a crash.
func TestStateOnlyCreatesAreNotRecordedAtTheirStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool, _ := onePool(t)
	src, _ := filepath.Abs(filepath.Join("testdata", "modules", "pet"))
	var started []string
	res, err := pool.Apply(ctx, "pet", tfrunner.Spec{Module: tfrunner.Module{Source: src}, Variables: map[string]any{"prefix": "p"}},
		tfrunner.ApplyOptions{Events: func(e tfrunner.Event) error {
			if c, ok := e.(tfrunner.CreateStarted); ok {
				started = append(started, c.Address)
			}
			return nil
		}})
	if err != nil || !res.Applied {
		t.Fatalf("apply: %v (applied %v)", err, res != nil && res.Applied)
	}
	if len(started) > 0 {
		t.Fatalf("creates recorded at their start: %v; want none (hashicorp/random keeps its objects in state only)", started)
	}
}
