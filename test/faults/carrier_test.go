//go:build faults

package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// petAddress is the one object of the suite's module.
const petAddress = "module.main.random_pet.this"

// errKilled is what a carried run ends with when its replica killed it (OnLost, or a kill fault).
var errKilled = errors.New("signal: killed")

// carrier carries one replica's runs, as its tofu processes would, without Terraform: each apply
// locks the state at the replica's state server, reads it, and when the object is not in it
// creates it in the world (a create of 1–4 s, or of 8–16 s for three in ten: longer than a takeover, announced with CreateStarted first, as tofu's
// -json stream does), writes the state with it and unlocks. It honours the gate's creates in
// doubt (a plan that would create one is held, InterruptedCreate, until approved by its id) and,
// once approved, adopts an object the world already has instead of creating it again. kill ends
// the runs of the keys it is given at once, as SIGKILL does: a create under way never completes.
type carrier struct {
	resourcecontroller.NoAdoption
	name       string
	w          *world
	createTime func() time.Duration

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	die     func() // armed by dieAfterCreate: called once, by the next create, after it landed
}

// dieAfterCreate arms the next create of c's runs to land in the world at once and then call die
// (the replica's SIGKILL) before its CreateStarted is recorded: tofu calls the provider as soon as
// it writes apply_start, without waiting for the controller to read it, and a process killed
// between the two leaves an object that neither state nor status records.
func (c *carrier) dieAfterCreate(die func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.die = die
}

// armed takes the die func dieAfterCreate armed (nil when none).
func (c *carrier) armed() func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	die := c.die
	c.die = nil
	return die
}

func newCarrier(name string, w *world, seed uint64) *carrier {
	rnd := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	return &carrier{name: name, w: w, running: map[string]context.CancelCauseFunc{}, createTime: func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if rnd.IntN(10) < 3 { // a slow create (a database, a cluster), longer than a takeover
			return 8*time.Second + time.Duration(rnd.Int64N(int64(8*time.Second)))
		}
		return time.Second + time.Duration(rnd.Int64N(int64(3*time.Second)))
	}}
}

// kill ends, at once, the runs under way whose key match accepts; it returns how many.
func (c *carrier) kill(match func(key string) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key, cancel := range c.running {
		if match(key) {
			cancel(errKilled)
			n++
		}
	}
	return n
}

func (c *carrier) track(ctx context.Context, key string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	c.running[key] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.running, key)
		c.mu.Unlock()
		cancel(nil)
	}
}

// Apply carries one apply of key (see carrier).
func (c *carrier) Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (res *tfrunner.ApplyResult, err error) {
	defer func() {
		if err != nil {
			c.w.logRun(key, c.name, "run failed: "+err.Error())
		}
	}()
	ctx, done := c.track(ctx, key)
	defer done()
	if err := opts.Events.Send(tfrunner.Started{}); err != nil {
		return nil, err
	}
	st := &stateIO{ctx: ctx, env: spec.Env}
	lockID := "faults-" + key + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := st.lock(lockID); err != nil {
		return nil, err
	}
	serial, hasObject, err := st.read()
	if err != nil {
		return nil, errors.Join(err, st.unlock(lockID))
	}
	plan := &tfjson.Plan{ID: fmt.Sprintf("p-%s-%d", key, serial)}
	result := &tfrunner.ApplyResult{Initialized: true, Plan: plan, Outputs: map[string]tfjson.Output{"id": {Value: []byte(strconv.Quote(key))}}}
	if hasObject {
		return result, st.unlock(lockID) // nothing to change
	}
	plan.HasChanges, plan.Summary = true, tfjson.Summary{Add: 1}
	gate := opts.Gate
	if gate == nil {
		gate = &tfrunner.Gate{}
	}
	if gate.InDoubt(petAddress) && gate.Approved != plan.ID {
		result.Held = &tfrunner.Hold{Plan: plan, Reason: v1alpha1.HoldInterruptedCreate, Addresses: []string{petAddress}}
		return result, st.unlock(lockID)
	}
	if gate.InDoubt(petAddress) && c.w.has(key) {
		c.w.adopt(key, c.name) // approved after looking: the object exists, and is imported
	} else if die := c.armed(); die != nil {
		c.w.begin(key, c.name)
		c.w.end(key, c.name, true)
		c.w.landedUnrecorded(key, c.name)
		die()
		return nil, errKilled // the lock is left, as a killed tofu leaves it
	} else {
		if err := opts.Events.Send(tfrunner.CreateStarted{Address: petAddress}); err != nil {
			return nil, err // the checkpoint failed: the run stops before creating (its lock stays, as a killed tofu's)
		}
		c.w.begin(key, c.name)
		select {
		case <-time.After(c.createTime()):
			c.w.end(key, c.name, true)
		case <-ctx.Done():
			c.w.end(key, c.name, false)
			return nil, context.Cause(ctx) // killed mid-create: the lock is left, as a killed tofu leaves it
		}
	}
	if err := st.write(serial+1, key, lockID); err != nil {
		return nil, err // the object exists and the state lacks it: a create in doubt
	}
	result.Applied, result.Ended = true, []string{petAddress}
	return result, st.unlock(lockID)
}

