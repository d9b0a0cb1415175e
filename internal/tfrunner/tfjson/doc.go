// Package tfjson reads what Terraform and OpenTofu say in JSON: a plan rendered by show -json
// (Summarize, through terraform-json's types), the machine-readable UI of plan/apply/destroy
// -json (ReadStream, ReadApply: planned changes, change summaries, outputs, drift, diagnostics,
// the creates that start), root outputs (Output) and resource addresses (ResourceType,
// NoRemoteObject).
//
// It runs nothing and reads no file: tfrunner's Workspace runs the commands and hands their output
// here. Its imports are the standard library, terraform-json and internal/policy (the plan as
// policy rules see it).
package tfjson
