package gateway

import (
	"context"

	"github.com/tether-dev/tether/internal/task"
)

// versionStore submits a turn placed by the client (a new version of a
// turn, or one that follows a turn other than the newest); the Postgres
// store has it.
type versionStore interface {
	SubmitVersion(ctx context.Context, req task.SubmitRequest) (task.SubmitResult, error)
}

// submitToStore is the store's submit: a plain one, or one that places its
// turn (docs/protocol.md, "Versions").
func (s *Server) submitToStore(ctx context.Context, req task.SubmitRequest) (task.SubmitResult, error) {
	if req.ParentTaskID == "" && req.VersionOf == "" {
		return s.store.Submit(ctx, req)
	}
	vs, ok := s.store.(versionStore)
	if !ok {
		return task.SubmitResult{}, task.Errorf(task.CodeInvalid, "this server keeps no versions")
	}
	return vs.SubmitVersion(ctx, req)
}
