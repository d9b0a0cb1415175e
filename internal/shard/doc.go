// Package shard divides resources among the manager's live replicas, each of which reconciles,
// runs, drift-checks and serves the state of its share only.
//
// The scheme is rendezvous (highest random weight) hashing over a membership of Leases, with a
// Lease per bucket as the fence:
//
//   - Membership: every replica renews a Lease conductor-tf-member-<pod> (label
//     conductor.io/shard=member) every RetryPeriod. A member is live, as another replica sees it,
//     while that Lease's renewTime was last seen to change less than LeaseDuration ago (by the
//     observer's own clock, as client-go's leader election judges a leader: no clocks compared).
//   - Buckets: a resource's key (its LabelResource value) hashes to one of Buckets buckets
//     (FNV-64a, modulo). A bucket's desired owner is the live member with the highest FNV-64a
//     score of the identity and the bucket (FNV-64a, mixed): a member joining or leaving moves only its own share (1/N of
//     the buckets), and every replica computes the same owner from the same membership.
//   - Fencing: a replica serves a bucket only while the bucket's Lease conductor-tf-bucket-NNN
//     (label conductor.io/shard=bucket) names it holder, and its own member Lease was renewed less
//     than RenewDeadline ago. The bucket Lease is written only on a handover (an update
//     conditioned on its resourceVersion, so two replicas never both take it); its
//     leaseTransitions count the handovers (the bucket's epoch). A holder is renewed through its
//     member Lease: renewing one Lease per replica, not one per bucket, keeps an idle
//     cluster's writes at one per replica every RetryPeriod.
//   - Handover: the old owner of a bucket that should move stops admitting reconciles of it,
//     waits for those under way (with their runs) to end, then clears the holder; the new owner
//     takes it then. A replica that died holds its buckets until its member Lease has not been
//     seen renewed for LeaseDuration; by then its own process refuses to serve them (its renewal is
//     past RenewDeadline), and the new owner still leaves the dead runs' locks alone for the
//     resource reconciler's fences counted from the handover (Since).
//
// Consistent hashing with virtual nodes (a ring) would do as well; rendezvous hashing needs no ring
// to keep, and with 256 buckets and a few replicas costs nothing to recompute every period.
package shard
