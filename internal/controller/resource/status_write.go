package resource

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// statusWriteAttempts bounds how often writeStatus sends its patch again after conflicts with
// writers of other fields than status.
const statusWriteAttempts = 3

// writeStatus sends the status fields that changed since base as a JSON merge patch conditioned on
// the resourceVersion the reconcile last read or wrote (shared.PatchStatusLocked). A conflict reads
// the resource from the API server: when its status is still base's, the object changed only
// elsewhere (a person's annotation, the claim controller binding it: they must not make a run's
// record fail) and the patch is sent again on the new resourceVersion; when its status changed,
// another writer (a replica that took the resource's share, or this one's earlier reconcile the
// cache had not shown) wrote after this reconcile read, and the conflict is returned (the reconcile
// is requeued) instead of overwriting a newer status with an older one. The resource reconciler is
// the only writer of an InfraResource's status.
func (s *resourceScope) writeStatus(ctx context.Context) error {
	out := s.res.DeepCopy() // the API server's answer lands here, not in the reconcile's resource
	var err error
	for range statusWriteAttempts {
		s.base.ResourceVersion = out.ResourceVersion
		if _, err = shared.PatchStatusLocked(ctx, s.c, out, s.base); !kerrors.IsConflict(err) {
			break
		}
		fresh := &v1alpha1.InfraResource{}
		if gerr := s.reader.Get(context.WithoutCancel(ctx), types.NamespacedName{Name: s.res.Name}, fresh); gerr != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(fresh.Status, s.base.Status) {
			return fmt.Errorf("status of resource %s changed since this reconcile read it (resourceVersion %s, now %s): not overwritten: %w",
				s.res.Name, s.base.ResourceVersion, fresh.ResourceVersion, err)
		}
		out.ResourceVersion = fresh.ResourceVersion
	}
	if err != nil {
		return err
	}
	s.keepAnswer(out)
	return nil
}

// keepAnswer takes into the reconcile's resource what the API server answered a status write
// with (the status as stored, its metadata) except its spec and generation: the reconcile goes on
// with the spec it read, which is what its run runs. Where another writer changed the spec
// meanwhile (out.Generation moved), the reconcile's resourceVersion stays the one it read, so a
// later update of the object from this reconcile (a finalizer removed) conflicts instead of
// writing the old spec back; the next status write finds its status unchanged and goes through.
func (s *resourceScope) keepAnswer(out *v1alpha1.InfraResource) {
	rv, spec, gen := s.res.ResourceVersion, s.res.Spec, s.res.Generation
	out.DeepCopyInto(s.res)
	s.res.Spec, s.res.Generation, s.res.ResourceVersion = spec, gen, rv
	takeVersion(s.res, out)
}

// takeVersion moves res (the reconcile's resource) to the resourceVersion of answer, an API
// server's answer about it, only when the spec is still the one res holds (same generation): else
// a later update from this reconcile must conflict, not send the old spec back.
func takeVersion(res, answer *v1alpha1.InfraResource) {
	if answer.Generation == res.Generation {
		res.ResourceVersion = answer.ResourceVersion
	}
}
