package secrets

// Generated passwords (spec.generatedPasswords): the controller makes them, keeps them in a Secret
// of its namespace, and hands them to runs only as ephemeral variables (tfrunner.Spec
// .EphemeralVariables), so no plan or state holds them; the connection Secret gets them beside
// the outputs. The Secret is the password's only copy besides the infrastructure itself: it is
// not owned by the resource (reclaim Retain keeps it, labelled as the state is; Delete deletes it
// once the infrastructure is destroyed).

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// Keys and annotations of a password Secret: data "password.<variable>" holds the password and
// "version.<variable>" its version (decimal Unix seconds of its generation); the annotation
// annotationRotationHandled is the last conductor.io/rotate-passwords value acted on.
const (
	passwordKeyPrefix         = "password."
	versionKeyPrefix          = "version."
	annotationRotationHandled = "conductor.io/rotation-handled"
	// previousKeyPrefix holds the password a rotation replaced while no apply has sent the new one
	// (the infrastructure still has it): removed once one did (PasswordsApplied).
	previousKeyPrefix = "previous."
)

// passwordAlphabet is what generated passwords are made of: letters and digits, which every
// database and URL accepts unquoted (RDS refuses '/', '@', '"' and spaces).
const passwordAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// passwordSecretName is the resource's password Secret in the controller's namespace:
// "tfpassword-" and its state Secret's name, "" before the resource has a state name.
func passwordSecretName(res *v1alpha1.InfraResource) string {
	if state.Suffix(res) == "" {
		return ""
	}
	return "tfpassword-" + statebackend.SecretName(statebackend.DefaultWorkspace, state.Suffix(res))
}

// generatePassword returns n characters of passwordAlphabet from crypto/rand; bytes ≥ 248 (4 × 62)
// are drawn again, so each character is uniform.
func generatePassword(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		_, _ = rand.Read(buf) // never fails (crypto/rand, Go ≥ 1.24)
		for _, b := range buf {
			if b < 248 && len(out) < n {
				out = append(out, passwordAlphabet[int(b)%len(passwordAlphabet)])
			}
		}
	}
	return string(out)
}

// passwordLength is p's length, 32 when unset (the CRD's default, for objects made without it).
func passwordLength(p v1alpha1.GeneratedPassword) int {
	if p.Length < 16 {
		return 32
	}
	return int(p.Length)
}

// readPasswordSecret reads the resource's password Secret from the API server; nil when it does
// not exist (or the resource has no state name yet).
func (r *Keeper) readPasswordSecret(ctx context.Context, res *v1alpha1.InfraResource) (*corev1.Secret, error) {
	name := passwordSecretName(res)
	if name == "" {
		return nil, nil
	}
	s := &corev1.Secret{}
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading password Secret %s/%s: %w", r.namespace, name, err)
	}
	return s, nil
}

// rotationAsked reports whether conductor.io/rotate-passwords asks for a value the Secret has not
// handled.
func rotationAsked(res *v1alpha1.InfraResource, s *corev1.Secret) bool {
	v := res.Annotations[v1alpha1.AnnotationRotatePasswords]
	return v != "" && v != s.Annotations[annotationRotationHandled]
}

// missingPasswords are the variables of spec.generatedPasswords the Secret has no password or no
// valid version for.
func missingPasswords(res *v1alpha1.InfraResource, s *corev1.Secret) []string {
	var out []string
	for _, p := range res.Spec.GeneratedPasswords {
		_, ok := s.Data[passwordKeyPrefix+p.Variable]
		if _, err := strconv.ParseInt(string(s.Data[versionKeyPrefix+p.Variable]), 10, 64); !ok || err != nil {
			out = append(out, p.Variable)
		}
	}
	return out
}

