package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Duration is a length of time written as a Go duration ("72h", "1h30m"), as metav1.Duration is,
// read so that decoding never fails: text that time.ParseDuration refuses (one past what a Go
// duration holds, about 2562047h, stored before the CRD's rule refused it) is kept as written in
// Unparsed, with Duration 0, and written back as it was read. One object's bad duration then never
// makes a list undecodable for the controller's cache, which would stall every object of the kind
// in every namespace; the object says what it cannot read instead (Problem). The CRD schema of
// each field is a string (the field's markers), as for metav1.Duration.
// +kubebuilder:validation:Type=string
type Duration struct {
	time.Duration `json:"-"`
	// Unparsed is the JSON value, as read, that the controller could not read as a duration (""
	// when it could).
	Unparsed string `json:"-"`
}

// UnmarshalJSON reads a JSON string as time.ParseDuration does; a string it refuses, or a value
// that is no string, is kept whole in Unparsed and is no error.
func (d *Duration) UnmarshalJSON(b []byte) error {
	*d = Duration{}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		d.Unparsed = string(b)
		return nil
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		d.Unparsed = string(b)
		return nil
	}
	d.Duration = parsed
	return nil
}

// MarshalJSON writes Duration as metav1.Duration does (its String), or Unparsed as it was read: a
// write of the object never replaces what its author wrote with "0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.Unparsed != "" {
		return []byte(d.Unparsed), nil
	}
	return json.Marshal(d.Duration.String())
}

// Problem describes field's value when it is not a duration the controller can read, e.g.
// `spec.lifetime: "9999999h" is not a duration the controller can read (time: invalid duration
// "9999999h"); it counts as unset until it is mended`; "" when d is nil or was read. The value is
// quoted truncated to 64 bytes.
func (d *Duration) Problem(field string) string {
	if d == nil || d.Unparsed == "" {
		return ""
	}
	var s string
	err := json.Unmarshal([]byte(d.Unparsed), &s)
	if err == nil {
		_, err = time.ParseDuration(s)
	} else {
		err = fmt.Errorf("not a string")
	}
	shown := strings.TrimSpace(d.Unparsed)
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	return fmt.Sprintf("%s: %s is not a duration the controller can read (%v); it counts as unset until it is mended", field, shown, err)
}

// Parsed is d's duration when it was read, and 0 when d is nil or Unparsed.
func (d *Duration) Parsed() time.Duration {
	if d == nil || d.Unparsed != "" {
		return 0
	}
	return d.Duration
}
