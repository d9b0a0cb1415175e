package tfjson

import "encoding/json"

// Output is one root output, as `output -json` and an apply stream's outputs message give it.
type Output struct {
	// Value is the output's value as JSON; absent in a stream for a sensitive output.
	Value json.RawMessage
	// Sensitive is true when the module marks the output sensitive.
	Sensitive bool
}