// Destroy destroys key's object.
func (c *carrier) Destroy(ctx context.Context, key string, spec tfrunner.Spec) error {
	c.w.destroy(key, c.name)
	return nil
}

// DriftCheck finds no drift.
func (c *carrier) DriftCheck(context.Context, string, tfrunner.Spec) (*tfjson.StreamResult, error) {
	return &tfjson.StreamResult{Plan: &tfjson.Plan{ID: "p-check"}}, nil
}

// stateIO is a run's http backend: the requests Terraform's http backend makes to the state
// server, with the run's credentials (TF_HTTP_*).
type stateIO struct {
	ctx context.Context
	env map[string]string
}

func (s *stateIO) call(method, url string, body []byte) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(s.ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.SetBasicAuth(s.env["TF_HTTP_USERNAME"], s.env["TF_HTTP_PASSWORD"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && !(method == http.MethodGet && resp.StatusCode == http.StatusNotFound) {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, out)
	}
	return out, resp.StatusCode, nil
}

func (s *stateIO) lockBody(id string) []byte {
	b, _ := json.Marshal(statebackend.Lock{ID: id, Operation: "OperationTypeApply", Who: "faults@conductor-tf"})
	return b
}

func (s *stateIO) lock(id string) error {
	if s.env["TF_HTTP_ADDRESS"] == "" {
		return errors.New("the run has no state server credentials")
	}
	_, _, err := s.call(statebackend.LockMethod, s.env["TF_HTTP_LOCK_ADDRESS"], s.lockBody(id))
	return err
}

func (s *stateIO) unlock(id string) error {
	_, _, err := s.call(statebackend.UnlockMethod, s.env["TF_HTTP_UNLOCK_ADDRESS"], s.lockBody(id))
	return err
}

// read returns the stored state's serial and whether it holds the object.
func (s *stateIO) read() (int64, bool, error) {
	b, code, err := s.call(http.MethodGet, s.env["TF_HTTP_ADDRESS"], nil)
	if err != nil || code == http.StatusNotFound || len(b) == 0 {
		return 0, false, err
	}
	var st struct {
		Serial    int64
		Resources []json.RawMessage
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, false, err
	}
	return st.Serial, len(st.Resources) > 0, nil
}

// faultState is the state an apply writes: the one object, as module "one" would.
const faultState = `{"version":4,"terraform_version":"1.12.6","serial":%d,"lineage":"faults-%s","outputs":{},` +
	`"resources":[{"module":"module.main","mode":"managed","type":"random_pet","name":"this","provider":"provider[\"registry.opentofu.org/hashicorp/random\"]",` +
	`"instances":[{"schema_version":0,"attributes":{"id":%q,"keepers":null,"length":2,"prefix":null,"separator":"-"}}]}],"check_results":null}`

func (s *stateIO) write(serial int64, key, lockID string) error {
	_, _, err := s.call(http.MethodPost, s.env["TF_HTTP_ADDRESS"]+"?ID="+lockID, []byte(fmt.Sprintf(faultState, serial, key, key)))
	return err
}
