package statebackend

import (
	"context"
	"fmt"
)

// IssueAdoptedRun issues credentials, as IssueRunAs does, for the run runID that another manager
// started and this one adopts (a runner carried it on to this leader after its predecessor died,
// see runners.Dispatcher): the lock the run holds on the state with this suffix, as stored in its
// Lease and naming the run (RunOfLock), counts as taken with the new credentials, so that the run
// writes its state and unlocks under it (checkOwnLock). A lock that names another run, or none, is
// not taken over: the run takes its next lock through this server as any run does.
//
// It returns the credentials, their revoke (see IssueRunAs: call it once the run's processes have
// exited), and the ID of the lock taken over ("" for none); or the error of reading the Lease, in
// which case nothing is issued.
func (s *Server) IssueAdoptedRun(ctx context.Context, runID, suffix string, labels map[string]string) (RunCredentials, func(), string, error) {
	if runID == "" {
		return RunCredentials{}, nil, "", fmt.Errorf("adopting a run of state %s: no run ID", suffix)
	}
	lock, err := s.store.For(suffix).InspectLock(ctx)
	if err != nil {
		return RunCredentials{}, nil, "", fmt.Errorf("adopting run %s: reading the lock of state %s: %w", runID, suffix, err)
	}
	creds, revoke := s.IssueRunAs(runID, suffix, labels)
	lockID := ""
	if id, ok := RunOfLock(lock); ok && id == runID {
		lockID = lock.ID
		s.creds.takeOver(creds.Username, lockID)
	}
	return creds, revoke, lockID, nil
}
