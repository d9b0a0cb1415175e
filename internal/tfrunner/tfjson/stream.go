package tfjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The machine-readable UI: `plan -json`, `apply -json` and `destroy -json` write one JSON object
// per line (Terraform's internal/command/views/json: message types "planned_change",
// "change_summary", "outputs", "diagnostic", …; OpenTofu writes the same). terraform-json has no
// types for these messages, so the few fields conductor-tf reads are declared here.

// streamMessage is one line of the stream, with only the fields read.
type streamMessage struct {
	Level      string               `json:"@level"`
	Message    string               `json:"@message"`
	Type       string               `json:"type"`
	Change     *streamChange        `json:"change,omitempty"`
	Changes    *streamChangeSummary `json:"changes,omitempty"`
	Outputs    map[string]streamOut `json:"outputs,omitempty"`
	Diagnostic *streamDiagnostic    `json:"diagnostic,omitempty"`
	Hook       *streamHook          `json:"hook,omitempty"`
}

// streamHook is an apply_start / apply_complete / apply_errored message's hook.
type streamHook struct {
	Resource struct {
		Addr string `json:"addr"`
	} `json:"resource"`
	// Action: create, read, update, replace, delete (views/json/hook.go, changeAction).
	Action string `json:"action"`
}

// streamChange is a planned_change or resource_drift message's change.
type streamChange struct {
	Resource struct {
		Addr string `json:"addr"`
	} `json:"resource"`
	// Action: noop, create, read, update, replace, delete, move, forget, import.
	Action    string          `json:"action"`
	Importing json.RawMessage `json:"importing,omitempty"`
}

// streamChangeSummary is a change_summary message: operation "plan", "apply" or "destroy".
type streamChangeSummary struct {
	Add       int    `json:"add"`
	Change    int    `json:"change"`
	Import    int    `json:"import"`
	Remove    int    `json:"remove"`
	Operation string `json:"operation"`
}

// streamOut is one root output of an outputs message; Value is absent for sensitive outputs.
type streamOut struct {
	Sensitive bool            `json:"sensitive"`
	Value     json.RawMessage `json:"value,omitempty"`
	// Action is a plan's change of the output (create, update, delete, noop); absent in an
	// apply's outputs message.
	Action string `json:"action,omitempty"`
}

type streamDiagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail"`
}

// StreamResult is what a run's JSON stream said.
type StreamResult struct {
	// Plan is the plan the run made: its changes (from planned_change) and summary (from the
	// plan's change_summary). HasChanges is false when nothing was to change.
	Plan *Plan
	// Applied is the apply's change_summary, when the run applied something.
	Applied *Summary
	// Outputs are the root outputs the run reported; sensitive ones have no Value.
	Outputs map[string]Output
	// OutputsChanged is true when the plan changes a root output (its outputs message names an
	// action other than noop): a data source read anew gave another value. Terraform's change
	// summary counts resources only.
	OutputsChanged bool
	// Drift lists the addresses whose real objects changed outside Terraform (resource_drift).
	Drift []string
	// Ended lists, in order, the addresses whose apply ended with the provider's answer: every
	// apply_complete, and apply_errored of a run that was not interrupted (the provider said the
	// change failed). A create among them is no longer in doubt. A create cut off by a kill has
	// neither message; one cut off by an interrupt gets apply_errored, but the object may be
	// half-made (an SDKv2 provider stops mid-create), so it is added only by EndErrored.
	Ended []string
	// errored are the apply_errored addresses, added to Ended by EndErrored (unless the run was
	// interrupted).
	errored []string
	// Errors are the error diagnostics, as "summary: detail".
	Errors []string
	// Log is every message's human-readable text (@message), in order: the run as people read it,
	// sensitive values redacted by Terraform.
	Log []string
}

// ReadStream reads a JSON stream to its end. Lines that are not JSON objects (a wrapper's output,
// a provider's stray print) are skipped. It returns an error when r fails, or one wrapping
// ErrLineTooLong when a line was over MaxStreamLine (skipped; the lines after it are read).
func ReadStream(r io.Reader) (*StreamResult, error) { return ReadApply(r, nil, nil) }

// MaxStreamLine bounds one line of the JSON stream: 16 MiB. A longer line (an output value of
// that size) is skipped, and the stream read on.
const MaxStreamLine = 16 << 20

// ErrLineTooLong wraps the error of a stream with a line over MaxStreamLine.
var ErrLineTooLong = errors.New("a line of Terraform's JSON output is longer than 16 MiB and was skipped")

// CreateStartFunc is called with the module address of each object whose create starts
// (apply_start with action create or replace), before the next event of the stream is read.
type CreateStartFunc func(address string) error

// ReadApply is ReadStream for an apply's stream as it is written, calling onCreate (when set) for
// each create in doubt as it starts (see createInDoubt; stateOnly, which may be nil, reports the
// addresses whose module gets their type from a provider that keeps objects only in state). After
// onCreate's first error it is not called again; the stream is still read to its end, and that
// error is returned.
func ReadApply(r io.Reader, onCreate CreateStartFunc, stateOnly func(address string) bool) (*StreamResult, error) {
	res := &StreamResult{Plan: &Plan{}}
	var hookErr error
	skipped := 0
	lines := &lineReader{r: bufio.NewReaderSize(r, 64*1024), max: MaxStreamLine}
	for {
		line, ok, err := lines.next()
		if err != nil {
			res.Plan.sortAndHash()
			if hookErr != nil {
				return res, hookErr
			}
			if err != io.EOF {
				return res, err
			}
			if skipped > 0 {
				return res, fmt.Errorf("%w (%d line(s))", ErrLineTooLong, skipped)
			}
			return res, nil
		}
		if !ok {
			skipped++
			continue
		}
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m streamMessage
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m.Message != "" {
			res.Log = append(res.Log, m.Message)
		}
		res.add(&m)
		if onCreate != nil && hookErr == nil && m.Hook != nil && createInDoubt(&m, stateOnly) {
			hookErr = onCreate(m.Hook.Resource.Addr)
		}
	}
}

