package gateway

import (
	"context"

	"github.com/tether-dev/tether/internal/task"
)

// submitToStore is the store's submit: a plain one, or one that places its
// turn (docs/protocol.md, "Versions").
func (s *Server) submitToStore(ctx context.Context, req task.SubmitRequest) (task.SubmitResult, error) {
	if req.ParentTaskID == "" && req.VersionOf == "" {
		return s.store.Submit(ctx, req)
	}
	return s.store.SubmitVersion(ctx, req)
}