// PasswordInputs puts the resource's generated passwords into spec: each password as an
// ephemeral variable, each version into its version variable (one GET of the password Secret).
// With ensure (a run's inputs) it first makes those missing, and all of them again when a
// rotation is asked (an event says so), and writes the Secret. Without (a sync's rotation check,
// the connection Secret written again) it only reads: a missing Secret or password leaves the
// variable out, and due reports that passwords must be made (a password or the Secret is missing)
// or made again (conductor.io/rotate-passwords differs from what the Secret records as handled),
// which makes a run due.
func (r *Keeper) PasswordInputs(ctx context.Context, res *v1alpha1.InfraResource, spec *tfrunner.Spec, ensure bool) (due bool, err error) {
	if len(res.Spec.GeneratedPasswords) == 0 {
		return false, nil
	}
	s, err := r.readPasswordSecret(ctx, res)
	if err != nil {
		return false, err
	}
	if ensure {
		if s, err = r.ensurePasswords(ctx, res, s); err != nil {
			return false, err
		}
	}
	if s == nil {
		return true, nil
	}
	due = rotationAsked(res, s) || len(missingPasswords(res, s)) > 0
	if spec.EphemeralVariables == nil {
		spec.EphemeralVariables = map[string]string{}
	}
	for _, p := range res.Spec.GeneratedPasswords {
		pw, ok := s.Data[passwordKeyPrefix+p.Variable]
		version, err := strconv.ParseInt(string(s.Data[versionKeyPrefix+p.Variable]), 10, 64)
		if !ok || err != nil {
			continue
		}
		spec.EphemeralVariables[p.Variable] = string(pw)
		if p.VersionVariable != "" {
			if spec.Variables == nil {
				spec.Variables = map[string]any{}
			}
			spec.Variables[p.VersionVariable] = version
		}
	}
	return due, nil
}

// ensurePasswords makes the passwords s lacks (s nil: all of them, in a new Secret), or all of
// them again when a rotation is asked, and writes the Secret (create, or update at s's
// resourceVersion: a conflict is retried by the work queue). Each new password's version is the
// Unix time in seconds, above the one it replaces. It returns the Secret as written, or s when
// nothing was due.
func (r *Keeper) ensurePasswords(ctx context.Context, res *v1alpha1.InfraResource, s *corev1.Secret) (*corev1.Secret, error) {
	name := passwordSecretName(res)
	if name == "" {
		return nil, fmt.Errorf("generated passwords: the resource has no state Secret name yet")
	}
	create := s == nil
	if create {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name,
			Labels: map[string]string{statebackend.LabelResource: v1alpha1.LabelValue(res.Name)}}, Type: corev1.SecretTypeOpaque}
	}
	rotate := !create && rotationAsked(res, s)
	due := missingPasswords(res, s)
	if rotate {
		due = nil
		for _, p := range res.Spec.GeneratedPasswords {
			due = append(due, p.Variable)
		}
	}
	if len(due) == 0 {
		return s, nil
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	now := time.Now().Unix()
	for _, p := range res.Spec.GeneratedPasswords {
		if !slices.Contains(due, p.Variable) {
			continue
		}
		if old, ok := s.Data[passwordKeyPrefix+p.Variable]; ok && rotate {
			if _, kept := s.Data[previousKeyPrefix+p.Variable]; !kept {
				s.Data[previousKeyPrefix+p.Variable] = old // an earlier rotation not applied yet keeps its older one
			}
		}
		version := now
		if old, err := strconv.ParseInt(string(s.Data[versionKeyPrefix+p.Variable]), 10, 64); err == nil && old >= version {
			version = old + 1
		}
		s.Data[passwordKeyPrefix+p.Variable] = []byte(generatePassword(passwordLength(p)))
		s.Data[versionKeyPrefix+p.Variable] = []byte(strconv.FormatInt(version, 10))
	}
	if v := res.Annotations[v1alpha1.AnnotationRotatePasswords]; v != "" {
		s.Annotations[annotationRotationHandled] = v
	}
	var err error
	if create {
		err = r.api.Create(ctx, s)
	} else {
		err = r.api.Update(ctx, s)
	}
	if err != nil {
		return nil, fmt.Errorf("writing password Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	if rotate {
		r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonPasswordsRotated, "Rotate",
			"%d generated password(s) made again as %s=%q asked; the next apply sends them", len(due),
			v1alpha1.AnnotationRotatePasswords, res.Annotations[v1alpha1.AnnotationRotatePasswords])
	}
	return s, nil
}

