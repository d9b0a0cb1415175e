package v1alpha1

// RunHistory returns the resource's runs newest first: status.lastRun, then status.runs. A run
// is listed once by its id: a resource last written by an earlier controller, whose runs[0]
// repeated lastRun, reads the same as one written since.
func (s *InfraResourceStatus) RunHistory() []RunStatus {
	out := make([]RunStatus, 0, len(s.Runs)+1)
	seen := map[string]bool{}
	add := func(r RunStatus) {
		if r.ID != "" && seen[r.ID] {
			return
		}
		seen[r.ID] = true
		out = append(out, r)
	}
	if s.LastRun != nil {
		add(*s.LastRun)
	}
	for _, r := range s.Runs {
		add(r)
	}
	return out
}
