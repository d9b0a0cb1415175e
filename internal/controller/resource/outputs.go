package resource

import (
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// Outputs in status: the non-sensitive ones, bounded (all of them go to the connection Secret,
// resource/secrets).

// MaxStatusOutputBytes and MaxStatusOutputsBytes bound the non-sensitive outputs kept in status:
// each value's JSON at most 16 KiB, all of them together at most 128 KiB. A module's output is
// the module author's to size, and an InfraResource above the API server's request limit (etcd's
// 1.5 MiB by default) could never have its status written again: its run's outcome would be lost.
// What is left out is still in the connection Secret.
const (
	MaxStatusOutputBytes  = 16 << 10
	MaxStatusOutputsBytes = 128 << 10
)

// setOutputs keeps the non-sensitive outputs in status; sensitive ones never reach any status.
// Outputs above MaxStatusOutputBytes, and those past MaxStatusOutputsBytes in all (in name
// order), are left out; their names are returned, sorted.
func setOutputs(res *v1alpha1.InfraResource, outs map[string]tfjson.Output) (omitted []string) {
	res.Status.Outputs = nil
	names := make([]string, 0, len(outs))
	for name := range outs {
		names = append(names, name)
	}
	sort.Strings(names)
	total := 0
	for _, name := range names {
		o := outs[name]
		if o.Sensitive {
			continue
		}
		if len(o.Value) > MaxStatusOutputBytes || total+len(o.Value) > MaxStatusOutputsBytes {
			omitted = append(omitted, name)
			continue
		}
		total += len(o.Value)
		if res.Status.Outputs == nil {
			res.Status.Outputs = v1alpha1.Variables{}
		}
		res.Status.Outputs[name] = jsonValue(o.Value)
	}
	return omitted
}

func jsonValue(raw []byte) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: append([]byte(nil), raw...)}
}