// lineReader reads lines of at most max bytes; a longer one is read to its end and dropped.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// next returns the next line without its newline, ok=false for a line over max (dropped), or the
// reader's error (io.EOF at the end; a last line without a newline is returned first).
func (l *lineReader) next() (line []byte, ok bool, err error) {
	l.buf = l.buf[:0]
	tooLong := false
	for {
		chunk, err := l.r.ReadSlice('\n')
		if !tooLong {
			if len(l.buf)+len(chunk) > l.max+1 {
				tooLong, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && (len(l.buf) == 0 && !tooLong):
			return nil, false, err
		case tooLong:
			return nil, false, nil
		}
		return bytes.TrimRight(l.buf, "\r\n"), true, nil
	}
}

// createInDoubt reports a stream message after which a create, should the process die, may have
// touched the world: apply_start of a create or replace, except of an object that lives only in
// state (creating it again duplicates nothing): one NoRemoteObject names and stateOnly confirms its
// module gets from a state-only provider (issue 46: a module that names another provider
// "random" would otherwise create real objects unrecorded). For those, provision_start, since a
// provisioner (local-exec, remote-exec) does touch the world, and runs before apply_complete.
func createInDoubt(m *streamMessage, stateOnly func(address string) bool) bool {
	addr := m.Hook.Resource.Addr
	onlyInState := NoRemoteObject(addr) && stateOnly != nil && stateOnly(addr)
	switch m.Type {
	case "apply_start":
		return (m.Hook.Action == "create" || m.Hook.Action == "replace") && !onlyInState
	case "provision_start":
		return onlyInState
	}
	return false
}

func (res *StreamResult) add(m *streamMessage) {
	switch m.Type {
	case "planned_change":
		if c := m.Change; c != nil {
			if ch, ok := planChange(c); ok {
				res.Plan.Changes = append(res.Plan.Changes, ch)
			}
		}
	case "resource_drift":
		if m.Change != nil {
			res.Drift = append(res.Drift, m.Change.Resource.Addr)
		}
	case "apply_complete":
		if creates(m.Hook) {
			res.Ended = append(res.Ended, m.Hook.Resource.Addr)
		}
	case "apply_errored":
		if creates(m.Hook) {
			res.errored = append(res.errored, m.Hook.Resource.Addr)
		}
	case "change_summary":
		if s := m.Changes; s != nil {
			sum := Summary{Add: s.Add, Change: s.Change, Destroy: s.Remove, Import: s.Import}
			if s.Operation == "plan" {
				res.Plan.Summary = sum
				res.Plan.HasChanges = s.Add+s.Change+s.Remove+s.Import > 0
			} else {
				res.Applied = &sum
			}
		}
	case "outputs":
		res.Outputs = make(map[string]Output, len(m.Outputs))
		for name, o := range m.Outputs {
			res.Outputs[name] = Output{Value: o.Value, Sensitive: o.Sensitive}
			if o.Action != "" && o.Action != "noop" {
				res.OutputsChanged = true
			}
		}
	case "diagnostic":
		if d := m.Diagnostic; d != nil && d.Severity == "error" {
			msg := d.Summary
			if d.Detail != "" {
				msg += ": " + d.Detail
			}
			res.Errors = append(res.Errors, msg)
		}
	}
}

// creates reports a hook of a create, or of the create half of a replace (its destroy half's hook
// says "delete").
func creates(h *streamHook) bool {
	return h != nil && (h.Action == "create" || h.Action == "replace")
}

// planChange turns a planned_change into a Change with the actions show -json would list.
func planChange(c *streamChange) (Change, bool) {
	ch := Change{Address: c.Resource.Addr, Importing: len(c.Importing) > 0 && string(c.Importing) != "null"}
	switch c.Action {
	case "create":
		ch.Actions = []string{"create"}
	case "update":
		ch.Actions = []string{"update"}
	case "delete":
		ch.Actions = []string{"delete"}
	case "replace":
		ch.Actions = []string{"delete", "create"}
	case "import", "noop", "read", "move", "forget", "":
		if !ch.Importing && c.Action != "import" {
			return ch, false
		}
		ch.Importing = true
		ch.Actions = []string{"no-op"}
	default:
		ch.Actions = []string{c.Action}
	}
	return ch, true
}

// EndErrored counts the creates that errored as ended: call it for a run that was not interrupted,
// where a create that errored was refused by its provider, not cut off.
func (res *StreamResult) EndErrored() {
	res.Ended = append(res.Ended, res.errored...)
	res.errored = nil
}

// String summarises the result for logs.
func (res *StreamResult) String() string {
	return fmt.Sprintf("plan +%d ~%d -%d (%d changes), outputs %d", res.Plan.Summary.Add, res.Plan.Summary.Change,
		res.Plan.Summary.Destroy, len(res.Plan.Changes), len(res.Outputs))
}
