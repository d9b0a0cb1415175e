// Package statebackend owns where Terraform state lives: the Terraform "kubernetes" backend, which
// keeps each workspace's state in a Secret named tfstate-<workspace>-<suffix> and locks it with a
// Lease named lock-tfstate-<workspace>-<suffix>, both in the controller's namespace.
//
// It configures the backend (Config.Attributes), names state Secrets (SuffixFor, SecretName), reads
// a state's serial and lineage for status, inspects and recovers locks this controller left behind,
// and orphans and adopts state. It uses client-go only; it knows nothing of the conductor API.
package statebackend
