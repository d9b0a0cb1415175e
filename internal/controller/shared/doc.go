// Package shared holds what every reconciler of conductor-tf uses the same way, as cluster-api's
// util/conditions and util/patch: setting a condition, writing status once with a merge patch
// (kstatus' Reconciling and Stalled derived from Ready on the way), requeueing a write conflict,
// jitter, and the cache's field indexes. It imports no reconciler: the reconcilers under
// internal/controller import it, never one another.
package shared
