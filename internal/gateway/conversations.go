package gateway

import (
	"context"
	"net/http"

	"github.com/tether-dev/tether/internal/task"
)

// deleteConversation is DELETE /v1/conversations/{id}: the conversation's
// answers in progress are cancelled first (so every tab sees them end and
// their runners stop), then the conversation goes with its messages, tasks
// and uploads, whose bytes are removed before the answer. Another user's
// conversation is not_found, like a missing one. 204 on success.
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request, user string) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	// Answers in progress are among the newest messages.
	msgs, _, err := s.store.History(r.Context(), user, id, task.Page{Limit: task.MaxLimit})
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Role == task.RoleAssistant && m.TaskID != nil && m.Status != nil && *m.Status == task.MessageGenerating {
			if _, err := s.cancelTask(r.Context(), user, *m.TaskID); err != nil && task.ErrorCode(err) != task.CodeNotFound {
				return err
			}
		}
	}
	if err := s.store.DeleteConversation(r.Context(), user, id); err != nil {
		return err
	}
	if s.cfg.Uploads != nil {
		// The bytes go now; if this fails, the maintenance sweep retries.
		if _, err := s.cfg.Uploads.Sweep(context.WithoutCancel(r.Context())); err != nil {
			s.log.Warn("remove the uploads of a deleted conversation", "conversation_id", id, "err", err)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
