// Package procs is what the processes of runs share: the mark every process of a run carries
// (EnvWorkspace, the workspace it serves), the kill of what a run left behind by that mark (Reap,
// ReapKeys, Signal; /proc on Linux), and directories where a go-plugin socket's path fits
// (SocketDir). Workspaces (package tfrunner) and warm provider processes (package warm) import it;
// it imports only the standard library.
package procs
