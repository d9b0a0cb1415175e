package runners

import (
	"context"
	"errors"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Runners reach the leader by design, not by the Service's pick (issue 64): a replica that is not
// the leader refuses a stream with FailedPrecondition and, when it knows where the leader is
// (DispatcherOptions.Leader), an errdetails.ErrorInfo of reason NotLeaderReason whose metadata
// "leader" is the leader's run protocol address (host:port, its pod's IP). The runner opens its
// next streams — a Hello or a Resume — there, verifying the manager's certificate against the name
// of the Service as before (every replica's certificate carries it); a named leader that does not
// answer within leaderDialTimeout, or refuses in turn, is forgotten and the Service used again.
// A resume after the leader died thus waits only for the next leader (its lease, leaseDuration
// plus a retry period) and one redirect, not for the Service to pick it at random.

// NotLeaderReason is the ErrorInfo reason of a refusal by a replica that is not the leader.
const NotLeaderReason = "NOT_LEADER"

// notLeaderMessage is the message of that refusal; a refusal of it without an ErrorInfo (a manager
// that names no leader) is read as one too.
const notLeaderMessage = "this manager replica is not the leader"

// errorDomain is the ErrorInfo domain of the run protocol's refusals.
const errorDomain = "conductor.io"

// leaderDialTimeout bounds the TCP connect to a leader named by a refusal: a pod that is gone may
// drop packets rather than refuse them, and a resume must not wait grpc's 20 s connect timeout.
const leaderDialTimeout = 3 * time.Second

// notLeader is the refusal of a replica that is not the leader, naming leader (host:port) when it
// is not "".
func notLeader(leader string) error {
	st := status.New(codes.FailedPrecondition, notLeaderMessage)
	if leader == "" {
		return st.Err()
	}
	named, err := status.New(codes.FailedPrecondition, notLeaderMessage+"; the leader is at "+leader).
		WithDetails(&errdetails.ErrorInfo{Reason: NotLeaderReason, Domain: errorDomain, Metadata: map[string]string{"leader": leader}})
	if err != nil {
		return st.Err()
	}
	return named.Err()
}

// leaderNamed returns the leader's address a refusal err names (notLeader), and whether err is a
// refusal by a replica that is not the leader at all.
func leaderNamed(err error) (leader string, refused bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return "", false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == NotLeaderReason && info.GetDomain() == errorDomain {
			addr := info.GetMetadata()["leader"]
			if _, _, err := net.SplitHostPort(addr); err == nil {
				return addr, true
			}
			return "", true
		}
	}
	return "", st.Message() == notLeaderMessage
}

// leaderTarget returns where the runner's next stream goes: the leader a refusal named, or the
// Service (Manager).
func (r *Runner) leaderTarget() string {
	if p := r.leader.Load(); p != nil {
		return *p
	}
	return r.Manager
}

// observe follows what a stream opened to target ended with: a refusal naming the leader makes it
// the target of the next streams; a refusal naming none, or a target named earlier that does not
// answer (Unavailable), sends them through the Service again.
func (r *Runner) observe(err error, target string) {
	if err == nil {
		return
	}
	if leader, refused := leaderNamed(err); refused {
		if leader == "" || leader == target {
			// No leader known, or the replica named leader refused in turn: the Service.
			r.leader.Store(nil)
			return
		}
		r.leader.Store(&leader)
		r.Log.Info("the manager replica reached is not the leader: the next stream goes to the leader it names", "leader", leader)
		return
	}
	if target == r.Manager || (status.Code(err) != codes.Unavailable && !errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	if p := r.leader.Load(); p != nil && *p == target {
		r.leader.CompareAndSwap(p, nil) // a leader named since is kept
	}
}
