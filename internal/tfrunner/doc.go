// Package tfrunner runs Terraform or OpenTofu for conductor-tf.
//
// It is the edge of the controller: it takes plain Go inputs (a module address, rendered variables,
// a backend configuration, environment variables) and returns typed results (a plan summary, outputs
// with their sensitivity, state addresses, typed errors). It never sees an API object or a Kubernetes
// client; the controller decides, this package reports.
//
// Every command runs through github.com/hashicorp/terraform-exec on a binary found with
// github.com/hashicorp/hc-install (FindBinary). The root module of a run is generated with hclwrite
// (RenderRoot): a module "main" block that calls the class's module, the backend block, and a
// pass-through output per module output. Variables reach Terraform only as a JSON .tfvars.json file.
//
// A Workspace is one working directory, one per resource, reused between runs so that init runs only
// when the module address, backend or binary changes. A Pool bounds how many runs execute at once.
package tfrunner
