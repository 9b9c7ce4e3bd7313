package gateway

import (
	"context"
	"io"
	"net/http"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// tellUser publishes a user-level event; a failure is logged, not returned:
// the change is committed, and tabs see it on their next read.
func (s *Server) tellUser(user string, data []byte) {
	if err := s.bus.PublishUser(user, data); err != nil {
		s.log.Warn("publish conversation event", "err", err)
	}
}

// renameConversation is PATCH /v1/conversations/{id} {"title":"..."}: 200
// with the Conversation, and a "conversation" event (renamed) to every tab
// of the user.
func (s *Server) renameConversation(w http.ResponseWriter, r *http.Request, user string) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 8<<10))
	if err != nil {
		return task.Errorf(task.CodeTooLarge, "request body too large")
	}
	title, err := protocol.DecodeRename(body)
	if err != nil {
		return err
	}
	c, err := s.store.RenameConversation(r.Context(), user, id, title)
	if err != nil {
		return err
	}
	s.tellUser(user, protocol.ConversationRenamedEvent(c))
	writeJSON(w, http.StatusOK, protocol.ConversationBody(c))
	return nil
}

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
	s.tellUser(user, protocol.ConversationDeletedEvent(id))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