// appliedPasswords returns the passwords the infrastructure has (variable → password): for each
// of spec.generatedPasswords the one a rotation replaced while no apply has sent the new one, else
// the current one; nil without a password Secret. What the connection Secret gets when it is
// written from the state without a run.
func (r *Keeper) appliedPasswords(ctx context.Context, res *v1alpha1.InfraResource) (map[string]string, error) {
	if len(res.Spec.GeneratedPasswords) == 0 {
		return nil, nil
	}
	s, err := r.readPasswordSecret(ctx, res)
	if err != nil || s == nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range res.Spec.GeneratedPasswords {
		if pw, ok := s.Data[previousKeyPrefix+p.Variable]; ok {
			out[p.Variable] = string(pw)
		} else if pw, ok := s.Data[passwordKeyPrefix+p.Variable]; ok {
			out[p.Variable] = string(pw)
		}
	}
	return out, nil
}

// PasswordsApplied records that an apply which sent the passwords sent (variable → password)
// succeeded: the copies a rotation kept of the passwords they replaced are removed, for the
// variables whose current password is the one sent (one Update at the resourceVersion read; a
// conflict is retried by the work queue). Nothing is written when nothing was kept.
func (r *Keeper) PasswordsApplied(ctx context.Context, res *v1alpha1.InfraResource, sent map[string]string) error {
	if len(res.Spec.GeneratedPasswords) == 0 {
		return nil
	}
	s, err := r.readPasswordSecret(ctx, res)
	if err != nil || s == nil {
		return err
	}
	changed := false
	for _, p := range res.Spec.GeneratedPasswords {
		if _, kept := s.Data[previousKeyPrefix+p.Variable]; kept && string(s.Data[passwordKeyPrefix+p.Variable]) == sent[p.Variable] {
			delete(s.Data, previousKeyPrefix+p.Variable)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := r.api.Update(ctx, s); err != nil {
		return fmt.Errorf("password Secret %s/%s: removing the passwords a rotation replaced, now applied: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// WithPasswords is outs and, under each password's connection Secret key (replacing an output of
// that name), the passwords of passwords (variable → password) that spec.generatedPasswords
// names: what the connection Secret holds.
func WithPasswords(res *v1alpha1.InfraResource, outs map[string]tfjson.Output, passwords map[string]string) map[string]tfjson.Output {
	if len(res.Spec.GeneratedPasswords) == 0 {
		return outs
	}
	all := maps.Clone(outs)
	if all == nil {
		all = map[string]tfjson.Output{}
	}
	for _, p := range res.Spec.GeneratedPasswords {
		if pw, ok := passwords[p.Variable]; ok {
			all[p.SecretKey()] = tfjson.Output{Value: []byte(strconv.Quote(pw)), Sensitive: true}
		}
	}
	return all
}

// ReclaimPasswords carries out the reclaim policy on the password Secret once the state's is
// done: Delete deletes it, Retain labels it as the state (LabelOrphanedFrom set, LabelResource
// removed) so that the infrastructure's password stays findable. A missing Secret is not an error.
func (r *Keeper) ReclaimPasswords(ctx context.Context, res *v1alpha1.InfraResource) error {
	name := passwordSecretName(res)
	if len(res.Spec.GeneratedPasswords) == 0 || name == "" {
		return nil
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name}}
	var err error
	if res.Spec.ReclaimPolicy == v1alpha1.ReclaimRetain {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q,%q:null}}}`,
			statebackend.LabelOrphanedFrom, v1alpha1.LabelValue(res.Name), statebackend.LabelResource)
		err = r.api.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch))
	} else {
		err = r.api.Delete(ctx, s)
	}
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reclaiming password Secret %s/%s: %w", r.namespace, name, err)
	}
	return nil
}
