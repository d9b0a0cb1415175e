// Package warm keeps provider plugin processes between runs (Providers), which Terraform and
// OpenTofu drive through provider reattach instead of starting their own; providers.go says how a
// process is keyed, isolated and reached. The in-process pool (tfrunner.Pool) checks processes
// out for a run (Checkout) from what init installed (Installed, Warmable).
//
// It imports procs (the mark a process carries, short socket directories) and sandbox, never
// tfrunner: a run's workspace is named to it only by its directory.
package warm
