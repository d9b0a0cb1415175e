// Package queue is the line runs wait in before they start: a bounded number of slots served
// across tenants in turn (Slots, on FairLine), the place-in-line notice (NotifyQueued), and the
// shutdown that stops starting runs while started ones finish (Drain).
//
// It knows nothing of Terraform, workspaces or the API: the in-process pool (tfrunner.Pool) and
// the runner pods' dispatcher (runners.Dispatcher) both queue with it. It imports only the
// standard library.
package queue
