// Package statebackend owns where Terraform state lives: in Secrets in exactly the layout of
// Terraform's "kubernetes" backend (tfstate-<workspace>-<suffix>, gzip, -part-N chunks over 1 MiB;
// layout.go), locked with the backend's Lease lock-tfstate-<workspace>-<suffix> (acquire.go), both
// in the controller's namespace, so that a person running terraform with that backend by hand
// reads the same state and honours the same locks.
//
// It configures the backend (Config.Attributes), names state Secrets (SuffixFor, SecretName), reads
// a state's serial and lineage for status, inspects, takes and releases locks, recovers locks this
// controller left behind, orphans and adopts state, and keeps the last versions of each state
// beside it (history.go: History, Restore). Server serves the states to the controller's own runs
// through Terraform's "http" backend protocol on a loopback address (server.go, protocol.go,
// protocol_requests.go), with credentials issued per run and valid for that run's state only
// (credentials.go, runs.go), keeping the states it could not write yet (pending.go,
// pending_states.go, errored.go); Store and Handle are the handle-style API over one namespace and
// one state. It uses client-go only; it knows nothing of the conductor API.
package statebackend
